"""From a schedule step to machine code: the passes `tvm.compile` ran, the code, the facts per loop.

`lower()` sends the step's TVMScript to the worker process (request "lower", see
`mlc_lab.tvm.lowering`), which compiles it under a pass instrument and returns texts; the facts are
then read from those texts here (`mlc_lab.core.lowering.codefacts`, plain text analysis). A `Lowering` is
plain data: `to_json()` is what the explorer's Compiler panel and `mlc-lab lower --json` show.
"""

from __future__ import annotations

import re
from typing import Any

from mlc_lab.core.lowering import codefacts
from mlc_lab.errors import MlcLabError
from mlc_lab.model import lowering as model_lowering
from mlc_lab.model.lowering import KernelArray, LoopFacts, LowerResult, PassStep
from mlc_lab.model.worker_ops import WORKER_OPS

DEFAULT_TIMEOUT_S = WORKER_OPS["lower"].timeout_s


class Lowering(model_lowering.Lowering):
    """Everything about how one step compiles for one target (see `Session.lower`): the plain data of
    ``mlc_lab.model.lowering.Lowering`` (its fields and its one encoding), and the look-ups that say
    what is missing as an `MlcLabError` or read the assembly."""

    # --- reading it -----------------------------------------------------------------------------
    def passes_named(self, name: str) -> list[PassStep]:
        """Passes whose name is `name` or ends with `.name` (``"VectorizeLoop"`` finds ``tirx.VectorizeLoop``)."""
        found = [p for p in self.passes if p.name == name or p.name.endswith("." + name)]
        if not found:
            names = ", ".join(dict.fromkeys(p.name for p in self.passes))
            raise MlcLabError(f"no pass named {name!r} ran for this step; the passes were: {names}")
        return found

    def loop(self, name: str) -> LoopFacts:
        """The facts of a loop, by the name the explorer shows (``j_1`` or ``Y/i``)."""
        hits = [f for f in self.loops if f.loop == name] or [f for f in self.loops if f.name == name]
        if len(hits) == 1:
            return hits[0]
        if not hits:
            raise MlcLabError(f"there is no loop {name!r} in this step; loops: {', '.join(f.loop for f in self.loops)}")
        raise MlcLabError(f"the name {name!r} is ambiguous; say which: {', '.join(f.loop for f in hits)}")

    def asm_of(self, loop: str) -> str:
        """The assembly lines attributed to a loop's lines of the script."""
        lines = self.asm.splitlines()
        return "\n".join(lines[n - 1] for n in self.loop(loop).asm_lines)

    def asm_around_first(self, loop: str, klass: str = "vector_fma", *, before: int = 3, after: int = 4) -> str | None:
        """The loop's instructions around its first one of class `klass` (see `codefacts`;
        ``"vector_fma"``: a packed FMA), that one marked ``=>``; None when the loop has none.

        Where the first FMA sits depends on the CPU LLVM compiled for (on Zen 4 it unrolls eight
        loads ahead of it), so a fixed number of lines from the top would show it on some
        machines and not on others."""
        numbers = self.loop(loop).asm_lines
        classes = {i.asm_line: i.klass for i in codefacts.parse_asm(self.asm)}
        first = next((k for k, n in enumerate(numbers) if classes.get(n) == klass), None)
        if first is None:
            return None
        lines = self.asm.splitlines()
        return "\n".join(
            ("=> " if k == first else "   ") + lines[numbers[k] - 1].strip()
            for k in range(max(0, first - before), min(len(numbers), first + after + 1))
        )


# What each loop's row says of a step that compiled to no CUDA kernel (an unbound program): the step's
# verdict says why, once (the sentence was repeated in every row).
NO_CUDA_CODE = "no CUDA code to look in: the verdict above says why"


