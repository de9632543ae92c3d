"""Rewrite legacy MLC-course code (TVM 0.9/0.10 spellings) so that it runs on TVM 0.27.

The course text predates two big TVM renames (``tir`` split into ``tirx``/``s_tir``, ``block``
became ``sblock``) and several API changes (``tvm.nd``, ``tvm.build``, meta_schedule's
``TuneConfig``, the old ``R.call_tir`` signature). ``convert`` fixes those in the *text*: it
finds the nodes with ``ast`` and splices small edits into the original string, so the user's
layout and comments survive. Whatever it recognises but cannot fix gets a
``# mlc_lab: could not convert: ...`` line above the statement instead of being dropped.

This module never imports TVM: it is text work only, and the session loader runs it on
TVMScript before TVM parses it (legacy TVMScript does not parse on 0.27 at all). Three parts live
beside it: ``compat_source`` holds the text being edited and the names it binds, ``compat_flows``
follows each built module through names and helpers (so ``tvm.build`` becomes ``tvm.compile`` only
when every use can follow), ``compat_notebook`` converts a notebook's cells as one program.
"""

from __future__ import annotations

import ast
import bisect
import re

from mlc_lab.errors import ConvertError
from mlc_lab.text.compat_flows import MODULE_ATTRS, RUNTIME_RENAMES, Flow, dotted_name, is_imported_module
from mlc_lab.text.compat_source import SCHEDULE_MODULES, Edit, Source, decorator_name, parse, Names

__all__ = ["MARKER", "cli_target_to_dict", "convert", "looks_legacy", "parse"]

MARKER = "# mlc_lab: could not convert: "

# Names that moved from tvm.tir to tvm.s_tir (schedule side); everything else went to tvm.tirx.
# Values are the new names where the class was renamed as well.
_S_TIR_NAMES = {
    "Schedule": "Schedule",
    "schedule": "schedule",
    "ScheduleError": "ScheduleError",
    "ScheduleState": "ScheduleState",
    "StmtSRef": "StmtSRef",
    "TensorIntrin": "TensorIntrin",
    "Trace": "Trace",
    "MatchBufferRegion": "MatchBufferRegion",
    "Block": "SBlock",
    "BlockRealize": "SBlockRealize",
    "meta_schedule": "meta_schedule",
    "dlight": "dlight",
}
# tvm.contrib helpers that now live in tvm.support.
_SUPPORT_MODULES = {"cc", "clang", "emcc", "ndk", "nvcc", "rocm", "tar", "utils", "xcode"}
_ND_NAMES = {"array": "tensor", "empty": "empty", "NDArray": "Tensor"}
# Keywords of the old ms.TuneConfig that tune_tir now takes directly.
_TUNE_CONFIG_KEYS = {"max_trials_global", "num_trials_per_iter", "max_trials_per_task", "task_scheduler", "strategy"}
_TARGET_KINDS = ("llvm", "cuda", "c", "rocm", "metal", "vulkan", "opencl", "nvptx", "webgpu")
# "llvm --num-cores=1", "llvm -mcpu=znver4", "cuda -arch=sm_80", "llvm -num-cores 2"
_CLI_TARGET = re.compile(r"^\s*(%s)((?:\s+--?[A-Za-z][\w-]*(?:=\S*|\s+(?!-)\S+)?)+)\s*$" % "|".join(_TARGET_KINDS))
_CLI_OPTION = re.compile(r"--?([A-Za-z][\w-]*)(?:=(\S*)|\s+(?!-)(\S+))?")
_LIST_OPTIONS = {"keys", "libs", "mattr"}

# Cheap pre-check: text without any of these cannot need a rewrite.
_LEGACY_HINT = re.compile(
    r"tvm\.script import[^\n]*\btir\b|T\.block|Buffer\s*\[|T\.alloc_buffer|prim_func|tir\.noalias"
    r"|\btir\.|tvm\.tir\b|from tvm import[^\n]*\b(tir|meta_schedule)\b|meta_schedule|get_block\b|tvm\.nd\b"
    r"|\bbuild\s*\(|time_evaluator|imported_modules|get_source|entry_name|device\s*\("
    r"|register_func|structural_equal|structural_hash"
    r"|contrib|call_tir|call_dps_packed|out_sinfo|name_hint|TensorStructInfo|tune_tir"
    r"|relax\.output|Tensor\s*\(|create_schedule|tvm\.lower\b|\bBlockRV\b|\b(%s)\s+-" % "|".join(_TARGET_KINDS)
)


