"""How one step compiles: the passes `tvm.compile` ran, the code, and the facts per loop and kernel.

Plain data with one encoding (``Lowering.to_json``): ``mlc_lab.core.lowering`` fills it from the worker's
answer (reading the facts with ``mlc_lab.core.lowering.codefacts``) and adds the look-ups that need it
(``Lowering.loop``, ``asm_around_first``); the explorer's Compiler panel reads the TypeScript types
generated from here into ``js/lib/model.ts`` (``python -m mlc_lab.core.model_ts``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal, TypedDict

from mlc_lab.model.conform import WireData

__all__ = [
    "CudaBuild",
    "GpuBuffer",
    "GpuKernel",
    "KernelArray",
    "KernelFacts",
    "LoopFacts",
    "LowerResult",
    "Lowering",
    "PassStep",
    "PtxasReport",
    "VectorAccess",
    "VectorLoop",
]
# What js/lib/model.ts gets of this module, in order (python -m mlc_lab.core.model_ts).
WIRE = (
    "PassStep",
    "LoopFacts",
    "KernelFacts",
    "GpuBuffer",
    "KernelArray",
    "Lowering",
)


class GpuBuffer(TypedDict):
    """A shared or local buffer at the size one block / one thread keeps it."""

    name: str
    scope: str
    shape: list[int | None]  # None: a dimension that is not a constant
    dtype: str
    bytes: int | None


class KernelArray(TypedDict):
    """An array a CUDA kernel's source declares (the facts without ptxas)."""

    name: str
    scope: str  # "local" | "shared"
    elements: int | None
    dtype: str
    bytes: int | None


@dataclass
class KernelFacts:
    """One CUDA kernel, from ptxas -v and the PTX text."""

    name: str
    registers: int | None = None
    shared_bytes: int = 0
    stack_bytes: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    vector_loads: int = 0  # ld.*.v2/.v4
    vector_stores: int = 0
    scalar_loads: int = 0
    scalar_stores: int = 0
    shared_loads: int = 0
    fma: int = 0
    barriers: int = 0  # bar.sync in the PTX

    __wire_properties__ = ("facts_from",)  # sent with the fields (see to_json)

    @property
    def facts_from(self) -> Literal["ptxas", "source"]:
        """Where the figures come from: ptxas's report, or (no ptxas) the kernel's source alone."""
        return "ptxas" if self.registers is not None else "source"

    def to_json(self) -> dict:
        return {**asdict(self), **{name: getattr(self, name) for name in self.__wire_properties__}}


@dataclass
class LoopFacts:
    """What the machine code of one loop of the schedule looks like."""

    loop: str  # the name the explorer uses (qualified when ambiguous: "Y/i")
    name: str  # the loop variable
    line: int  # its `for` line in the step's TVMScript
    end_line: int
    kind: str  # serial | vectorized | parallel | unrolled | thread_binding
    extent: int | None
    innermost: bool
    asm_lines: list[int] = field(default_factory=list)  # instructions attributed to its lines
    ir_lines: list[int] = field(default_factory=list)  # LLVM IR instructions whose !dbg line is in it
    vector_width: int = 0  # most elements per packed float operation
    register: str = ""  # the widest register of those operations (xmm/ymm/zmm)
    vector_fma: int = 0
    scalar_fma: int = 0
    vector_arith: int = 0
    scalar_arith: int = 0
    vector_loads: int = 0  # including loads folded into arithmetic (a memory operand)
    vector_stores: int = 0
    scalar_loads: int = 0
    scalar_stores: int = 0
    broadcasts: int = 0
    gathers: int = 0
    in_llvm_ir: bool | None = None  # still a loop in LLVM IR (None: no IR to tell)
    unrolled_copies: int | None = None  # copies of the body in the code when the loop was unrolled
    runtime_calls: dict[str, int] = field(default_factory=dict)
    # True when some instructions could only be placed in an enclosing parallel loop's body as a
    # whole: TVM emits no line information inside the function that runs a parallel loop's body.
    approximate: bool = False
    verdict: str = ""

    __wire_properties__ = ("is_vector", "scalar_fallbacks")  # sent with the fields (see to_json)

    @property
    def is_vector(self) -> bool:
        return self.vector_fma + self.vector_arith > 0

    @property
    def scalar_fallbacks(self) -> int:
        """Scalar float operations: what runs one element at a time."""
        return self.scalar_fma + self.scalar_arith

    def to_json(self) -> dict:
        return {**asdict(self), **{name: getattr(self, name) for name in self.__wire_properties__}}


@dataclass
class PassStep:
    """One pass that `tvm.compile` ran. `script` is the module after it when it changed something;
    `base` is the index of the pass whose script was its input (-1: the step's own TVMScript)."""

    index: int
    name: str
    phase: str  # bind | pipeline | split | host | device | codegen
    status: Literal["changed", "no-op", "failed"]
    depth: int = 0  # 1 for the passes a pass runs inside itself (HoistIfThenElse, SplitHostDevice)
    base: int = -1
    note: str = ""
    script: str | None = None
    error: str | None = None
    seconds: float = 0.0


