"""Static facts of generated code, read from its text: x86 assembly, LLVM IR, PTX, ptxas reports.

No TVM here: the inputs are the texts `mlc_lab.tvm.lowering` produces and the loop tree of the step,
so every rule below is testable on a few lines of assembly.

How an instruction finds its loop: the step's TVMScript is what TVM compiled (re-parsed, so each
statement carries its line), and LLVM writes that line into the assembly as `.loc 1 LINE COL`.
An instruction belongs to every loop whose lines (`for` line to last body line) contain its line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from mlc_lab.model.lowering import KernelFacts, LoopFacts, VectorAccess, VectorLoop  # noqa: F401  (re-exported: the facts are plain data of the model)

# ----------------------------------------------------------------------------------------- x86


@dataclass(frozen=True)
class AsmInstruction:
    """One instruction of the assembly listing."""

    asm_line: int  # 1-based line in the listing
    func: str  # the symbol of the function it is in
    src_line: int  # line of the step's TVMScript (0 = none: prologue, runtime glue)
    mnemonic: str
    operands: str
    klass: str  # see _classify
    lanes: int  # elements per packed operation (1 for scalar, 0 when not a float op)
    reg: str  # widest vector register used: "xmm" | "ymm" | "zmm" | ""


_LOC = re.compile(r"^\s*\.loc\s+\d+\s+(\d+)\s+\d+")
_LABEL = re.compile(r"^([A-Za-z_.$][\w.$@]*):")
_TYPE_FUNC = re.compile(r"^\s*\.type\s+([\w.$@]+),@function")
_INSN = re.compile(r"^\s+([a-z][a-z0-9.]*)\b\s*(.*)$")
_REG = re.compile(r"%([xyz])mm\d+")
_FMA = re.compile(r"^vf(?:n)?m(?:add|sub)(?:sub|add)?(?:132|213|231)?([ps])([sdh])$")
_ARITH = re.compile(r"^v?(add|sub|mul|div|max|min|sqrt|rcp|rsqrt)([ps])([sdh])$")
_MOV_PACKED = re.compile(r"^v?mov(?:ap|up)[sd]$|^v?movdq[au](?:8|16|32|64)?$|^vmovntp[sd]$")
_MOV_SCALAR = re.compile(r"^v?movs[sd]$")
_BROADCAST = re.compile(r"^vp?broadcast")
_GATHER = re.compile(r"^vp?gather")
_SCATTER = re.compile(r"^vp?scatter")
_ELEMENT_OUT = re.compile(r"^v?(?:extractps|pextr[bwdq])$")
_ELEMENT_IN = re.compile(r"^v?(?:insertps|pinsr[bwdq])$")
_SHUFFLE = re.compile(r"^v(?:perm|shuf|insert|extract|blend|unpck|pshuf|palignr|movlhps|movhlps)")
_RUNTIME = re.compile(r"(TVMBackend\w+|__tvm_parallel_lambda\w*|TVMFFI\w+)")

_WIDTH_BITS = {"x": 128, "y": 256, "z": 512}
_ELEM_BITS = {"s": 32, "d": 64, "h": 16}


def _widest(operands: str) -> tuple[str, int]:
    regs = _REG.findall(operands)
    if not regs:
        return "", 0
    best = max(regs, key=lambda r: _WIDTH_BITS[r])
    return best + "mm", _WIDTH_BITS[best]


def _classify(mnemonic: str, operands: str) -> tuple[str, int, str]:
    """(class, lanes, register) of one x86 instruction in AT&T syntax (source first, memory has '(')."""
    reg, bits = _widest(operands)
    parts = [p.strip() for p in _split_operands(operands)]
    mem_dst = bool(parts) and "(" in parts[-1]
    mem_src = any("(" in p for p in parts[:-1])
    m = _FMA.match(mnemonic)
    if m:
        packed, elem = m.group(1) == "p", m.group(2)
        return ("vector_fma" if packed else "scalar_fma"), (bits // _ELEM_BITS[elem] if packed else 1), reg
    m = _ARITH.match(mnemonic)
    if m and (reg or mnemonic.startswith("v")):
        packed, elem = m.group(2) == "p", m.group(3)
        return ("vector_arith" if packed else "scalar_arith"), (bits // _ELEM_BITS[elem] if packed else 1), reg
    if _GATHER.match(mnemonic):
        return "gather", 0, reg
    if _SCATTER.match(mnemonic):
        return "scatter", 0, reg
    if _BROADCAST.match(mnemonic):
        return "broadcast", 0, reg
    if _MOV_PACKED.match(mnemonic) and reg:
        if mem_dst:
            return "vector_store", 0, reg
        if mem_src:
            return "vector_load", 0, reg
        return "vector_move", 0, reg
    if _ELEMENT_OUT.match(mnemonic) and mem_dst:
        return "scalar_store", 0, reg  # one lane of a vector register written to memory
    if _ELEMENT_IN.match(mnemonic) and mem_src:
        return "scalar_load", 0, reg  # one element from memory into a lane
    if _MOV_SCALAR.match(mnemonic):
        if mem_dst:
            return "scalar_store", 0, reg
        if mem_src:
            return "scalar_load", 0, reg
        return "scalar_move", 0, reg
    if mnemonic.startswith("call"):
        return "call", 0, ""
    if mnemonic.startswith("j"):
        return "branch", 0, ""
    if _SHUFFLE.match(mnemonic) and reg:
        return "shuffle", 0, reg
    return "other", 0, reg


def _split_operands(operands: str) -> list[str]:
    out: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in operands.split("#", 1)[0]:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if cur and "".join(cur).strip():
        out.append("".join(cur))
    return out


def parse_asm(asm: str) -> list[AsmInstruction]:
    """Every instruction of an x86-64 AT&T listing with its function, script line and class."""
    out: list[AsmInstruction] = []
    func = ""
    functions: set[str] = set()
    src = 0
    for n, raw in enumerate(asm.splitlines(), start=1):
        m = _TYPE_FUNC.match(raw)
        if m:
            functions.add(m.group(1))
            continue
        m = _LOC.match(raw)
        if m:
            src = int(m.group(1))
            continue
        m = _LABEL.match(raw)
        if m:
            if m.group(1) in functions:
                func, src = m.group(1), 0
            continue
        m = _INSN.match(raw)
        if m is None or raw.lstrip().startswith("."):
            continue
        mnemonic, operands = m.group(1), m.group(2).strip()
        klass, lanes, reg = _classify(mnemonic, operands)
        out.append(AsmInstruction(n, func, src, mnemonic, operands, klass, lanes, reg))
    return out


def runtime_symbols(insn: AsmInstruction) -> list[str]:
    return _RUNTIME.findall(insn.operands)


# ----------------------------------------------------------------------------------------- LLVM IR


_IR_LABEL = re.compile(r"^([A-Za-z_.$][\w.$-]*):", re.M)


def llvm_loop_blocks(llvm_ir: str) -> set[str]:
    """Basic-block labels of the (optimised) LLVM IR: TVM names a loop's blocks for_begin_<var>,
    for_body_<var>, for_end_<var>, and the names survive LLVM's passes while the loop does."""
    return set(_IR_LABEL.findall(llvm_ir))