def build_lowering(raw: LowerResult, script: str, loop_tree: dict | None, step: int | None = None) -> Lowering:
    """A Lowering from the worker's answer (`mlc_lab.tvm.lowering.lower_script`) and the step's loop tree."""
    passes = raw.passes
    ptxas = raw.ptxas
    low = Lowering(
        target=raw.target,
        kind=raw.kind,
        func_name=raw.func_name,
        script=script,
        passes=passes,
        ok=raw.ok,
        error=raw.error,
        step=step,
        llvm_ir=raw.llvm_ir,
        asm=raw.asm,
        cuda_source=raw.cuda_source,
        ptx=raw.ptx,
        ptx_error=raw.ptx_error or (ptxas["error"] if ptxas else None),
        ptxas_report=ptxas["report"] if ptxas else "",
        target_cpu=raw.target_cpu,
        cpu_features=list(raw.cpu_features),
        problems=list(raw.problems),
        seconds=raw.seconds,
        timings=dict(raw.timings),
    )
    loops = codefacts.walk_loops(loop_tree) if loop_tree else []
    if low.kind == "cpu" and low.asm:
        insns = codefacts.parse_asm(low.asm)
        low.loops = codefacts.loop_facts(
            loops,
            insns,
            codefacts.llvm_loop_blocks(low.llvm_ir) if low.llvm_ir else None,
            codefacts.llvm_ir_script_lines(low.llvm_ir) if low.llvm_ir else None,
        )
        strides = codefacts.strides_by_loop(raw.vector_strides)
        for f in low.loops:
            f.verdict = codefacts.loop_verdict(f, strides, low.cpu_features)
        low.verdict = codefacts.step_verdict(low.loops)
    elif low.kind == "cuda":
        low.arch = raw.arch
        low.gpu_buffers = list(raw.gpu_buffers)
        low.kernel_arrays = cuda_kernel_arrays(low.cuda_source)
        low.kernels = codefacts.kernel_facts(low.ptx, low.ptxas_report)
        for name, arrays in low.kernel_arrays.items():  # no ptxas: the kernels and shared memory from the source
            if not any(k.name == name for k in low.kernels):
                low.kernels.append(
                    codefacts.KernelFacts(
                        name, shared_bytes=sum(a["bytes"] or 0 for a in arrays if a["scope"] == "shared")
                    )
                )
        low.cuda_loop_lines = codefacts.cuda_loop_lines(low.cuda_source)
        low.loops = cuda_loop_facts(loops, low.cuda_source, low.cuda_loop_lines)
        low.verdict = cuda_step_verdict(low)
        if not low.cuda_source.strip():  # no kernel to look in: the verdict says why, once; each loop points at it
            for f in low.loops:
                f.verdict = NO_CUDA_CODE
    if not low.ok:
        failed = [p for p in passes if p.status == "failed"]
        where = f"in {failed[0].name}" if failed else "while compiling"
        low.verdict = f"the step does not compile: {where}: {(low.error or '').splitlines()[0] if low.error else ''}"
        if low.kind == "cpu" and "T.thread_binding(" in script:
            low.verdict += " (its loops are bound to GPU threads: lower it with target='cuda')"
    return low


def target_info(target: Any) -> dict:
    """{"key", "kind" ("cpu"|"cuda"), "arch"} of a target `lower` accepts: "cpu", "cuda", a CUDA
    architecture ("sm_75"), a target dict ({"kind": "cuda", "arch": "sm_75"}) or a TVM target tag.
    Anything else raises `MlcLabError` saying what is accepted."""
    from mlc_lab.tvm.lowering import describe_target

    try:
        return describe_target(target)
    except ValueError as exc:
        raise MlcLabError(str(exc)) from None


