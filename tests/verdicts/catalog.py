"""What the corpus holds: for each program, its correct styles and the single-mistake mutants of each,
with the labels their construction intends (which named check fails, which hazard is present).

An item's id reads ``program/style`` or ``program/style/mutant:NAME``. Every named check of the
target gets a label: "pass", "fail", or "n/a" (the check has nothing to judge in this program, e.g.
shared-memory tiling of a transpose). Hazards: the kinds present (all others absent). The numeric
label is not here: ``generate.py`` obtains it by running the item.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

from mlc_lab.core.checks import CHECKS
from tests.verdicts import cpu_styles as C, gpu_styles as G
from tests.verdicts.programs import CPU_PROGRAMS, GPU_PROGRAMS

GPU_CHECKS = tuple(n for n, c in CHECKS.items() if c.target == "cuda")
CPU_CHECKS = tuple(n for n, c in CHECKS.items() if c.target == "cpu")


@dataclass(frozen=True)
class Spec:
    """One item before it is run: how to schedule it and what its construction intends."""

    id: str
    program: str
    target: str
    schedule: Callable[[Any], None]
    checks: dict
    hazards: tuple = ()
    mistake: str = ""  # one sentence: what this mutant does wrong
    func: str = "main"
    subset: bool = False  # in the fast subset CI runs
    extra: dict = field(default_factory=dict)


# --- reductions on the GPU ---------------------------------------------------------------------------

REDUCTIONS = {
    "matmul": (G.Reduction("C", batch=0, spatial=2), {"rows": 1024, "cols": 1024, "k": 1024}),
    "gemm_relu_add": (
        G.Reduction("gemm", batch=0, spatial=2, epilogue=("relu", "add")),
        {"rows": 1024, "cols": 1024, "k": 1024},
    ),
    "bmm": (G.Reduction("bmm", batch=1, spatial=3), {"rows": 512, "cols": 512, "k": 512}),
    # n and h bound to blockIdx.z, w the rows, co the columns; rc tiled under rh and rw
    "conv2d_nhwc": (G.Reduction("conv", batch=2, spatial=4), {"rows": 64, "cols": 64, "k": 16}),
}

REDUCTION_STYLES = {
    "base": G.Knobs(),
    "regcopy": G.Knobs(regcopy=True),
    "t8x8_tile8x8": G.Knobs(ty=8, tx=8, ly=8, lx=8, tk=8, vec=2),
    "t8x16_regcopy_vec1": G.Knobs(ty=8, tx=16, ly=8, lx=4, tk=32, vec=1, regcopy=True, epilogue="at"),
}


def _accumulator_too_big(k: G.Knobs, cols: int) -> G.Knobs:
    """A 16x16 (1 KB) accumulator per thread: twice the half of the register file the spill rule allows."""
    tx = max(1, min(8, cols // 16))
    return replace(k, ty=8, tx=tx, ly=16, lx=16, vec=1, copy_threads=None)


def _reduction_mutants(name: str, k: G.Knobs, ext: dict, epilogue: bool) -> dict:
    """mutant -> (knobs, checks that fail, hazards present, the mistake in words)."""
    m = {
        "no_compute_at": (
            replace(k, compute_at=False),
            {"shared_memory_tiling"},
            (),
            "the first operand's shared copy is never compute_at'd: TVM fills all of it in a kernel of its own",
        ),
        "copy_axes_swapped": (
            replace(k, copy_swap=True),
            {"cooperative_fetching"},
            (),
            "the cooperative copies bind threadIdx.x to the slower axis of the tile (uncoalesced loads)",
        ),
        "copy_other_threads": (
            replace(k, copy_threads=(k.ty // 2, k.tx * 2)),
            set(),
            ("thread_extent", "out_of_bounds"),
            f"the copies are bound to {k.ty // 2}x{k.tx * 2} threads, the compute to {k.ty}x{k.tx}",
        ),
        "write_back_in_reduction": (
            replace(k, write_back="reduction"),
            {"write_cache"},
            (),
            "the local accumulator is written back inside the reduction loop, once per step of k_0",
        ),
        "no_register_tile": (
            replace(k, ly=1, lx=1, vec=1),
            {"register_tiling"},
            (),
            "each thread computes one element (a 1x1 register tile)",
        ),
        "no_thread_blocks": (
            replace(k, blocks=False),
            {"thread_block_tiling"},
            (),
            "no loop is bound to blockIdx: one thread block walks every tile",
        ),
        "accumulator_too_big": (
            _accumulator_too_big(k, ext["cols"]),
            set(),
            ("spill",),
            "each thread accumulates a 16x16 tile (1 KB), more than its registers hold",
        ),
        "missing_guard": (
            replace(k, guard=False),
            set(),
            ("out_of_bounds",),
            f"the reduction is split by {G.GUARDLESS_TK}, which does not divide it, with the guard disabled: "
            "the last tile reads past its end",
        ),
    }
    over = G.shared_over_limit(k, ext["k"])
    if over is not None:  # (the conv's rc of 16 cannot take its tiles over the limit)
        m["shared_over_limit"] = (
            over,
            set(),
            ("limit",),
            "the reduction tile is widened until the shared tiles pass 48 KB per block",
        )
    if epilogue:
        m["epilogue_own_kernel"] = (
            replace(k, epilogue_kernel=True),
            {"epilogue_fusion"},
            (),
            "the last elementwise op (the add) runs in a kernel of its own",
        )
    return m


def _reduction_specs() -> list[Spec]:
    out = []
    for prog, (red, ext) in REDUCTIONS.items():
        epilogue = bool(red.epilogue)
        base = {c: "pass" for c in GPU_CHECKS}
        if not epilogue:
            base["epilogue_fusion"] = "n/a"
        for sname, knobs in REDUCTION_STYLES.items():
            if knobs.epilogue == "at" and not epilogue:
                knobs = replace(knobs, epilogue="inline")
            knobs = replace(knobs, tk=min(knobs.tk, ext["k"]))  # (the conv's rc is 16)
            subset = prog in ("matmul", "gemm_relu_add") and sname in ("base", "regcopy")
            out.append(Spec(f"{prog}/{sname}", prog, "cuda", _tiled(red, knobs), dict(base), subset=subset))
            for mname, (mk, fails, hz, why) in _reduction_mutants(prog, knobs, ext, epilogue).items():
                labels = {**base, **{c: "fail" for c in fails}}
                out.append(
                    Spec(
                        f"{prog}/{sname}/mutant:{mname}",
                        prog,
                        "cuda",
                        _tiled(red, mk),
                        labels,
                        tuple(hz),
                        why,
                        subset=subset,
                    )
                )
    return out


def _tiled(red: G.Reduction, k: G.Knobs) -> Callable:
    return lambda sch: G.tiled(sch, red, k)


# --- transpose and softmax ---------------------------------------------------------------------------

TRANSPOSE_STYLES = {
    "shared32x8": G.TransposeKnobs(),
    "shared32x8_vec4": G.TransposeKnobs(vec=4),
    "shared16x16": G.TransposeKnobs(tile=16, rows=16),
    "direct": G.TransposeKnobs(shared=False),
}


def _transpose_specs() -> list[Spec]:
    out = []
    for sname, k in TRANSPOSE_STYLES.items():
        base = {c: "n/a" for c in GPU_CHECKS}
        base["thread_block_tiling"] = "pass"
        if k.shared:
            base["cooperative_fetching"] = "pass"
        mutants = {
            "no_thread_blocks": (replace(k, blocks=False), {"thread_block_tiling"}, (), "no loop is bound to blockIdx"),
            "missing_guard": (
                replace(k, threads=384, guard=False) if not k.shared else replace(k, tile=48, guard=False),
                set(),
                ("out_of_bounds",),
                "a split that does not divide 1024, with the guard disabled",
            ),
        }
        if k.shared:
            mutants["copy_axes_swapped"] = (
                replace(k, copy_swap=True),
                {"cooperative_fetching"},
                (),
                "the copy into the shared tile binds threadIdx.x to the slower axis",
            )
        out.append(Spec(f"transpose/{sname}", "transpose", "cuda", _t(k), dict(base)))
        for mname, (mk, fails, hz, why) in mutants.items():
            labels = {**base, **{c: "fail" for c in fails}}
            out.append(Spec(f"transpose/{sname}/mutant:{mname}", "transpose", "cuda", _t(mk), labels, hz, why))
    return out


def _t(k: G.TransposeKnobs) -> Callable:
    return lambda sch: G.transpose(sch, k)


SOFTMAX_STYLES = {
    "row128": G.SoftmaxKnobs(threads=128),
    "row256": G.SoftmaxKnobs(threads=256),
    "thread_per_row64": G.SoftmaxKnobs(threads=64, mode="thread_per_row"),
}


def _softmax_specs() -> list[Spec]:
    out = []
    for sname, k in SOFTMAX_STYLES.items():
        base = {c: "n/a" for c in GPU_CHECKS}
        base["thread_block_tiling"] = "pass"
        base["epilogue_fusion"] = "pass"
        mutants = {
            # with one row per block and no block loop, the rows loop runs on the host and launches the
            # row max, the row sum and the normalisation as kernels of their own for each row (TVM's
            # CUDA build has three kernels): the epilogue is no longer fused either
            "no_thread_blocks": (
                replace(k, blocks=False),
                {"thread_block_tiling", "epilogue_fusion"} if k.mode == "row" else {"thread_block_tiling"},
                (),
                "no loop is bound to blockIdx",
            ),
            "epilogue_own_kernel": (
                replace(k, epilogue_kernel=True),
                {"epilogue_fusion"},
                (),
                "the row max, the row sum and the normalisation each run in a kernel of their own",
            ),
            "missing_guard": (
                replace(k, threads=96, guard=False),
                set(),
                ("out_of_bounds",),
                "a split by 96 threads that does not divide the loop, with the guard disabled",
            ),
        }
        subset = sname == "row128"
        out.append(Spec(f"softmax/{sname}", "softmax", "cuda", _s(k), dict(base), subset=subset))
        for mname, (mk, fails, hz, why) in mutants.items():
            labels = {**base, **{c: "fail" for c in fails}}
            out.append(Spec(f"softmax/{sname}/mutant:{mname}", "softmax", "cuda", _s(mk), labels, hz, why))
    return out


def _s(k: G.SoftmaxKnobs) -> Callable:
    return lambda sch: G.softmax(sch, k)


# --- the course's CPU programs ------------------------------------------------------------------------

CPU = {
    "mm_relu": (C.CpuProgram("Y", 0, "C"), "mm_relu"),
    "matmul_cpu": (C.CpuProgram("C", 0, None), "main"),
    "bmm_relu": (C.CpuProgram("Y", 1, "C"), "bmm_relu"),
}
CPU_STYLES = {
    "j8k4": C.CpuKnobs(),
    "j16k8_vec_epilogue": C.CpuKnobs(jf=16, kf=8, vectorize="epilogue"),
    "j32k16": C.CpuKnobs(jf=32, kf=16),
    "i4j16k4_block": C.CpuKnobs(jf=16, kf=4, ti=4),
}
CPU_MUTANTS = {
    "no_parallel": ({"parallel": False}, "parallel", "no loop runs in parallel"),
    "no_vectorize": ({"vector": False}, "vectorize", "no loop is vectorized"),
    "no_unroll": ({"unroll": False}, "unroll", "the reduction tile is not unrolled"),
    "no_decompose": ({"decompose": False}, "reduction_init", "the reduction's init stays inside its loop"),
    "no_packing": ({"pack": False}, "packing", "B is read in its own layout, a row of j per step of k"),
    "k_innermost": (
        {"order": "k_last", "vectorize": "epilogue"},
        "loop_order",
        "the reduction tile is innermost, under the output's inner loop",
    ),
}


def _cpu_specs() -> list[Spec]:
    out = []
    for prog, (p, func) in CPU.items():
        for sname, k in CPU_STYLES.items():
            if k.vectorize == "epilogue" and p.epilogue is None:
                k = replace(k, vectorize="out")
            base = {c: "pass" for c in CPU_CHECKS}
            subset = prog == "mm_relu" and sname == "j8k4"
            out.append(Spec(f"{prog}/{sname}", prog, "cpu", _c(p, k), dict(base), func=func, subset=subset))
            for mname, (change, fails, why) in CPU_MUTANTS.items():
                if mname == "k_innermost" and p.epilogue is None:
                    change = {"order": "k_last"}
                mk = replace(k, **change)
                labels = {**base, fails: "fail"}
                out.append(
                    Spec(f"{prog}/{sname}/mutant:{mname}", prog, "cpu", _c(p, mk), labels, (), why, func, subset)
                )
    return out


def _c(p: C.CpuProgram, k: C.CpuKnobs) -> Callable:
    return lambda sch: C.cpu(sch, p, k)


def specs() -> list[Spec]:
    return _reduction_specs() + _transpose_specs() + _softmax_specs() + _cpu_specs()


PROGRAMS = {**GPU_PROGRAMS, **CPU_PROGRAMS}