_DILOC = re.compile(r"^(![\w.]+) = (?:distinct )?!DILocation\(line: (\d+)", re.M)
_DBG = re.compile(r", !dbg (![\w.]+)")


def llvm_ir_script_lines(llvm_ir: str) -> dict[int, int]:
    """IR line (1-based) -> line of the step's script, from each instruction's `!dbg` location."""
    locations = {m.group(1): int(m.group(2)) for m in _DILOC.finditer(llvm_ir)}
    out: dict[int, int] = {}
    for n, line in enumerate(llvm_ir.splitlines(), start=1):
        m = _DBG.search(line)
        if m:
            src = locations.get(m.group(1), 0)
            if src:
                out[n] = src
    return out


def loop_in_llvm(name: str, labels: Iterable[str]) -> bool:
    pat = re.compile(r"^for_(?:begin|body|end)_" + re.escape(name) + r"\d*(?:\.|$)")
    return any(pat.match(label) for label in labels)


# ----------------------------------------------------------------------------------------- PTX


_PTXAS_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PTXAS_USED = re.compile(r"Used (\d+) registers")
_PTXAS_SMEM = re.compile(r"(\d+) bytes smem")
_PTXAS_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_PTX_ENTRY = re.compile(r"^\.visible \.entry (\w+)\(", re.M)


