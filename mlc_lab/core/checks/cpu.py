"""The named checks of a CPU schedule (loop order, vectorization, parallel loops, unrolling, the
reduction's init, a packed operand), registered in ``mlc_lab.core.checks.rules.CHECKS`` after the GPU
ones. Each reads the exact strides and loop kinds of the step, never a reference's extents.
"""

from __future__ import annotations

import math

import numpy as np

from mlc_lab.core.checks.facts import Site, StepFacts, linear_shape
from mlc_lab.core.checks.rules import CHECKS, main_of, reduction_loops, register
from mlc_lab.core.checks.base import CheckResult


# --- CPU --------------------------------------------------------------------------------------------


def _stride(sf: StepFacts, s: Site, lid: int) -> int | None:
    """Elements the access moves by when loop ``lid`` steps by one (others at their first value)."""
    from mlc_lab.core.access.expr import evaluate

    info = sf.prog.buffers[s.access.buffer]
    shape = linear_shape(info.shape)
    env = {lp.id: int(lp.min) if isinstance(lp.min, int) else 0 for lp in s.chain + tuple(s.access.inner)}
    try:
        a = [int(np.asarray(evaluate(e, env))) for e in s.access.indices]
        env[lid] = env.get(lid, 0) + 1
        b = [int(np.asarray(evaluate(e, env))) for e in s.access.indices]
    except Exception:  # noqa: BLE001
        return None
    lin = lambda ix: sum(i * math.prod(shape[d + 1 :]) for d, i in enumerate(ix))  # noqa: E731
    return lin(b) - lin(a)


def _cpu_main(sf: StepFacts):
    r, _k, sites = main_of(sf)
    if r is None or not sites:
        return None, None, sites
    chain = sites[0].chain
    return r, chain, sites


@register("loop_order", "cpu", "loop order")
def loop_order(sf: StepFacts) -> CheckResult | None:
    r, chain, sites = _cpu_main(sf)
    if r is None or not chain:
        return None
    inner = chain[-1]
    strides = {}
    for s in sites:
        st = _stride(sf, s, inner.id)
        strides[f"{s.access.buffer}" + (" (init)" if s.access.label == "init" else "")] = st
    body = {b: v for b, v in strides.items() if not b.endswith("(init)")}
    ev = {"loop": sf.loop_name(inner.id), "strides": body}
    bad = {b: v for b, v in body.items() if v is not None and abs(v) > 1}
    if bad:
        b, v = next(iter(bad.items()))
        return CheckResult(
            "loop_order",
            False,
            f"the innermost loop {sf.loop_name(inner.id)} of {r.name} moves along {b} by {v} elements "
            f"per iteration: reorder the loops so that the innermost one walks each buffer with unit "
            f"stride",
            sf.loop_name(inner.id),
            ev,
        )
    return CheckResult(
        "loop_order",
        True,
        f"the innermost loop {sf.loop_name(inner.id)} of {r.name} walks every buffer with unit stride (or not at all)",
        sf.loop_name(inner.id),
        ev,
    )


@register("vectorize", "cpu", "vectorization")
def vectorize(sf: StepFacts) -> CheckResult | None:
    r, chain, sites = _cpu_main(sf)
    if r is None:
        return None
    vec = [lp for lp in sf.prog.loops if lp.kind == "vectorized" and lp.role == "loop"]
    ev = {"loops": [{"loop": sf.loop_name(lp.id), "width": lp.extent} for lp in vec]}
    if not vec:
        inner = chain[-1] if chain else None
        hint = f" (the innermost loop {sf.loop_name(inner.id)} of {r.name} is a candidate)" if inner is not None else ""
        return CheckResult(
            "vectorize",
            False,
            f"no loop is vectorized{hint}: vectorize an innermost data-parallel loop with unit stride",
            r.name,
            ev,
        )
    lp = next((x for x in vec if chain and x in chain), vec[0])
    return CheckResult(
        "vectorize", True, f"loop {sf.loop_name(lp.id)} is vectorized, {lp.extent} lanes wide", sf.loop_name(lp.id), ev
    )


@register("parallel", "cpu", "parallel loops")
def parallel(sf: StepFacts) -> CheckResult | None:
    r, chain, sites = _cpu_main(sf)
    if r is None:
        return None
    par = [lp for lp in (chain or ()) if lp.kind == "parallel"]
    ev = {"loops": [{"loop": sf.loop_name(lp.id), "extent": lp.extent} for lp in par]}
    if not par:
        outer = chain[0] if chain else None
        hint = f" (its outer loop {sf.loop_name(outer.id)})" if outer is not None else ""
        return CheckResult(
            "parallel",
            False,
            f"no loop above {r.name} runs in parallel: parallelize an outer "
            f"data-parallel loop{hint} so every core takes a share",
            r.name,
            ev,
        )
    lp = par[0]
    return CheckResult(
        "parallel",
        True,
        f"loop {sf.loop_name(lp.id)} above {r.name} runs its {lp.extent} iterations in parallel",
        sf.loop_name(lp.id),
        ev,
    )