def cli_target_to_dict(target: str) -> str | None:
    """``"llvm --num-cores=1"`` -> ``'{"kind": "llvm", "num-cores": 1}'`` (source text), else None."""
    m = _CLI_TARGET.match(target)
    if not m:
        return None
    items = [f'"kind": "{m.group(1)}"']
    for opt in _CLI_OPTION.finditer(m.group(2)):
        key, value = opt.group(1), opt.group(2) if opt.group(2) is not None else opt.group(3)
        if value is None:
            rendered = "True"
        elif key in _LIST_OPTIONS:
            rendered = "[" + ", ".join(f'"{v}"' for v in value.split(",") if v) + "]"
        elif re.fullmatch(r"-?\d+", value):
            rendered = value
        else:
            rendered = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
        items.append(f'"{key}": {rendered}')
    return "{" + ", ".join(items) + "}"


def _target_kind(text: str) -> str:
    return text.strip().split(" ")[0].split("-")[0].strip()


class _Rewriter(ast.NodeVisitor):
    def __init__(self, src: Source, tree: ast.Module):
        self.src = src
        self.tree = tree
        self.names = Names(tree)
        self.edits: list[Edit] = []
        self.markers: dict[int, list[str]] = {}  # statement start offset -> reasons
        self.need_tvm_ffi = False
        self.stmt_stack: list[ast.stmt] = []
        self.module_class: tuple[str, set[str]] | None = None  # (class name, its function names)
        self.in_prim_func = False
        self.in_relax_func = False

    # -- bookkeeping -------------------------------------------------------------------------

    def replace(self, start: int, end: int, text: str) -> None:
        if self.src.text[start:end] != text:
            self.edits.append(Edit(start, end, text))

    def replace_node(self, node: ast.AST, text: str) -> None:
        self.replace(self.src.start(node), self.src.end(node), text)

    def rename_attr(self, node: ast.Attribute, new: str) -> None:
        end = self.src.end(node)
        self.replace(end - len(node.attr), end, new)

    def mark(self, reason: str) -> None:
        stmt = self.stmt_stack[-1] if self.stmt_stack else None
        line = stmt.lineno if stmt is not None else 1
        key = self.src.line_starts[line - 1]
        reasons = self.markers.setdefault(key, [])
        if reason not in reasons:
            reasons.append(reason)

    def visit(self, node: ast.AST):
        if isinstance(node, ast.stmt):
            self.stmt_stack.append(node)
            try:
                return super().visit(node)
            finally:
                self.stmt_stack.pop()
        return super().visit(node)

    # -- scopes: ir_module classes, prim funcs, relax functions --------------------------------

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        decos = {decorator_name(d) for d in node.decorator_list}
        is_module = any(d and (d.endswith("ir_module")) for d in decos)
        saved = self.module_class
        if is_module:
            funcs = {b.name for b in node.body if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef))}
            self.module_class = (node.name, funcs)
        self.generic_visit(node)
        self.module_class = saved

    def _is_prim_func(self, deco: ast.AST) -> bool:
        name = decorator_name(deco)
        return name in {f"{t}.prim_func" for t in self.names.T} or name in (
            "tvm.script.tir.prim_func",
            "tvm.script.tirx.prim_func",
        )

    def _is_relax_func(self, deco: ast.AST) -> bool:
        return decorator_name(deco) in {f"{r}.function" for r in self.names.R}

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        prim = [d for d in node.decorator_list if self._is_prim_func(d)]
        relax = any(self._is_relax_func(d) for d in node.decorator_list)
        for deco in prim:
            self._add_s_tir(deco)
        saved = self.in_prim_func, self.in_relax_func
        self.in_prim_func = bool(prim) or self.in_prim_func
        self.in_relax_func = relax or self.in_relax_func
        for deco in node.decorator_list:
            if deco not in prim:
                self.visit(deco)
        self.visit(node.args)
        if node.returns is not None:
            self.visit(node.returns)
        for stmt in node.body:
            self.visit(stmt)
        self.in_prim_func, self.in_relax_func = saved

    def _add_s_tir(self, deco: ast.AST) -> None:
        # An sblock-based PrimFunc must say s_tir=True on 0.27, else it is "not well-formed".
        if not isinstance(deco, ast.Call):
            self.replace(self.src.end(deco), self.src.end(deco), "(s_tir=True)")
        elif not any(k.arg == "s_tir" for k in deco.keywords):
            self._append_keyword(deco, "s_tir=True")

    # -- imports -------------------------------------------------------------------------------

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            new = self._new_module(a.name, [])
            if new and new != a.name:
                start = self.src.offset(a.lineno, a.col_offset)
                self.replace(start, start + len(a.name), new)

    def _new_module(self, module: str, imported: list[str]) -> str | None:
        """New dotted path of a legacy module, None when it did not move."""
        parts = module.split(".")
        if parts[0] != "tvm" or len(parts) < 2:
            return None
        if parts[1] == "meta_schedule":
            return "tvm.s_tir." + module[len("tvm.") :]
        if parts[1] == "contrib" and len(parts) > 2 and parts[2] in _SUPPORT_MODULES:
            return "tvm.support." + ".".join(parts[2:])
        if parts[1] == "tir":
            if len(parts) > 2:
                home = "s_tir" if parts[2] in _S_TIR_NAMES else "tirx"
                return ".".join(["tvm", home] + parts[2:])
            return "tvm.s_tir" if imported and all(n in _S_TIR_NAMES for n in imported) else "tvm.tirx"
        return None

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module:
            return
        names = [a.name for a in node.names]
        if node.module == "tvm.script":
            for a in node.names:
                if a.name == "tir":
                    start = self.src.offset(a.lineno, a.col_offset)
                    self.replace(start, start + 3, "tirx" if a.asname else "tirx as tir")
            return
        if node.module == "tvm.contrib":
            moved = [n for n in names if n in _SUPPORT_MODULES]
            if moved and len(moved) == len(names):
                self._replace_from_module(node, "tvm.support")
            elif moved:
                self.mark(f"tvm.contrib.{moved[0]} moved to tvm.support; split this import")
            return
        if node.module == "tvm":
            self._split_tvm_import(node)
            return
        if node.module in SCHEDULE_MODULES:
            for a in node.names:
                if a.name == "BlockRV":
                    start = self.src.offset(a.lineno, a.col_offset)
                    self.replace(start, start + len("BlockRV"), "SBlockRV")
        if node.module == "tvm.tir" and 0 < sum(n in _S_TIR_NAMES for n in names) < len(names):
            self.mark("these names are now split between tvm.tirx and tvm.s_tir; split this import")
            return
        new = self._new_module(node.module, names)
        if new and new != node.module:
            self._replace_from_module(node, new)

    def _replace_from_module(self, node: ast.ImportFrom, new: str) -> None:
        start = self.src.start(node)
        m = re.match(r"from\s+", self.src.text[start:])
        mod_start = start + m.end()
        self.replace(mod_start, mod_start + len(node.module), new)

    def _split_tvm_import(self, node: ast.ImportFrom) -> None:
        # `from tvm import relax, meta_schedule as ms, tir` -> separate, modern imports
        keep, extra = [], []
        uses_s_tir = self._tir_alias_uses_s_tir()
        for a in node.names:
            text = a.name + (f" as {a.asname}" if a.asname else "")
            if a.name == "meta_schedule":
                extra.append(f"from tvm.s_tir import {text}")
            elif a.name == "tir":
                keep.append(f"tirx as {a.asname or 'tir'}")
                if uses_s_tir:
                    keep.insert(0, "s_tir")
            else:
                keep.append(text)
        if not extra and all(a.name != "tir" for a in node.names):
            return
        lines = ([f"from tvm import {', '.join(keep)}"] if keep else []) + extra
        indent = re.match(r"\s*", self.src.line(node.lineno)).group(0)
        self.replace_node(node, ("\n" + indent).join(lines))

    def _tir_alias_uses_s_tir(self) -> bool:
        for n in ast.walk(self.tree):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
                if n.value.id in self.names.tir and n.attr in _S_TIR_NAMES:
                    return True
        return False

    # -- attribute chains: tvm.tir.*, tvm.nd.*, T.block, sch.get_block ... --------------------

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "BlockRV" and self.names.blockrv_imported:
            self.replace_node(node, "SBlockRV")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        dotted = dotted_name(node)
        if dotted is not None and self._rewrite_dotted(node, dotted):
            return
        if node.attr == "get_block":
            self.rename_attr(node, "get_sblock")
        elif node.attr == "create_schedule":
            self.mark("te.create_schedule (TE schedules) was removed; use te.create_prim_func and tvm.s_tir.Schedule")
        elif node.attr == "name_hint":
            self.mark(".name_hint is gone on relax/tir variables (use .name); GlobalVar keeps it")
        elif node.attr in MODULE_ATTRS and (flow := self._flow_of(node.value)) is not None:
            if flow.is_executable:  # the Executable of tvm.compile keeps its runtime module in `.mod`
                if MODULE_ATTRS[node.attr]:
                    self.rename_attr(node, MODULE_ATTRS[node.attr])
            elif node.attr in RUNTIME_RENAMES:  # tvm.build kept: only the names 0.27 lost
                self.rename_attr(node, RUNTIME_RENAMES[node.attr])
        elif node.attr == "imported_modules":
            # a module this file does not build (a parameter, a dict's value): 0.27's runtime.Module
            # calls the list `imports`, and legacy code built it with tvm.build
            self.rename_attr(node, "imports")
        elif node.attr == "get_source" and (
            is_imported_module(node.value)
            or (isinstance(node.value, ast.Name) and node.value.id in self.names.device_modules)
        ):
            self.rename_attr(node, "inspect_source")  # runtime.Module.get_source became inspect_source
        self.generic_visit(node)

    def _flow_of(self, node: ast.AST) -> Flow | None:
        """The built module this expression is: a name bound to one, a build call, a helper's call."""
        if isinstance(node, ast.Name):
            return self.names.flow_by_name.get(node.id)
        if isinstance(node, ast.Call):
            for flow in self.names.flows:
                if any(node is call for call in flow.calls) or (
                    isinstance(node.func, ast.Name) and node.func.id in flow.helpers
                ):
                    return flow
        return None

    def _rewrite_dotted(self, node: ast.Attribute, dotted: str) -> bool:
        """Handle a pure name chain; True when it is fully dealt with."""
        head, *rest = dotted.split(".")
        if head in self.names.tvm and rest == ["build"]:
            if any(call.func is node and flow.modernize for flow in self.names.flows for call in flow.calls):
                self.replace_node(node, f"{head}.compile")
            return True
        if head in self.names.tvm and rest[:2] == ["s_tir", "schedule"] and rest[-1] == "BlockRV":
            self.rename_attr(node, "SBlockRV")  # half-converted code: the module is right, the class is not
            return True
        if head in self.names.tvm and rest:
            new = self._tvm_chain(rest)
            if new is None:
                return True
            if new[0] == "tvm_ffi":
                self.need_tvm_ffi = True
                text = ".".join(new)
            else:
                text = ".".join([head] + new)
        elif head in self.names.relax and rest == ["vm", "build"]:
            text = f"{sorted(self.names.tvm)[0]}.compile"
        elif head in self.names.tir and rest and rest[0] in _S_TIR_NAMES:
            # `from tvm import tir` becomes `from tvm import s_tir, tirx as tir`
            text = ".".join(["s_tir", _S_TIR_NAMES[rest[0]]] + rest[1:])
        elif head in self.names.T and len(rest) == 1:
            renamed = {"block": "sblock", "block_attr": "sblock_attr"}
            if self.in_prim_func:
                # T.alloc_buffer is now a statement-level buffer that schedules cannot move
                renamed["alloc_buffer"] = "sblock_alloc_buffer"
            if rest[0] in renamed:
                self.rename_attr(node, renamed[rest[0]])
            return True
        elif head in self.names.relax and rest == ["TensorStructInfo"]:
            self.rename_attr(node, "TensorType")
            return True
        elif head in self.names.relax and rest == ["output"] and self.in_relax_func:
            text = f"{sorted(self.names.R)[0]}.output"
        else:
            return False
        if text.endswith(".BlockRV") and ".s_tir." in f".{text}":
            text = text[: -len("BlockRV")] + "SBlockRV"
        if self.src.segment(node) == dotted:
            self.replace_node(node, text)
        else:
            self.mark(f"{dotted} is now {text} (spaces inside the name: fix by hand)")
        return True

    def _tvm_chain(self, rest: list[str]) -> list[str] | None:
        """New spelling of tvm.<rest> as parts after the tvm alias (None: unchanged)."""
        first = rest[0]
        if first == "tir" and len(rest) > 1:
            if rest[1] in _S_TIR_NAMES:
                return ["s_tir", _S_TIR_NAMES[rest[1]]] + rest[2:]
            return ["tirx"] + rest[1:]
        if first == "tir":
            return ["tirx"]
        if first == "nd" and len(rest) > 1:
            if rest[1] in _ND_NAMES:
                return ["runtime", _ND_NAMES[rest[1]]] + rest[2:]
            self.mark(f"tvm.nd.{rest[1]} is gone; tvm.nd moved to tvm.runtime (tensor/empty/Tensor)")
            return None
        if rest == ["register_func"]:
            return ["register_global_func"]
        if rest[:2] == ["ir", "structural_equal"] or rest[:2] == ["ir", "structural_hash"]:
            return ["tvm_ffi"] + rest[1:]
        if first == "contrib" and len(rest) > 1 and rest[1] in _SUPPORT_MODULES:
            return ["support"] + rest[1:]
        if first == "meta_schedule":
            return ["s_tir"] + rest
        if rest[:2] == ["script", "tir"]:
            return ["script", "tirx"] + rest[2:]
        if rest[-1:] == ["create_schedule"] or rest == ["lower"]:
            self.mark(
                f"tvm.{'.'.join(rest)} (TE schedules) was removed; use te.create_prim_func and tvm.s_tir.Schedule"
            )
        return None

    # -- T.Buffer[...] -> T.Buffer(...) ------------------------------------------------------------

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if dotted_name(node.value) in {f"{t}.Buffer" for t in self.names.T}:
            open_at = self.src.text.index("[", self.src.end(node.value))
            close_at = self.src.end(node) - 1
            self.replace(open_at, open_at + 1, "(")
            self.replace(close_at, close_at + 1, ")")
            shape = node.slice.elts[0] if isinstance(node.slice, ast.Tuple) else node.slice
            if not isinstance(shape, (ast.Tuple, ast.List)):
                # a bare extent was allowed in brackets; the call wants a shape tuple
                self.replace_node(shape, f"({self.src.segment(shape)},)")
                return
            self.visit(shape)
            return
        self.generic_visit(node)

    # -- string constants: "tir.noalias", CLI targets ---------------------------------------------

    def visit_Constant(self, node: ast.Constant) -> None:
        if not isinstance(node.value, str):
            return
        if node.value == "tir.noalias":
            seg = self.src.segment(node)
            start = self.src.start(node) + seg.index("tir.noalias")
            self.replace(start, start + len("tir.noalias"), "tirx.noalias")
        elif _CLI_TARGET.match(node.value):
            self.replace_node(node, cli_target_to_dict(node.value))

    def visit_JoinedStr(self, _node: ast.JoinedStr) -> None:
        return  # f-string pieces are not separate literals in the source

    # -- calls: R.call_tir, tune_tir, bare relax Tensor annotations -------------------------------

    def visit_Call(self, node: ast.Call) -> None:
        name = dotted_name(node.func)
        skip: set[int] = set()
        if name in {f"{r}.{f}" for r in self.names.R for f in ("call_tir", "call_dps_packed")}:
            skip = self._call_tir(node, name.split(".")[0])
        elif name in {f"{m}.tune_tir" for m in self.names.ms}:
            skip = self._tune_tir(node)
        elif name == "Tensor" and self.in_relax_func:
            self.replace(self.src.start(node), self.src.start(node), f"{sorted(self.names.R)[0]}.")
        if name in self.names.dotted("device") and node.args:
            self._device_kind(node.args[0])
        if name in self.names.dotted("build") and len(node.args) > 1 and isinstance(node.args[1], ast.List):
            self.mark(
                "tvm.build(schedule, [tensors]) is the removed TE flow; build "
                "te.create_prim_func([...]) with tvm.compile instead"
            )
        for kw in node.keywords:
            if kw.arg == "out_sinfo" and name and name.split(".")[-1].startswith(("call_tir", "call_dps")):
                start = self.src.offset(kw.lineno, kw.col_offset)
                self.replace(start, start + len("out_sinfo"), "out_ty")
        self.visit(node.func)
        for child in list(node.args) + [k.value for k in node.keywords]:
            if id(child) not in skip:
                self.visit(child)

    def _device_kind(self, arg: ast.AST) -> None:
        """``tvm.device("llvm", 0)``: 0.27 takes device names ("cpu", "cuda"), not target kinds."""
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            if _target_kind(arg.value) in {"llvm", "c"}:
                self.replace_node(arg, '"cpu"')
            return
        if isinstance(arg, ast.Name) and arg.id in self.names.strings:
            kinds = {_target_kind(v) for v in self.names.strings[arg.id]}
            if kinds <= {"llvm", "c"}:
                self.replace_node(arg, '"cpu"')
            elif kinds & {"llvm", "c"}:
                self.mark(
                    f'tvm.device({arg.id}): when {arg.id} is an llvm target, the device is "cpu" '
                    "(tvm.device no longer takes target kinds)"
                )

    def _call_tir(self, node: ast.Call, r: str) -> set[int]:
        """Legacy ``R.call_tir(f, args, (shape), dtype=...)`` -> ``out_ty=R.Tensor(...)``."""
        skip: set[int] = set()
        args = node.args
        dtype = next((k for k in node.keywords if k.arg == "dtype"), None)
        if not args:
            return skip
        # the old third argument is a shape: a tuple of extents, not a list of R.Tensor(...)
        legacy_shape = len(args) >= 3 and (
            dtype is not None
            or (isinstance(args[2], (ast.Tuple, ast.List)) and not any(isinstance(e, ast.Call) for e in args[2].elts))
        )
        callee = args[0]
        func_attr_end = self.src.end(node.func)
        func_attr_start = func_attr_end - len(node.func.attr)
        if isinstance(callee, ast.Constant) and isinstance(callee.value, str):
            # a packed (Python/C) function is called with call_dps_packed now
            self.replace(func_attr_start, func_attr_end, "call_dps_packed")
        elif isinstance(callee, ast.Name):
            cls = self.module_class
            if cls and callee.id in cls[1]:
                self.replace_node(callee, f"{cls[0]}.{callee.id}")
                self.replace(func_attr_start, func_attr_end, "call_tir")
            elif cls is None or callee.id not in cls[1]:
                self.mark(
                    f"R.call_tir: `{callee.id}` is not a function of this ir_module; refer to it as <Module>.<func>"
                )
        if legacy_shape:
            if dtype is None:
                self.mark("R.call_tir with a bare output shape needs dtype=")
                return skip
            shape = args[2]
            if len(args) > 3:
                self.mark("R.call_tir: unexpected extra positional arguments")
                return skip
            last = max([shape, dtype.value], key=lambda n: (n.end_lineno, n.end_col_offset))
            start = self.src.start(shape)
            end = self.src.end(last)
            between = [k for k in node.keywords if k is not dtype]
            if between and self.src.start(between[0].value) < end:
                self.mark("R.call_tir: keyword arguments mixed into the output shape; fix by hand")
                return skip
            self.replace(
                start, end, f"out_ty={r}.Tensor({self.src.segment(shape)}, dtype={self.src.segment(dtype.value)})"
            )
            skip.update({id(shape), id(dtype.value)})
        return skip

    def _tune_tir(self, node: ast.Call) -> set[int]:
        """Flatten the 2022 ``config=ms.TuneConfig(...)``/``task_name=`` form of tune_tir."""
        skip: set[int] = set()
        kws = {k.arg: k for k in node.keywords}
        # The 2022 API returned the best Schedule: either its arguments or the way the result is
        # used (`.trace`, `.mod`) give that away.
        legacy = "config" in kws or "task_name" in kws or self._result_used_as_schedule(node)
        if "config" in kws:
            config = kws["config"].value
            fields = config.keywords if isinstance(config, ast.Call) else None
            if (
                fields is None
                or config.args
                or any(k.arg not in _TUNE_CONFIG_KEYS for k in fields)
                or not (dotted_name(config.func) or "").endswith("TuneConfig")
            ):
                self.mark("tune_tir(config=...): TuneConfig is gone; pass its fields to tune_tir directly")
            else:
                kw = kws["config"]
                kw_start = self.src.offset(kw.lineno, kw.col_offset)
                inner = ", ".join(self.src.segment(k) for k in fields)
                if fields and fields[0].lineno != fields[-1].lineno:
                    # one field per line: keep that, at the indentation of `config=`
                    first = self.src.offset(fields[0].lineno, fields[0].col_offset)
                    indent = self.src.text[self.src.line_starts[kw.lineno - 1] : kw_start]
                    indent = indent if not indent.strip() else " " * len(indent)
                    lines = self.src.text[first : self.src.end(fields[-1].value)].split("\n")
                    inner = "\n".join([lines[0]] + [indent + ln.lstrip() for ln in lines[1:]])
                self.replace(kw_start, self.src.end(kw.value), inner)
                skip.add(id(config))
        if "task_name" in kws:
            self._drop_keyword(node, kws["task_name"])
            skip.add(id(kws["task_name"].value))
        if "work_dir" not in kws and None not in kws and len(node.args) < 3:
            # required on 0.27; the course always used this folder
            self._append_keyword(node, 'work_dir="./tune_tmp"')
        if legacy:
            self._wrap_compile_tir(node)
        return skip

    def _result_used_as_schedule(self, node: ast.Call) -> bool:
        stmt = self.stmt_stack[-1] if self.stmt_stack else None
        if not (isinstance(stmt, ast.Assign) and stmt.value is node):
            return False
        names = {t.id for t in stmt.targets if isinstance(t, ast.Name)}
        return any(
            isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name)
            and n.value.id in names
            and n.attr in ("trace", "mod")
            for n in ast.walk(self.tree)
        )

    def _drop_keyword(self, node: ast.Call, kw: ast.keyword) -> None:
        items = sorted(list(node.args) + [k for k in node.keywords], key=lambda n: (n.lineno, n.col_offset))
        i = items.index(kw)
        kw_start = self.src.offset(kw.lineno, kw.col_offset)
        if i > 0:
            self.replace(
                self.src.end(items[i - 1].value if isinstance(items[i - 1], ast.keyword) else items[i - 1]),
                self.src.end(kw.value),
                "",
            )
        elif len(items) > 1:
            nxt = items[1]
            self.replace(kw_start, self.src.offset(nxt.lineno, nxt.col_offset), "")
        else:
            self.replace(kw_start, self.src.end(kw.value), "")

    def _append_keyword(self, node: ast.Call, text: str) -> None:
        items = list(node.args) + [k.value for k in node.keywords]
        if not items:
            close = self.src.end(node) - 1
            self.replace(close, close, text)
            return
        last = max(items, key=lambda n: (n.end_lineno, n.end_col_offset))
        at = self.src.end(last)
        tail = self.src.text[at : self.src.end(node) - 1]
        if tail.strip().startswith(","):
            # one argument per line with a trailing comma: add ours the same way
            at += tail.index(",") + 1
            indent = re.match(r"[ \t]*", self.src.line(last.lineno)).group(0)
            sep = "\n" + indent if "\n" in tail else " "
            self.replace(at, at, f"{sep}{text},")
        else:
            self.replace(at, at, f", {text}")

    def _wrap_compile_tir(self, node: ast.Call) -> None:
        """The 2022 tune_tir returned a Schedule; 0.27 returns a Database."""
        stmt = self.stmt_stack[-1] if self.stmt_stack else None
        kws = {k.arg: k.value for k in node.keywords}
        mod = kws.get("mod", node.args[0] if node.args else None)
        target = kws.get("target", node.args[1] if len(node.args) > 1 else None)
        simple = (ast.Name, ast.Attribute, ast.Constant, ast.Dict, ast.Subscript)
        if not (isinstance(stmt, ast.Assign) and stmt.value is node) or not (
            isinstance(mod, simple) and isinstance(target, simple)
        ):
            self.mark(
                "tune_tir now returns a Database, not a Schedule: "
                "use ms.tir_integration.compile_tir(database, mod, target)"
            )
            return
        ms_name = dotted_name(node.func).rsplit(".", 1)[0]
        target_text = self.src.segment(target)
        if isinstance(target, ast.Constant) and isinstance(target.value, str):
            target_text = cli_target_to_dict(target.value) or target_text
        start, end = self.src.start(node), self.src.end(node)
        self.replace(start, start, f"{ms_name}.tir_integration.compile_tir(")
        self.replace(end, end, f", {self.src.segment(mod)}, {target_text})")