def parse_ptxas(report: str) -> dict[str, KernelFacts]:
    """Registers, shared memory and spills per kernel from `ptxas -v` output."""
    kernels: dict[str, KernelFacts] = {}
    cur: KernelFacts | None = None
    for line in report.splitlines():
        m = _PTXAS_ENTRY.search(line)
        if m:
            cur = kernels.setdefault(m.group(1), KernelFacts(m.group(1)))
            continue
        if cur is None:
            continue
        m = _PTXAS_FRAME.search(line)
        if m:
            cur.stack_bytes, cur.spill_stores, cur.spill_loads = (int(x) for x in m.groups())
        m = _PTXAS_USED.search(line)
        if m:
            cur.registers = int(m.group(1))
            s = _PTXAS_SMEM.search(line)
            if s:
                cur.shared_bytes = int(s.group(1))
    return kernels


def ptx_kernel_counts(ptx: str) -> dict[str, dict[str, int]]:
    """Per kernel: vector/scalar global loads and stores, shared loads, FMAs, barriers."""
    out: dict[str, dict[str, int]] = {}
    starts = [(m.start(), m.group(1)) for m in _PTX_ENTRY.finditer(ptx)]
    for i, (pos, name) in enumerate(starts):
        body = ptx[pos : starts[i + 1][0] if i + 1 < len(starts) else len(ptx)]
        counts = {
            "vector_loads": 0,
            "vector_stores": 0,
            "scalar_loads": 0,
            "scalar_stores": 0,
            "shared_loads": 0,
            "fma": 0,
            "barriers": 0,
        }
        for line in body.splitlines():
            op = line.strip().split(None, 1)[0] if line.strip() else ""
            if op.startswith("ld.shared"):
                counts["shared_loads"] += 1
            elif op.startswith("ld.global"):
                counts["vector_loads" if re.search(r"\.v[248]\.", op) else "scalar_loads"] += 1
            elif op.startswith("st.global"):
                counts["vector_stores" if re.search(r"\.v[248]\.", op) else "scalar_stores"] += 1
            elif op.startswith(("fma.", "mad.")):
                counts["fma"] += 1
            elif op.startswith(("bar.", "barrier.")):
                counts["barriers"] += 1
        out[name] = counts
    return out


def kernel_facts(ptx: str | None, ptxas_report: str) -> list[KernelFacts]:
    kernels = parse_ptxas(ptxas_report or "")
    for name, counts in ptx_kernel_counts(ptx or "").items():
        k = kernels.setdefault(name, KernelFacts(name))
        for key, value in counts.items():
            setattr(k, key, value)
    return sorted(kernels.values(), key=lambda k: k.name)


_CUDA_FOR = re.compile(r"\bfor \((?:int|long long|int64_t|int32_t) (\w+) = ")


def cuda_loop_lines(source: str) -> dict[str, list[int]]:
    """Lines of the CUDA source (1-based) inside each serial loop, by loop variable: TVM's CUDA
    code keeps the script's loop names (`for (int k_0 = 0; ...)`); bound loops become threadIdx /
    blockIdx and have no lines of their own."""
    lines = source.splitlines()
    out: dict[str, list[int]] = {}
    for n, text in enumerate(lines, start=1):
        m = _CUDA_FOR.search(text)
        if not m:
            continue
        depth, end = text.count("{") - text.count("}"), n
        while depth > 0 and end < len(lines):  # to the brace that closes the loop's body
            depth += lines[end].count("{") - lines[end].count("}")
            end += 1
        out.setdefault(m.group(1), []).extend(range(n, end + 1))
    return out