@dataclass
class Lowering:
    """Everything about how one step compiles for one target (see `Session.lower`).

    ``mlc_lab.core.lowering.Lowering`` adds the look-ups that need core (by pass or loop name, the
    assembly around a loop's first FMA); the fields and the encoding are these."""

    target: str
    kind: Literal["cpu", "cuda"]
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
    loops: list[LoopFacts] = field(default_factory=list)
    kernels: list[KernelFacts] = field(default_factory=list)
    cuda_loop_lines: dict[str, list[int]] = field(default_factory=dict)  # loop variable -> CUDA source lines
    arch: str = ""  # the CUDA architecture compiled for ("sm_75"); "" for the CPU
    # CUDA: the shared and local buffers at the size one block / one thread keeps them
    # [{"name", "scope", "shape", "dtype", "bytes"}], and per kernel the arrays its source declares
    # [{"name", "scope" ("local"|"shared"), "elements", "dtype", "bytes"}]: the facts without ptxas.
    gpu_buffers: list[GpuBuffer] = field(default_factory=list)
    kernel_arrays: dict[str, list[KernelArray]] = field(default_factory=dict)
    verdict: str = ""
    seconds: float = 0.0  # in the worker, all included
    timings: dict[str, float] = field(default_factory=dict)  # seconds: parse, compile, code_text

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

    @property
    def code(self) -> str:
        """The generated code: assembly for CPU targets, CUDA source for GPU ones."""
        return self.asm if self.kind == "cpu" else self.cuda_source

    def summary(self) -> str:
        counts = {s: sum(1 for p in self.passes if p.status == s) for s in ("changed", "no-op", "failed")}
        head = (
            f"step {self.step}: {len(self.passes)} passes for {self.kind} ({counts['changed']} changed, "
            f"{counts['no-op']} no-op, {counts['failed']} failed)"
        )
        lines = [head, self.verdict]
        if self.error:
            lines.append("error: " + self.error.splitlines()[0])
        lines.extend(f"problem: {p}" for p in self.problems)
        return "\n".join(line for line in lines if line)

    def __repr__(self) -> str:
        return f"<Lowering {self.summary().splitlines()[0]}>"

    def _repr_pretty_(self, printer: object, _cycle: bool) -> None:
        printer.text(self.summary())  # type: ignore[attr-defined]

    def to_json(self, *, texts: bool = True) -> dict:
        """Plain JSON data (what the explorer and `mlc-lab lower --json` show). `texts=False` leaves
        out the scripts and code, keeping the pass list, facts and verdict."""
        out = asdict(self)
        out["loops"] = [f.to_json() for f in self.loops]
        out["kernels"] = [k.to_json() for k in self.kernels]
        if not texts:
            for key in ("llvm_ir", "asm", "cuda_source", "ptx", "script"):
                out.pop(key, None)
            for p in out["passes"]:
                p.pop("script", None)
            for f in out["loops"]:
                f.pop("asm_lines", None)
        return out


# ----------------------------------------------------------------------------------------- the worker's answers


class GpuKernel(TypedDict):
    """One CUDA kernel after lowering (``mlc_lab.tvm.measure.build.gpu_kernels``): threads per block (and
    per thread axis), blocks in the grid, shared and local bytes."""

    name: str
    threads_per_block: int
    thread_extents: dict[str, int]
    blocks: int
    shared_bytes: int
    local_bytes: int


@dataclass
class CudaBuild(WireData):
    """The CUDA program of a schedule (the worker's ``cuda``, ``mlc_lab.core.measure.cuda_source``): kernel
    source without the compatibility preamble, the kernels' facts, and PTX when asked for and nvcc is
    present (``ptx_error`` says why not). ``problems`` non-empty: nothing was built (unbound loops, a
    kernel past the GPU's limits), and ``cuda_source`` raises with them."""

    source: str
    full_source: str
    kernels: list[GpuKernel]
    ptx: str | None = None
    ptx_error: str | None = None
    problems: list[str] = field(default_factory=list)


class PtxasReport(TypedDict):
    """``ptxas -v`` on the step's PTX: its report (registers, spills, shared memory), or why there is none."""

    report: str
    error: str | None


class VectorAccess(TypedDict):
    """One buffer access in a vectorized loop, and its stride along the loop in elements (None: not affine)."""

    kind: Literal["load", "store"]
    buffer: str
    stride: int | None


class VectorLoop(TypedDict):
    """A loop marked vectorized as VectorizeLoop received it, and the strides of its accesses."""

    loop: str
    line: int | None
    extent: int | None
    accesses: list[VectorAccess]


@dataclass
class LowerResult(WireData):
    """The worker's ``lower`` (``mlc_lab.tvm.lowering.lower_script``): the passes ``tvm.compile`` ran and the
    texts it made, before any facts are read from them. ``mlc_lab.core.lowering.build_lowering`` reads it
    against the step's loop tree into a `Lowering`."""

    target: str
    kind: Literal["cpu", "cuda"]
    func_name: str
    passes: list[PassStep]
    ok: bool = False
    error: str | None = None
    llvm_ir: str = ""
    asm: str = ""
    cuda_source: str = ""
    ptx: str | None = None
    ptx_error: str | None = None
    ptxas: PtxasReport | None = None
    target_cpu: str = ""
    cpu_features: list[str] = field(default_factory=list)
    vector_strides: list[VectorLoop] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    gpu_buffers: list[GpuBuffer] = field(default_factory=list)  # CUDA
    arch: str = ""  # CUDA
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)  # parse, compile, code_text