def lower(
    script: str,
    loop_tree: dict | None,
    func_name: str | None,
    target: Any = "cpu",
    *,
    step: int | None = None,
    ptx: bool = True,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> Lowering:
    """Compile `script` (a step's TVMScript) for `target` in the worker process and read its facts."""
    from mlc_lab.core.worker import worker

    result: LowerResult = worker().call(
        "lower", timeout=timeout, script=script, func_name=func_name, target=target, ptx=ptx
    )
    return build_lowering(result, script, loop_tree, step)


# ----------------------------------------------------------------------------------------- CUDA facts


_KERNEL = re.compile(r"__global__ void(?: __launch_bounds__\(\d+\))? (\w+)\(")
_ARRAY = re.compile(r"^\s*(__shared__ )?(?:alignas\(\d+\) )?(?:volatile )?([A-Za-z_][\w ]*?\w) (\w+)\[(\d+)\];")
_CUDA_TYPE_BYTES = {
    "float": 4,
    "int": 4,
    "unsigned int": 4,
    "uint": 4,
    "half": 2,
    "__half": 2,
    "nv_bfloat16": 2,
    "double": 8,
    "long long": 8,
    "int64_t": 8,
    "char": 1,
    "signed char": 1,
    "unsigned char": 1,
    "float2": 8,
    "float4": 16,
    "half2": 4,
    "int4": 16,
    "bool": 1,
    "short": 2,
}
# A thread has at most 255 32-bit registers: a local array larger than that cannot live in them.
MAX_REGISTER_BYTES = 255 * 4
LARGE_STACK_BYTES = 1024


def cuda_kernel_arrays(source: str) -> dict[str, list[KernelArray]]:
    """Per kernel of the CUDA source, the arrays it declares: `float C_local[4096];` (one per
    thread: local) and `__shared__ float A_shared[512];` (one per block)."""
    out: dict[str, list[KernelArray]] = {}
    current = None
    for line in source.splitlines():
        m = _KERNEL.search(line)
        if m:
            current = out.setdefault(m.group(1), [])
            continue
        m = _ARRAY.match(line)
        if m and current is not None:
            shared, ctype, name, count = m.group(1), m.group(2).strip(), m.group(3), int(m.group(4))
            size = _CUDA_TYPE_BYTES.get(ctype)
            current.append(
                {
                    "name": name[:-4] if name.endswith("_ptr") else name,
                    "scope": "shared" if shared else "local",
                    "elements": count,
                    "dtype": ctype,
                    "bytes": None if size is None else size * count,
                }
            )
    return out


def cuda_loop_facts(loops: list[dict], source: str, loop_lines: dict[str, list[int]]) -> list[codefacts.LoopFacts]:
    """What each loop of the step became in the CUDA code, as its `verdict`: a block or thread
    index, a loop in every thread, one wide access, unrolled copies, or nothing."""
    lines = source.splitlines()
    out = []
    seen: dict[str, int] = {}
    counts: dict[str, int] = {}
    for n in loops:
        counts[str(n.get("name"))] = counts.get(str(n.get("name")), 0) + 1
    tree_names = set(counts)
    for n in loops:
        name, kind, extent = str(n.get("name")), str(n.get("loop_kind") or "serial"), n.get("extent")
        # Two loops of one name (one per block): TVM's code calls the second `name_1`, and so on.
        nth = seen.get(name, 0)
        seen[name] = nth + 1
        code_name = name if nth == 0 else f"{name}_{nth}"
        f = codefacts.LoopFacts(
            loop=str(n.get("qualified") or name),
            name=name,
            line=int(n.get("line") or 0),
            end_line=int(n.get("end_line") or 0),
            kind=kind,
            extent=extent,
            innermost=bool(n.get("innermost")),
        )
        here = loop_lines.get(code_name, [])
        span = f" (CUDA lines {here[0]}-{here[-1]})" if here else ""
        if kind == "thread_binding":
            thread = str(n.get("thread") or "")
            if thread.startswith("blockIdx"):
                f.verdict = f"{thread}: {extent} thread blocks, each runs one iteration"
            elif thread.startswith("threadIdx"):
                f.verdict = f"{thread}: {extent} threads of a block, each runs one iteration"
            else:
                f.verdict = f"{thread}: a virtual thread, its {extent} iterations interleaved in each thread"
        elif kind == "vectorized":
            wide = [t for t in (f"float{extent}", f"half{extent}", f"int{extent}", f"uint{extent}") if t in source]
            f.verdict = (
                f"one {extent}-wide access ({wide[0]}) per statement, no loop"
                if wide
                else f"vectorized, but the code has no {extent}-wide type: {extent} scalar statements"
            )
        elif here:
            first = here[0]
            pragma = first >= 2 and "#pragma unroll" in lines[first - 2]
            what = "a loop with #pragma unroll (nvcc unrolls it)" if pragma else f"a loop of {extent} iterations"
            f.verdict = f"{what} in every thread{span}"
            if counts[name] == 1:  # copies TVM made when it unrolled an enclosing loop: name_1, name_2, ...
                copies = 1 + sum(
                    1 for key in loop_lines if re.fullmatch(rf"{re.escape(name)}_\d+", key) and key not in tree_names
                )
                if copies > 1:
                    f.verdict += f", {copies} copies (an enclosing loop was unrolled)"
        elif extent == 1:
            f.verdict = "extent 1: no loop in the code"
        elif kind == "unrolled":
            f.verdict = f"unrolled by TVM: {extent} copies of its body, no loop"
        else:
            f.verdict = "no loop of its own in the code (unrolled, or merged by TVM's passes)"
        out.append(f)
    return out


def _shape_text(shape: list) -> str:
    return "x".join(str(d) for d in shape)


def _kib(n: int) -> str:
    return f"{n / 1024:.3g} KB" if n >= 1024 else f"{n} B"


def cuda_step_verdict(low: Lowering) -> str:
    """One line for a CUDA step: a large per-thread stack frame first (the usual reason a GPU
    matmul is slow), then registers, shared memory, spills and vector loads per kernel."""
    if low.problems:
        return low.problems[0].splitlines()[0]
    base = codefacts.cuda_verdict(low.kernels, low.problems, low.ptx_error)
    shapes = {b["name"]: b for b in low.gpu_buffers}
    notes = []
    for k in low.kernels:
        local = [a for a in low.kernel_arrays.get(k.name, []) if a["scope"] == "local" and a["bytes"]]
        local.sort(key=lambda a: -(a["bytes"] or 0))
        what = ""
        if local:
            a = local[0]
            buf: Any = shapes.get(a["name"], {})
            shape = _shape_text(buf.get("shape") or [a["elements"]])
            noun = "accumulator" if a["name"].endswith("_local") else "array"
            what = f"each thread keeps a {shape} {buf.get('dtype') or a['dtype']} {noun} ({a['name']}, {_kib(a['bytes'] or 0)})"
        if k.stack_bytes >= LARGE_STACK_BYTES or k.spill_stores:
            lead = what or "each thread keeps local data"
            notes.append(
                f"{k.name}: {lead}: a {_kib(k.stack_bytes)} stack frame per thread (ptxas), in local memory "
                "(off-chip, cached in L1) instead of registers: give each thread a smaller tile"
            )
        elif k.registers is None and local and (local[0]["bytes"] or 0) > MAX_REGISTER_BYTES:
            notes.append(
                f"{k.name}: {what}: more than a thread's 255 registers hold, so it will live on the stack "
                "in local memory (off-chip): give each thread a smaller tile (ptxas was not run: no stack "
                "figure)"
            )
    return "; ".join(notes + [base]) if notes else base