# ----------------------------------------------------------------------------------------- loops


def walk_loops(loop_tree: dict) -> list[dict]:
    """The loops of the focused function of a Session loop tree, outermost first, each with
    `innermost` set."""
    focus = loop_tree.get("func")
    out: list[dict] = []

    def visit(node: dict) -> bool:
        has_loop = False
        for child in node.get("children", []):
            below = visit(child)
            if child.get("kind") == "loop":
                has_loop = True
            has_loop = has_loop or below
        if node.get("kind") == "loop":
            node_out = dict(node)
            node_out.pop("children", None)
            node_out.pop("_info", None)
            node_out["innermost"] = not has_loop
            out.append(node_out)
        return has_loop or node.get("kind") == "loop"

    for func in loop_tree.get("functions", []):
        if focus is None or func.get("name") == focus:
            visit(func)
    out.sort(key=lambda n: (n.get("line", 0), 0))
    return out


_LAMBDA = re.compile(r"parallel_lambda")


def loop_facts(
    loops: list[dict],
    insns: list[AsmInstruction],
    llvm_labels: set[str] | None = None,
    ir_lines: dict[int, int] | None = None,
) -> list[LoopFacts]:
    """Facts of every loop: the instructions whose script line lies in the loop's lines.

    A parallel loop's body is compiled into its own function (`__tvm_parallel_lambda`), which
    carries no line information; the n-th such function is the body of the n-th outermost parallel
    loop, and its instructions count for that loop and every loop inside it (`approximate`).
    """
    out = []
    by_line: dict[int, list[AsmInstruction]] = {}
    lambdas: dict[str, list[AsmInstruction]] = {}
    parallel_refs: dict[str, int] = {}
    for insn in insns:
        if insn.src_line:
            by_line.setdefault(insn.src_line, []).append(insn)
        elif _LAMBDA.search(insn.func):
            lambdas.setdefault(insn.func, []).append(insn)
        for sym in runtime_symbols(insn):
            if "Parallel" in sym:
                parallel_refs[sym] = parallel_refs.get(sym, 0) + 1
    outer_parallel = [
        n
        for n in loops
        if n.get("loop_kind") == "parallel"
        and not any(
            o is not n
            and o.get("loop_kind") == "parallel"
            and o.get("line", 0) <= n.get("line", 0) <= o.get("end_line", 0)
            and (o.get("line"), o.get("end_line")) != (n.get("line"), n.get("end_line"))
            for o in loops
        )
    ]
    bodies = list(lambdas.values())
    ranges = [
        (int(n.get("line") or 0), int(n.get("end_line") or 0), bodies[i])
        for i, n in enumerate(outer_parallel)
        if i < len(bodies)
    ]
    for node in loops:
        line, end = int(node.get("line") or 0), int(node.get("end_line") or node.get("line") or 0)
        kind = str(node.get("loop_kind") or "serial")
        f = LoopFacts(
            loop=str(node.get("qualified") or node.get("name")),
            name=str(node.get("name")),
            line=line,
            end_line=end,
            kind=kind,
            extent=node.get("extent"),
            innermost=bool(node.get("innermost")),
        )
        for src in range(line, end + 1):
            for insn in by_line.get(src, ()):
                f.asm_lines.append(insn.asm_line)
                _count(f, insn)
        for p_line, p_end, body in ranges:
            if p_line <= line <= p_end:
                f.approximate = True
                for insn in body:
                    f.asm_lines.append(insn.asm_line)
                    _count(f, insn)
        if kind == "parallel":
            for sym, n in parallel_refs.items():
                f.runtime_calls[sym] = f.runtime_calls.get(sym, 0) + n
        f.asm_lines.sort()
        if ir_lines:
            f.ir_lines = [n for n, src in sorted(ir_lines.items()) if line <= src <= end]
        if llvm_labels is not None:
            f.in_llvm_ir = loop_in_llvm(f.name, llvm_labels)
            if not f.in_llvm_ir and kind not in ("vectorized", "thread_binding", "parallel") and f.extent:
                f.unrolled_copies = int(f.extent)
        out.append(f)
    return out