@register("unroll", "cpu", "unrolling")
def unroll(sf: StepFacts) -> CheckResult | None:
    r, chain, sites = _cpu_main(sf)
    if r is None:
        return None
    unrolled = [lp for lp in sf.prog.loops if lp.kind == "unrolled" and lp.role == "loop"]
    pragma = [lid for lid, ann in sf.facts.annotations.items() if any("unroll" in key for key in ann)]
    ev = {"unrolled": [sf.loop_name(lp.id) for lp in unrolled], "annotated": [sf.loop_name(lid) for lid in pragma]}
    if unrolled:
        lp = unrolled[0]
        return CheckResult(
            "unroll",
            True,
            f"loop {sf.loop_name(lp.id)} is unrolled ({lp.extent} copies of its body)",
            sf.loop_name(lp.id),
            ev,
        )
    if pragma:
        return CheckResult(
            "unroll", True, f"loop {sf.loop_name(pragma[0])} carries an unroll annotation", sf.loop_name(pragma[0]), ev
        )
    return CheckResult(
        "unroll",
        False,
        f"no loop is unrolled: unroll a short inner loop of {r.name} to save its loop overhead",
        r.name,
        ev,
    )


@register("reduction_init", "cpu", "decomposed reduction init")
def reduction_init(sf: StepFacts) -> CheckResult | None:
    r, chain, sites = _cpu_main(sf)
    if r is None:
        return None
    out = r.writes[0] if r.writes else None
    inits = [b for b in sf.facts.blocks.values() if b.name != r.name and out in b.writes and not b.reads]
    ev = {"block": r.name, "init_blocks": [b.name for b in inits]}
    if r.has_init or not inits:
        red = reduction_loops(sf, r)
        where = sf.loop_name(red[0]) if red else r.name
        return CheckResult(
            "reduction_init",
            False,
            f"block {r.name} still sets {out} to its initial value inside the reduction (T.init()): "
            f"decompose_reduction({r.name}, {where}) moves it into a block of its own before the loop",
            r.name,
            ev,
        )
    b = inits[0]
    where = sf.loop_name(b.loops[-1]) if b.loops else None
    return CheckResult(
        "reduction_init",
        True,
        f"the reduction's init is a block of its own ({b.name}), outside the reduction loop",
        b.name,
        ev | {"under": where},
    )


@register("packing", "cpu", "packed operand")
def packing(sf: StepFacts) -> CheckResult | None:
    r, chain, sites = _cpu_main(sf)
    if r is None or not chain:
        return None
    params = _inputs(sf)
    spatial = [lid for lid in r.loops if lid in r.loops_of("S")]
    ev: dict = {"packed": []}
    for s in sites:
        if s.access.kind != "read" or s.access.buffer in r.writes:
            continue
        prods = sf.producers(s.access.buffer)
        if not prods or not any(x in params for x in prods[0].reads):
            continue
        p = prods[0]
        if not _relayout(sf, p.name):
            continue
        unit = [lid for lid in spatial if _stride(sf, s, lid) == 1]
        ev["packed"].append(
            {
                "buffer": s.access.buffer,
                "from": list(p.reads),
                "by": p.name,
                "unit_stride_loop": sf.loop_name(unit[-1]) if unit else None,
            }
        )
    good = [x for x in ev["packed"] if x["unit_stride_loop"]]
    if good:
        g = good[0]
        return CheckResult(
            "packing",
            True,
            f"{r.name} reads {g['buffer']}, a copy of {', '.join(g['from'])} that block {g['by']} lays "
            f"out so that loop {g['unit_stride_loop']} reads it contiguously",
            g["by"],
            ev,
        )
    return CheckResult(
        "packing",
        False,
        f"no operand of {r.name} is packed: cache_read the operand read with a large stride and "
        f"transform_layout it so that an inner spatial loop reads it contiguously",
        r.name,
        ev,
    )


def _relayout(sf: StepFacts, block: str) -> bool:
    """Does the copy block write its buffer in another layout than it reads it?"""
    ss = sf.block_sites(block)
    w = next((s for s in ss if s.access.kind == "write"), None)
    rd = next((s for s in ss if s.access.kind == "read"), None)
    if w is None or rd is None:
        return False
    return len(w.access.indices) != len(rd.access.indices) or any(
        str(a) != str(b) for a, b in zip(w.access.indices, rd.access.indices)
    )


def _inputs(sf: StepFacts) -> set:
    """Buffers of the original program that no block writes (the function's inputs)."""
    written = {w for b in sf.original.blocks.values() for w in b.writes}
    read = {x for b in sf.original.blocks.values() for x in b.reads}
    return read - written


def registered() -> list:
    """The names of the CPU checks, in the order a report lists them."""
    return [n for n, c in CHECKS.items() if c.target == "cpu"]
