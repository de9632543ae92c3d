"""The text ``compat.convert`` edits: ast positions as offsets into the string, parsing with a
notebook's magics masked, and what the legacy names are bound to in the file."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from mlc_lab.errors import ConvertError
from mlc_lab.text.compat_flows import built_flows, dotted_name, is_imported_module


# Where the schedule's random-variable classes were imported from; 0.27 renamed BlockRV to SBlockRV.
SCHEDULE_MODULES = {
    "tvm.tir.schedule",
    "tvm.tir.schedule.schedule",
    "tvm.s_tir.schedule",
    "tvm.s_tir.schedule.schedule",
}


@dataclass
class Edit:
    start: int
    end: int
    text: str


class Source:
    """Maps ast (line, utf-8 column) positions to offsets in the str."""

    def __init__(self, text: str):
        self.text = text
        self.line_starts = [0]
        for i, ch in enumerate(text):
            if ch == "\n":
                self.line_starts.append(i + 1)

    def line(self, lineno: int) -> str:
        start = self.line_starts[lineno - 1]
        end = self.line_starts[lineno] - 1 if lineno < len(self.line_starts) else len(self.text)
        return self.text[start:end]

    def offset(self, lineno: int, col: int) -> int:
        head = self.line(lineno).encode("utf-8")[:col].decode("utf-8", errors="ignore")
        return self.line_starts[lineno - 1] + len(head)

    def start(self, node: ast.AST) -> int:
        return self.offset(node.lineno, node.col_offset)

    def end(self, node: ast.AST) -> int:
        return self.offset(node.end_lineno, node.end_col_offset)

    def segment(self, node: ast.AST) -> str:
        return self.text[self.start(node) : self.end(node)]


def decorator_name(node: ast.AST) -> str | None:
    return dotted_name(node.func if isinstance(node, ast.Call) else node)


def _mask_magics(code: str) -> str:
    # Notebook lines such as `!wget ...` or `%timeit` are not Python; hide them from the parser
    # (same length, so every offset stays valid). They are copied through untouched.
    # `%time stmt` / `%timeit stmt` run Python: the statement is kept, behind a no-op of the same width.
    code = re.sub(
        r"(?m)^([ \t]*)%(timeit|time)([ \t]+)(?=[^\s-])",
        lambda m: m.group(1) + "0;" + " " * (len(m.group(0)) - len(m.group(1)) - 2),
        code,
    )
    return re.sub(r"(?m)^([ \t]*)[!%](?=[%A-Za-z])", r"\1#", code)


def parse(code: str) -> ast.Module:
    try:
        return ast.parse(_mask_magics(code))
    except SyntaxError as exc:
        raise ConvertError(f"line {exc.lineno}: not valid Python ({exc.msg})", line=exc.lineno) from None


class Names:
    """What the legacy names are bound to in this file (a cheap, scope-blind pre-pass)."""

    def __init__(self, tree: ast.Module):
        self.tvm = {"tvm"}
        self.T = {"T"}  # tvm.script.tir / tirx
        self.R = {"R"}  # tvm.script.relax
        self.ms = {"ms"}  # meta_schedule
        self.relax = {"relax"}
        self.tir = set()  # `from tvm import tir`
        self.built = set()  # names bound to tvm.build(...) / tvm.compile(...) results
        self.device_modules = set()  # names bound to `<built>.imported_modules[i]` (device code)
        self.strings: dict[str, set[str]] = {}  # names bound to string literals, and those strings
        self.has_tvm_ffi = False
        self.blockrv_imported = False  # `from tvm.tir.schedule import BlockRV`: its uses are renamed too
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name == "tvm":
                        self.tvm.add(a.asname or "tvm")
                    elif a.name == "tvm_ffi":
                        self.has_tvm_ffi = True
                    elif a.name.endswith("meta_schedule") and a.asname:
                        self.ms.add(a.asname)
            elif isinstance(node, ast.ImportFrom):
                for a in node.names:
                    bound = a.asname or a.name
                    if node.module in SCHEDULE_MODULES and a.name == "BlockRV" and not a.asname:
                        self.blockrv_imported = True
                    if node.module == "tvm.script" and a.name in ("tir", "tirx"):
                        self.T.add(bound)
                    elif node.module == "tvm.script" and a.name == "relax":
                        self.R.add(bound)
                    elif a.name == "meta_schedule":
                        self.ms.add(bound)
                    elif node.module == "tvm" and a.name == "relax":
                        self.relax.add(bound)
                    elif node.module == "tvm" and a.name == "tir":
                        self.tir.add(bound)
        self.flows = built_flows(tree, self.dotted("build"), self.dotted("compile"))
        self.flow_by_name = {name: f for f in self.flows for name in f.names}
        self.built = set(self.flow_by_name)
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and is_imported_module(node.value):
                self.device_modules.update(t.id for t in node.targets if isinstance(t, ast.Name))
            if isinstance(node, ast.Assign):
                value = node.value.value if isinstance(node.value, ast.Constant) else None
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        self.strings.setdefault(t.id, set()).add(value if isinstance(value, str) else "")

    def dotted(self, *attrs: str) -> set[str]:
        return {f"{t}.{a}" for t in self.tvm for a in attrs}