_COUNTED = {
    "vector_fma": "vector_fma",
    "scalar_fma": "scalar_fma",
    "vector_arith": "vector_arith",
    "scalar_arith": "scalar_arith",
    "vector_load": "vector_loads",
    "vector_store": "vector_stores",
    "scalar_load": "scalar_loads",
    "scalar_store": "scalar_stores",
    "broadcast": "broadcasts",
    "gather": "gathers",
}


def _count(f: LoopFacts, insn: AsmInstruction) -> None:
    k = insn.klass
    if k in ("vector_fma", "vector_arith"):
        if insn.lanes > f.vector_width or (insn.lanes == f.vector_width and _wider(insn.reg, f.register)):
            f.vector_width = insn.lanes
            f.register = insn.reg
    attr = _COUNTED.get(k)
    if attr is not None:
        setattr(f, attr, getattr(f, attr) + 1)
    if k in ("vector_fma", "vector_arith", "scalar_fma", "scalar_arith") and "(" in insn.operands:
        # x86 folds a load into the arithmetic (`vfmadd132ps 32(%r15), ...`): count it as a load too
        if k.startswith("vector"):
            f.vector_loads += 1
        else:
            f.scalar_loads += 1


def _wider(a: str, b: str) -> bool:
    order = {"": 0, "xmm": 1, "ymm": 2, "zmm": 3}
    return order.get(a, 0) > order.get(b, 0)


# ----------------------------------------------------------------------------------------- verdicts