def _apply(src: Source, rw: _Rewriter) -> str:
    text = src.text
    edits = sorted(rw.edits, key=lambda e: (e.start, e.end))
    # The rules are written not to overlap; if two ever did, splicing both would garble the
    # text, so the later one is skipped and its line flagged instead.
    kept: list[Edit] = []
    for e in edits:
        if kept and e.start < kept[-1].end:
            line_no = bisect.bisect_right(src.line_starts, e.start)
            rw.markers.setdefault(src.line_starts[line_no - 1], []).append(
                "two rewrites overlap on this line; check it by hand"
            )
            continue
        kept.append(e)
    for offset, reasons in rw.markers.items():
        line_no = src.line_starts.index(offset) + 1
        indent = re.match(r"[ \t]*", src.line(line_no)).group(0)
        # a marker that is already there (from an earlier run) is not added twice
        existing = set()
        ln = line_no - 1
        while ln >= 1 and src.line(ln).strip().startswith(MARKER):
            existing.add(src.line(ln).strip())
            ln -= 1
        new = [r for r in reasons if MARKER + r not in existing]
        if new:
            kept.append(Edit(offset, offset, "".join(f"{indent}{MARKER}{r}\n" for r in new)))
    if rw.need_tvm_ffi and not rw.names.has_tvm_ffi:
        kept.append(_tvm_ffi_import(src, rw.tree))
    for e in sorted(kept, key=lambda e: (e.start, e.end), reverse=True):
        text = text[: e.start] + e.text + text[e.end :]
    return text


