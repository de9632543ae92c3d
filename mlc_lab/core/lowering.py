"""From a schedule step to machine code: the passes `tvm.compile` ran, the code, the facts per loop.

`lower()` sends the step's TVMScript to the worker process (request "lower", see
`mlc_lab.tvm.lower`), which compiles it under a pass instrument and returns texts; the facts are
then read from those texts here (`mlc_lab.core.codefacts`, plain text analysis). A `Lowering` is
plain data: `to_json()` is what the explorer's Compiler panel and `mlc-lab lower --json` show.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from mlc_lab.core import codefacts as cf
from mlc_lab.errors import MlcLabError

DEFAULT_TIMEOUT_S = 120.0  # nvcc + ptxas for a CUDA step take a few seconds; the first start more


@dataclass
class PassStep:
    """One pass that `tvm.compile` ran. `script` is the module after it when it changed something;
    `base` is the index of the pass whose script was its input (-1: the step's own TVMScript)."""

    index: int
    name: str
    phase: str  # bind | pipeline | split | host | device | codegen
    status: str  # changed | no-op | failed
    depth: int = 0  # 1 for the passes a pass runs inside itself (HoistIfThenElse, SplitHostDevice)
    base: int = -1
    note: str = ""
    script: str | None = None
    error: str | None = None
    seconds: float = 0.0


@dataclass
class Lowering:
    """Everything about how one step compiles for one target (see `Session.lower`)."""

    target: str
    kind: str  # "cpu" | "cuda"
    func_name: str
    script: str  # the step's TVMScript: the input of the first pass, and what `.loc` lines refer to
    passes: list[PassStep]
    ok: bool
    error: str | None = None
    step: int | None = None
    llvm_ir: str = ""
    asm: str = ""
    cuda_source: str = ""
    ptx: str | None = None
    ptx_error: str | None = None
    ptxas_report: str = ""
    target_cpu: str = ""
    cpu_features: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    loops: list[cf.LoopFacts] = field(default_factory=list)
    kernels: list[cf.KernelFacts] = field(default_factory=list)
    cuda_loop_lines: dict[str, list[int]] = field(default_factory=dict)  # loop variable -> CUDA source lines
    verdict: str = ""
    seconds: float = 0.0  # in the worker, all included
    timings: dict[str, float] = field(default_factory=dict)  # seconds: parse, compile, code_text

    # --- reading it -----------------------------------------------------------------------------
    def passes_named(self, name: str) -> list[PassStep]:
        """Passes whose name is `name` or ends with `.name` (``"VectorizeLoop"`` finds ``tirx.VectorizeLoop``)."""
        found = [p for p in self.passes if p.name == name or p.name.endswith("." + name)]
        if not found:
            names = ", ".join(dict.fromkeys(p.name for p in self.passes))
            raise MlcLabError(f"no pass named {name!r} ran for this step; the passes were: {names}")
        return found

    def script_before(self, p: PassStep) -> str:
        """The TVMScript the pass received."""
        base = p.base
        while base >= 0 and self.passes[base].script is None:
            base = self.passes[base].base
        return self.script if base < 0 else str(self.passes[base].script)

    def script_after(self, p: PassStep) -> str:
        return p.script if p.script is not None else self.script_before(p)

    @property
    def changed(self) -> list[PassStep]:
        return [p for p in self.passes if p.status == "changed"]

    @property
    def failed(self) -> list[PassStep]:
        return [p for p in self.passes if p.status == "failed"]

    def loop(self, name: str) -> cf.LoopFacts:
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
        classes = {i.asm_line: i.klass for i in cf.parse_asm(self.asm)}
        first = next((k for k, n in enumerate(numbers) if classes.get(n) == klass), None)
        if first is None:
            return None
        lines = self.asm.splitlines()
        return "\n".join(("=> " if k == first else "   ") + lines[numbers[k] - 1].strip()
                         for k in range(max(0, first - before), min(len(numbers), first + after + 1)))

    @property
    def code(self) -> str:
        """The generated code: assembly for CPU targets, CUDA source for GPU ones."""
        return self.asm if self.kind == "cpu" else self.cuda_source

    def summary(self) -> str:
        counts = {s: sum(1 for p in self.passes if p.status == s) for s in ("changed", "no-op", "failed")}
        head = (f"step {self.step}: {len(self.passes)} passes for {self.kind} ({counts['changed']} changed, "
                f"{counts['no-op']} no-op, {counts['failed']} failed)")
        lines = [head, self.verdict]
        if self.error:
            lines.append("error: " + self.error.splitlines()[0])
        lines.extend(f"problem: {p}" for p in self.problems)
        return "\n".join(line for line in lines if line)

    def __repr__(self) -> str:
        return f"<Lowering {self.summary().splitlines()[0]}>"

    def _repr_pretty_(self, printer: Any, _cycle: bool) -> None:
        printer.text(self.summary())

    def to_json(self, *, texts: bool = True) -> dict:
        """Plain JSON data (what the explorer and `mlc-lab lower --json` show). `texts=False` leaves
        out the scripts and code, keeping the pass list, facts and verdict."""
        out = asdict(self)
        for f, loop in zip(out["loops"], self.loops):
            f["is_vector"] = loop.is_vector
            f["scalar_fallbacks"] = loop.scalar_fallbacks
        if not texts:
            for key in ("llvm_ir", "asm", "cuda_source", "ptx", "script"):
                out.pop(key, None)
            for p in out["passes"]:
                p.pop("script", None)
            for f in out["loops"]:
                f.pop("asm_lines", None)
        return out


def build_lowering(raw: dict, script: str, loop_tree: dict | None, step: int | None = None) -> Lowering:
    """A Lowering from the worker's answer (`mlc_lab.tvm.lower.lower_script`) and the step's loop tree."""
    passes = [PassStep(index=int(p["index"]), name=str(p["name"]), phase=str(p["phase"]), status=str(p["status"]),
                       depth=int(p.get("depth", 0)), base=int(p.get("base", -1)), note=str(p.get("note") or ""),
                       script=p.get("script"), error=p.get("error"), seconds=float(p.get("seconds", 0.0)))
              for p in raw.get("passes", [])]
    ptxas = raw.get("ptxas") or {}
    low = Lowering(
        target=str(raw.get("target", "")), kind=str(raw.get("kind", "cpu")), func_name=str(raw.get("func_name", "")),
        script=script, passes=passes, ok=bool(raw.get("ok")), error=raw.get("error"), step=step,
        llvm_ir=raw.get("llvm_ir") or "", asm=raw.get("asm") or "", cuda_source=raw.get("cuda_source") or "",
        ptx=raw.get("ptx"), ptx_error=raw.get("ptx_error") or (ptxas.get("error") if ptxas else None),
        ptxas_report=str(ptxas.get("report") or ""), target_cpu=str(raw.get("target_cpu") or ""),
        cpu_features=list(raw.get("cpu_features") or []), problems=list(raw.get("problems") or []),
        seconds=float(raw.get("seconds", 0.0)), timings=dict(raw.get("timings") or {}),
    )
    loops = cf.walk_loops(loop_tree) if loop_tree else []
    if low.kind == "cpu" and low.asm:
        insns = cf.parse_asm(low.asm)
        low.loops = cf.loop_facts(loops, insns, cf.llvm_loop_blocks(low.llvm_ir) if low.llvm_ir else None,
                                  cf.llvm_ir_script_lines(low.llvm_ir) if low.llvm_ir else None)
        strides = cf.strides_by_loop(raw.get("vector_strides") or [])
        for f in low.loops:
            f.verdict = cf.loop_verdict(f, strides, low.cpu_features)
        low.verdict = cf.step_verdict(low.loops)
    elif low.kind == "cuda":
        low.kernels = cf.kernel_facts(low.ptx, low.ptxas_report)
        low.cuda_loop_lines = cf.cuda_loop_lines(low.cuda_source)
        low.verdict = cf.cuda_verdict(low.kernels, low.problems, low.ptx_error)
    if not low.ok:
        failed = [p for p in passes if p.status == "failed"]
        where = f"in {failed[0].name}" if failed else "while compiling"
        low.verdict = f"the step does not compile: {where}: {(low.error or '').splitlines()[0] if low.error else ''}"
        if low.kind == "cpu" and "T.thread_binding(" in script:
            low.verdict += " (its loops are bound to GPU threads: lower it with target='cuda')"
    return low


def lower(script: str, loop_tree: dict | None, func_name: str | None, target: Any = "cpu", *,
          step: int | None = None, ptx: bool = True, timeout: float = DEFAULT_TIMEOUT_S) -> Lowering:
    """Compile `script` (a step's TVMScript) for `target` in the worker process and read its facts."""
    from mlc_lab.core.worker import worker

    result = worker().call("lower", timeout=timeout, script=script, func_name=func_name, target=target, ptx=ptx)
    return build_lowering(result, script, loop_tree, step)