def _width_reason(requested: int, reached: int, register: str, cpu_features: list[str]) -> str:
    """Why `requested` lanes became pieces of `reached` lanes (empty when they did not)."""
    if not requested or not reached or reached >= requested:
        return ""
    pieces = -(-requested // reached)
    parts = "two halves" if pieces == 2 else f"{pieces} parts"
    if register == "ymm" and "avx512f" in cpu_features and "prefer-256-bit" in cpu_features:
        why = "LLVM prefers 256-bit vectors on this CPU (prefer-vector-width=256, its default for Intel AVX-512)"
    elif register == "ymm" and "avx512f" not in cpu_features:
        why = "the CPU has no 512-bit registers (AVX2: a ymm register holds 256 bits)"
    elif register == "zmm":
        why = "zmm, 512 bits, is the widest register"
    elif register == "xmm" and "avx" not in cpu_features:
        why = "the target has only 128-bit SSE registers"
    else:
        why = f"LLVM chose {register} registers"
    return f"{requested} lanes done as {parts} of {reached} on {register}: {why}"


def loop_verdict(f: LoopFacts, strides: dict[str, list[VectorAccess]], cpu_features: list[str]) -> str:
    """One sentence about one loop (empty when there is nothing to say)."""
    op = "FMAs" if f.vector_fma else "operations"
    if f.kind == "vectorized":
        bad = [a for a in strides.get(f.name, []) if a.get("stride") not in (0, 1)]
        why = ", ".join(
            f"the access to {a['buffer']} has stride {a['stride']}"
            if a.get("stride") is not None
            else f"the access to {a['buffer']} is not affine in {f.loop}"
            for a in bad
        )
        if f.is_vector and not bad and not f.gathers:
            text = f"{f.loop} vectorized: {f.vector_width}-wide {op} on {f.register} registers"
            if f.approximate:
                text += " (counted over the whole parallel body: it has no line information)"
            reason = _width_reason(int(f.extent or 0), f.vector_width, f.register, cpu_features)
            return f"{text} ({reason})" if reason else text
        if f.is_vector and bad:
            return (
                f"{f.loop} vectorized: the arithmetic is {f.vector_width}-wide on {f.register}, but memory is "
                f"moved one element at a time ({f.scalar_loads} scalar loads, {f.scalar_stores} scalar stores, "
                f"{f.gathers} gathers): {why}"
            )
        if bad:
            return f"vectorize requested on {f.loop}, but the loop body is scalar: {why}"
        if not f.asm_lines and not f.approximate:
            # Typically an init loop (Y_init) whose zeros LLVM keeps in registers or merges into the
            # loop next to it: not a failed vectorize, there is simply no code of this loop left.
            return (
                f"{f.loop} left no code of its own: LLVM folded it into the code around it "
                f"(nothing to vectorize, not a problem)"
            )
        if not (f.vector_arith or f.vector_fma or f.scalar_fallbacks) and f.vector_stores:
            return f"{f.loop} vectorized: {f.vector_stores} packed store(s), no arithmetic (it only writes values)"
        if f.is_vector:
            return f"{f.loop} vectorized with {f.gathers} gather(s): {f.vector_width}-wide {op} on {f.register}"
        return f"vectorize requested on {f.loop}, but no packed float operations were generated for it"
    if f.kind == "parallel":
        launches = sum(v for k, v in f.runtime_calls.items() if "Parallel" in k)
        return f"{f.loop} runs in parallel: its body is a separate function started by TVMBackendParallelLaunch" + (
            f" ({launches} reference(s))" if launches else ""
        )
    if f.kind == "unrolled":
        copies = f" ({f.unrolled_copies} copies of the body)" if f.unrolled_copies else ""
        return f"{f.loop} unrolled{copies}"
    if f.innermost and f.is_vector:
        text = (
            f"{f.loop} is not marked vectorized, but LLVM vectorized it on its own: "
            f"{f.vector_width}-wide {op} on {f.register} registers"
        )
        reason = _width_reason(int(f.extent or 0), f.vector_width, f.register, cpu_features)
        return f"{text} ({reason})" if reason else text
    if f.innermost and f.scalar_fallbacks:
        return f"{f.loop}'s body is scalar: {f.scalar_fallbacks} scalar float operation(s), no packed ones"
    return ""


def step_verdict(facts: list[LoopFacts]) -> str:
    """One line for the step: the annotated loops first, then the innermost ones."""
    ranked = sorted(
        (f for f in facts if f.verdict),
        key=lambda f: (0 if f.kind in ("vectorized", "parallel", "unrolled") else 1, f.line),
    )
    seen, parts = set(), []
    for f in ranked:
        if f.verdict not in seen:
            seen.add(f.verdict)
            parts.append(f.verdict)
    return "; ".join(parts[:3]) if parts else "no loop-level facts (no vector or scalar float code found in the loops)"


def strides_by_loop(vector_strides: list[VectorLoop]) -> dict[str, list[VectorAccess]]:
    out: dict[str, list[VectorAccess]] = {}
    for entry in vector_strides or []:
        out.setdefault(entry["loop"], []).extend(entry["accesses"])
    return out


def cuda_verdict(kernels: list[KernelFacts], problems: list[str], ptx_error: str | None) -> str:
    """One line for a CUDA step: kernels, registers, shared memory, spills, vector loads."""
    if problems:
        return problems[0].splitlines()[0]
    if not kernels:
        return f"no PTX facts: {ptx_error}" if ptx_error else "no CUDA kernel"
    parts = []
    for k in kernels:
        bits = [f"{k.registers} registers" if k.registers is not None else "registers unknown"]
        if k.shared_bytes:
            bits.append(f"{k.shared_bytes} B shared")
        if k.spill_stores or k.spill_loads:
            bits.append(f"spills {k.spill_stores} B stored / {k.spill_loads} B loaded")
        if k.vector_loads:
            bits.append(f"{k.vector_loads} vector loads")
        parts.append(f"{k.name}: " + ", ".join(bits))
    return "; ".join(parts)