def _tvm_ffi_import(src: Source, tree: ast.Module) -> Edit:
    # tvm.ir.structural_equal moved to tvm_ffi: import it next to `import tvm`
    for node in tree.body:
        if isinstance(node, ast.Import) and any(a.name == "tvm" for a in node.names):
            end = src.end(node)
            return Edit(end, end, "\nimport tvm_ffi")
    after = 0
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            last_line = node.end_lineno
            after = src.line_starts[last_line] if last_line < len(src.line_starts) else len(src.text)
    return Edit(after, after, "import tvm_ffi\n")


def convert(code: str) -> str:
    """Return ``code`` rewritten for TVM 0.27; modern code comes back unchanged.

    Works on whole scripts and on bare TVMScript (a class or function, imports optional, even
    indented as if cut out of a class). Raises ``ConvertError`` (with ``.line``) when ``code``
    is not valid Python.
    """
    indent = _common_indent(code)
    if indent:
        # a snippet cut out of a class body: convert it flush left, then put the indent back
        flat = "".join(ln[len(indent) :] if ln.startswith(indent) else ln for ln in code.splitlines(keepends=True))
        return "".join(ln if ln in ("\n", "\r\n") else indent + ln for ln in convert(flat).splitlines(keepends=True))
    tree = parse(code)
    if not _LEGACY_HINT.search(code):
        return code
    src = Source(code)
    # First only what 0.27 cannot run: code that needs none of it is valid on 0.27 and is left
    # alone (``tvm.build`` included: deprecated, it still works there).
    required = _Rewriter(src, tree)
    required.visit(tree)
    if not required.edits and not required.markers and not required.need_tvm_ffi:
        return code
    # Code being ported: each built module moves to tvm.compile when all its uses can follow.
    rw = _Rewriter(src, tree)
    for flow in rw.names.flows:
        flow.modernize = flow.kind == "build" and flow.can_modernize()
    rw.visit(tree)
    return _apply(src, rw)


def _common_indent(code: str) -> str:
    lines = [ln for ln in code.splitlines() if ln.strip()]
    if not lines or not lines[0][:1].isspace():
        return ""
    indent = re.match(r"[ \t]*", lines[0]).group(0)
    return indent if all(ln.startswith(indent) for ln in lines) else ""


def looks_legacy(code: str) -> bool:
    """True when ``convert`` would change ``code`` (False for text that does not parse)."""
    if not _LEGACY_HINT.search(code):
        return False
    try:
        return convert(code) != code
    except ConvertError:
        return False
