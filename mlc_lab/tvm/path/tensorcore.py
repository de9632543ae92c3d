"""Tensor-core targets: the way to a program that meta_schedule's ``MultiLevelTilingTensorCore`` rule
shapes (reindex, shared and wmma stages, blockize of the compute and of every copy into or out of
the wmma fragments, the intrinsics named in ``meta_schedule.auto_tensorize``).

Such a target is one of a few sketches of the rule applied to the start, differing only in their
sampled decisions. The rule's configuration is read off the target (its intrinsics, the scopes of its
stages, a software pipeline); each sketch the rule makes from the start is compared loop by loop
with the target, which gives every tile size (a loop made by one split piece says its factor; a
fused loop says a product) and every sampled annotation (read where the sketch writes it). The
sketch is then applied one primitive at a time on the work schedule, with those values as literals,
and claimed only when TVM's ``structural_equal`` says it is the target.
"""

from __future__ import annotations

import itertools
import time
from typing import Any, Callable, Iterator

import tvm
from tvm.s_tir import meta_schedule as ms
from tvm.target import Target

from mlc_lab.tvm.path.ir import FuncView, plain, read, substitute
from mlc_lab.tvm.path.work import Refused, Unreachable, Work

_SCOPES = ("wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator")
_ANN = "meta_schedule.auto_tensorize"
_CUDA = {
    "kind": "cuda",
    "arch": "sm_80",
    "max_threads_per_block": 1024,
    "thread_warp_size": 32,
    "max_shared_memory_per_block": 49152,
    "registers_per_block": 65536,
}
_MAX_SOLUTIONS = 16  # tile sizes the loops leave open, each tried by TVM
_MAX_COMBINATIONS = 20000  # tile sizes checked against the loops (arithmetic only, no TVM)


def is_tensorcore(tgt: FuncView) -> bool:
    """Whether the target holds a wmma stage or a block marked for a tensor intrinsic."""
    if any(str(b.scope()) in _SCOPES for b in tgt.allocs()):
        return True
    return any(_ANN in b.annotations for b in tgt.blocks)


def intrinsics(tgt: FuncView) -> dict[str, str] | None:
    """The wmma intrinsic group the target's blocks are marked with (init, load_a, load_b, compute,
    store), or None when one of them is missing."""
    group: dict[str, str] = {}
    for block in tgt.blocks:
        name = block.annotations.get(_ANN)
        if not isinstance(name, str):
            continue
        init = block.annotations.get(_ANN + "_init")
        if isinstance(init, str):
            group["compute"], group["init"] = name, init
        elif "_load_" in name:
            group["load_a" if "_a_" in name else "load_b"] = name
        elif "_store_" in name:
            group["store"] = name
    return group if len(group) == 5 else None


def _scope_of(intrinsic: str) -> str:
    if intrinsic.endswith("_shared_dyn"):
        return "shared.dyn"
    if intrinsic.endswith("_shared"):
        return "shared"
    return "global"


def _rule(group: dict[str, str], pipeline: bool) -> Any:
    read_scope, write_scope = _scope_of(group["load_a"]), _scope_of(group["store"])
    return ms.schedule_rule.MultiLevelTilingTensorCore(
        intrin_groups=[group],
        structure="SSSRRSRS",
        tile_binds=["blockIdx.y", "blockIdx.x", "threadIdx.y"],
        max_innermost_factor=4,
        vector_load_lens=[1, 2, 3, 4, 8, 16],
        reuse_read=ms.schedule_rule.ReuseType(req="must", levels=[4], scope=read_scope),
        reuse_write=ms.schedule_rule.ReuseType(
            req="must" if write_scope.startswith("shared") else "no", levels=[2], scope=write_scope
        ),
        use_software_pipeline=pipeline,
    )


def rule_sets(tgt: FuncView) -> Iterator[tuple[list[Any], Any]]:
    """The rule lists (with the target they run for) that may have made the target: meta_schedule's
    default for tensor cores, and the tensor-core rule configured as the target reads (alone, or with
    the inlining rules); for another intrinsic (x86 VNNI, dp4a), ``MultiLevelTilingWithIntrin`` as
    meta_schedule configures it for that platform. The default list only for a target that names its
    thread limits (its other rules want them)."""
    cuda = cuda_target(tgt)
    if _bounded(tgt):
        yield list(ms.ScheduleRule.create("cuda-tensorcore")), cuda
    group = intrinsics(tgt)
    if group is None:
        yield from _with_intrin(tgt)
        return
    pipeline = any("software_pipeline_stage" in lp.annotations for lp in tgt.loops)
    inline = [r for r in ms.ScheduleRule.create("cuda") if isinstance(r, ms.schedule_rule.AutoInline)]
    yield [_rule(group, pipeline), *inline], cuda
    yield [_rule(group, pipeline)], cuda


def _with_intrin(tgt: FuncView) -> Iterator[tuple[list[Any], Any]]:
    names = {b.annotations.get(_ANN) for b in tgt.blocks} - {None}
    for name in sorted(n for n in names if isinstance(n, str)):
        if "vnni" in name:
            rule = ms.schedule_rule.MultiLevelTilingWithIntrin(
                name,
                structure="SSRSRS",
                tile_binds=None,
                max_innermost_factor=64,
                vector_load_lens=None,
                reuse_read=None,
                reuse_write=ms.schedule_rule.ReuseType(req="may", levels=[1, 2], scope="global"),
            )
            yield [rule], Target({"kind": "llvm", "mcpu": "cascadelake", "num-cores": 4})
        elif name.startswith("dp4a"):
            rule = ms.schedule_rule.MultiLevelTilingWithIntrin(
                name,
                structure="SSSRRSRS",
                tile_binds=["blockIdx.x", "vthread.x", "threadIdx.x"],
                max_innermost_factor=64,
                vector_load_lens=[1, 2, 3, 4],
                reuse_read=ms.schedule_rule.ReuseType(req="must", levels=[4], scope="shared"),
                reuse_write=ms.schedule_rule.ReuseType(req="must", levels=[3], scope="local"),
            )
            yield [rule], Target({"kind": "cuda", "arch": "sm_70"})


def register_intrinsics() -> None:
    """The CUDA tensor intrinsics the rule names, registered once: TVM's package import parses every
    backend's ~250 TVMScript intrinsics, each decorator calling ``inspect.stack()`` (40 s on a loaded
    machine); the CUDA module alone with a frame walk that reads no source file takes a second or two.
    The walk stands in only while that module is imported."""
    import importlib
    import inspect
    import sys

    if "tvm.s_tir.tensor_intrin.cuda" in sys.modules:
        return
    from mlc_lab.tvm.tuning.build import FastInspect
    from mlc_lab.tvm.tuning.job import import_tensor_intrinsics

    patched: list[Any] = []
    for name in ("tvm.tirx.script.parser.entry", "tvm.script.parser.ir.entry"):
        module: Any = importlib.import_module(name)
        if getattr(module, "inspect", None) is inspect:
            module.inspect = FastInspect(inspect)
            patched.append(module)
    try:
        import_tensor_intrinsics(Target(_CUDA))
        import_tensor_intrinsics(Target("llvm"))  # x86's VNNI
        importlib.import_module("tvm.s_tir.tensor_intrin.dot_product_common")  # dp4a
    finally:
        for module in patched:
            module.inspect = inspect


def cuda_target(tgt: FuncView) -> Any:
    """The CUDA target as the sketch's thread bounds say: a target that names its thread limits makes
    the rule write them on the block (``meta_schedule.thread_extent_*``), a bare one does not."""
    if not _bounded(tgt):
        return Target({"kind": "cuda", "arch": "sm_70"})
    highs = {b.annotations.get("meta_schedule.thread_extent_high_inclusive") for b in tgt.blocks} - {None}
    high = next(iter(highs)) if len(highs) == 1 else None
    return Target({**_CUDA, "max_threads_per_block": high} if isinstance(high, int) else _CUDA)


def _bounded(tgt: FuncView) -> bool:
    return any("meta_schedule.thread_extent_low_inclusive" in b.annotations for b in tgt.blocks)


def sketches(func: Any, rules: list[Any], target: Any) -> list[Any]:
    ctx = ms.TuneContext(
        mod=tvm.IRModule({"main": func}),
        target=target,
        task_name="path",
        space_generator=ms.space_generator.PostOrderApply(sch_rules=rules, postprocs=[], mutator_probs={}),
    )
    return list(ctx.generate_design_space())


# --- the sketch's decisions, read off the target -------------------------------------------------------
def _factorizations(extent: int, n: int, innermost: int) -> list[tuple[int, ...]]:
    """Every way to write ``extent`` as a product of ``n`` factors, the last at most ``innermost``."""
    if n == 1:
        return [(extent,)] if innermost <= 0 or extent <= innermost else []
    out: list[tuple[int, ...]] = []
    for first in range(1, extent + 1):
        if extent % first == 0:
            out.extend((first, *rest) for rest in _factorizations(extent // first, n - 1, innermost))
    return out


def _monomials(space: Any) -> dict[Any, list[tuple[int, int]]]:
    """The loops of the sketch whose extent is a product of sampled tile factors: loop node ->
    [(sample instruction, factor place), ...] (a fused loop lists every factor it multiplies)."""
    by_rv: dict[Any, list[tuple[int, int]]] = {}
    sampled: dict[Any, tuple[int, int]] = {}
    for pos, inst in enumerate(space.trace.insts):
        name = inst.kind.name
        if name == "SamplePerfectTile":
            for k, out in enumerate(inst.outputs):
                sampled[out] = (pos, k)
        elif name == "Split":
            for factor, out in zip(inst.inputs[1:], inst.outputs):
                if factor is not None and factor in sampled:
                    by_rv[out] = [sampled[factor]]
        elif name == "Fuse" and all(i in by_rv for i in inst.inputs):
            by_rv[inst.outputs[0]] = [key for i in inst.inputs for key in by_rv[i]]
    nodes: dict[Any, list[tuple[int, int]]] = {}
    for rv, keys in by_rv.items():
        try:
            node = space.get(rv)
        except Exception:  # noqa: BLE001  (a loop fused or blockized away: its handle is gone)
            continue
        nodes[node] = keys
    return nodes


def decisions(space: Any, func: Any, tgt: FuncView) -> Iterator[dict[int, Any]]:
    """The sampled decisions that give the sketch the target's loops: instruction place -> decision,
    each solution once (none when the sketch's loop nest is not shaped as the target's)."""
    view = read(space.mod["main"])
    if len(view.loops) != len(tgt.loops):
        return
    equations = []
    for node, keys in _monomials(space).items():
        here = next((lp for lp in view.loops if lp.node.same_as(node)), None)
        if here is None:
            continue
        want = tgt.loops[here.order].extent
        if not isinstance(want, int):
            return
        equations.append((keys, want))
    insts = space.trace.insts
    samples = [p for p, inst in enumerate(insts) if inst.kind.name == "SamplePerfectTile"]
    options = []
    for pos in samples:
        inst = insts[pos]
        old = [int(x) for x in space.trace.decisions[inst]]
        extent = 1
        for x in old:
            extent *= x
        inner = int(inst.attrs[1])
        fits = [
            f
            for f in _factorizations(extent, len(old), inner)
            if all(_product(keys, {pos: f}) in (None, want) for keys, want in equations)
        ]
        options.append(fits)
    categorical = _categoricals(space, tgt)
    found = 0
    for n, combo in enumerate(itertools.product(*options)):
        if n >= _MAX_COMBINATIONS:
            return  # the loops leave too much open: the general reader says why
        chosen = dict(zip(samples, combo))
        if all(_product(keys, chosen) == want for keys, want in equations):
            yield {**chosen, **categorical}
            found += 1
            if found >= _MAX_SOLUTIONS:
                return


def _product(keys: list[tuple[int, int]], chosen: dict[int, tuple[int, ...]]) -> int | None:
    """The product of the factors ``keys`` names, None while one of them is not chosen."""
    out = 1
    for pos, k in keys:
        if pos not in chosen:
            return None
        out *= chosen[pos][k]
    return out


def _categoricals(space: Any, tgt: FuncView) -> dict[int, int]:
    """Each sampled annotation's decision: the place of the target's value among its candidates."""
    insts = space.trace.insts
    out: dict[int, int] = {}
    for pos, inst in enumerate(insts):
        if inst.kind.name != "SampleCategorical":
            continue
        candidates = [int(c) for c in inst.attrs[0]]
        for use in insts:
            if use.kind.name != "Annotate" or len(use.inputs) < 2 or not _same(use.inputs[1], inst.outputs[0]):
                continue
            value = _annotation(space, use, tgt)
            if isinstance(value, int) and value in candidates:
                out[pos] = candidates.index(value)
    return out


def _same(a: Any, b: Any) -> bool:
    return hasattr(a, "same_as") and bool(a.same_as(b))


def _annotation(space: Any, use: Any, tgt: FuncView) -> Any:
    key = str(use.attrs[0])
    try:
        node = space.get(use.inputs[0])
    except Exception:  # noqa: BLE001  (the annotated block was inlined later: nothing to read)
        return None
    if isinstance(node, tvm.tirx.For):
        view = read(space.mod["main"])
        here = next((lp for lp in view.loops if lp.node.same_as(node)), None)
        return None if here is None else tgt.loops[here.order].annotations.get(key)
    name = str(node.name_hint)
    if name == "root" and tgt.root is not None:
        return plain(tgt.root.annotations.get(key))
    block = tgt.block(name)
    return None if block is None else block.annotations.get(key)


# --- the sketch applied, one primitive at a time ------------------------------------------------------
_LOOKUPS = {"get_sblock", "get_loops", "get_child_blocks", "get_producers", "get_consumers", "get_output_blocks"}
_VARIADIC = {"reorder": "ordered_loops", "fuse": "loops"}


def apply_sketch(work: Work, space: Any, chosen: dict[int, Any]) -> None:
    """Every transforming instruction of the sketch on ``work`` (``work.apply``: recorded, with loops
    and blocks by what they are), sampled values as the literals ``chosen`` gives; look-ups run
    unrecorded. ``Refused`` when TVM refuses one."""
    from mlc_lab.text.trace_tables import Ref
    from mlc_lab.tvm import trace_exprs, trace_io
    from mlc_lab.tvm.schedule import to_plain

    calls = trace_io.calls_from_json(to_plain(space.trace.as_json(remove_postproc=False)))
    env: dict[str, Any] = {}

    def lookup(name: str) -> Any:
        return env[name]

    def resolve(value: Any) -> Any:
        if isinstance(value, Ref):
            return env[value.name]
        if isinstance(value, list):
            return [resolve(v) for v in value]
        return trace_exprs.bind_value(value, lookup)

    for pos, call in enumerate(calls):
        kwargs = {
            k: _literal(v, env) if k == "index_map" else resolve(v) for k, v in call.kwargs.items() if k != "decision"
        }
        if call.primitive == "sample_perfect_tile":
            factors = chosen.get(pos) or [int(x) for x in call.kwargs["decision"]]
            env.update({t: int(f) for t, f in zip(call.targets, factors)})
            continue
        if call.primitive == "sample_categorical":
            index = chosen.get(pos, call.kwargs["decision"])
            env[call.targets[0]] = int(kwargs["candidates"][int(index)])
            continue
        if call.primitive in _VARIADIC:
            kwargs[_VARIADIC[call.primitive]] = [resolve(a) for a in call.args]
        if call.primitive == "get_sblock":
            kwargs["func_name"] = work.func
        if call.primitive in _LOOKUPS:
            result = getattr(work.sch, call.primitive)(**kwargs)
        else:
            result = work.apply(call.primitive, _reason(call.primitive, kwargs), **kwargs)
        _define(env, call.targets, result)


def _define(env: dict[str, Any], targets: list[str], result: Any) -> None:
    if not targets:
        return
    if len(targets) == 1 and not isinstance(result, (list, tuple)) and not hasattr(result, "__len__"):
        env[targets[0]] = result
        return
    values = list(result) if isinstance(result, (list, tuple)) or hasattr(result, "__len__") else [result]
    env.update(zip(targets, values))


def _literal(value: Any, env: dict[str, Any]) -> Any:
    """An index map whose sampled values are put in as numbers the way TVM's own replay does it
    (substituted, not simplified: ``i0 // 16 // 4`` folded to ``i0 // 64`` makes other bindings)."""
    from mlc_lab.tvm.trace_exprs import JsonIndexMap

    if not isinstance(value, JsonIndexMap):
        return value
    index_map = value.index_map
    if not value.free:
        return index_map
    free: dict[str, Any] = {}
    for expr in index_map.final_indices:
        _collect(expr, value.free, free)
    values = [(var, tvm.tirx.const(int(env[name]), str(var.ty))) for name, var in free.items()]
    final = [_fold(substitute(e, values)) for e in index_map.final_indices]
    return tvm.tirx.IndexMap(list(index_map.initial_indices), final, None)


_FOLD = {"Add": int.__add__, "Sub": int.__sub__, "Mul": int.__mul__, "FloorDiv": int.__floordiv__}


def _fold(expr: Any) -> Any:
    """Arithmetic on two numbers written as their value (``1 * 4`` as ``4``: what a person writes
    and the session's index-map reader builds), every other node kept as it is."""
    if not (hasattr(expr, "a") and hasattr(expr, "b")) or type(expr).__name__ not in _FOLD_ALL:
        return expr
    a, b = _fold(expr.a), _fold(expr.b)
    if isinstance(a, tvm.tirx.IntImm) and isinstance(b, tvm.tirx.IntImm) and type(expr).__name__ in _FOLD:
        if type(expr).__name__ != "FloorDiv" or int(b.value) != 0:
            return tvm.tirx.const(_FOLD[type(expr).__name__](int(a.value), int(b.value)), str(a.ty))
    return type(expr)(a, b)


_FOLD_ALL = {"Add", "Sub", "Mul", "FloorDiv", "FloorMod", "Min", "Max"}


def _collect(expr: Any, names: tuple[str, ...], out: dict[str, Any]) -> None:
    """The variables named ``names`` in an index expression (its arithmetic: ``ir.substitute``'s)."""
    if isinstance(expr, tvm.tirx.Var):
        if str(expr.name) in names:
            out[str(expr.name)] = expr
    elif hasattr(expr, "a") and hasattr(expr, "b"):
        _collect(expr.a, names, out)
        _collect(expr.b, names, out)


def _reason(primitive: str, kwargs: dict) -> str:
    """One sentence for a step of the tensor-core sketch."""
    said = {
        "reindex": "the target reads and writes the computation through reindexed buffers",
        "transform_layout": "the target lays the buffer out as the tensor-core tiles want",
        "transform_block_layout": "the target's block iterates in the layout of its buffers",
        "split": "the target tiles this loop",
        "reorder": "the target orders the tiles so",
        "fuse": "the target runs these tiles as one loop",
        "bind": f"the target binds this loop to {kwargs.get('thread_axis')}",
        "blockize": "the target makes the loops inside here one block, the unit a tensor intrinsic computes",
        "cache_read": f"the target copies this input into {kwargs.get('storage_scope')} first",
        "cache_write": f"the target writes the result through {kwargs.get('storage_scope')}",
        "compute_at": "the target computes this stage inside that loop",
        "reverse_compute_at": "the target writes this stage back inside that loop",
        "compute_inline": "the target has no block of its own for this copy",
        "reverse_compute_inline": "the target has no block of its own for this copy",
        "storage_align": "the target pads the shared buffer's rows against bank conflicts",
        "annotate": f"the target carries {kwargs.get('ann_key')}={kwargs.get('ann_val')!r}",
    }
    return said.get(primitive, f"the target's sketch applies {primitive} here")


def find(
    make: Callable[[], Any], func: str, target: Any, tgt: FuncView, deadline_s: float, same: Callable[[Any, Any], bool]
) -> Work | None:
    """The work schedule at the target (its ``ops`` the way), or None when no sketch of the rule
    gives it; ``same`` is the engine's structural equality."""
    started = time.perf_counter()
    register_intrinsics()
    start = make()
    for rules, platform in rule_sets(tgt):
        try:
            spaces = sketches(start.mod[func], rules, platform)
        except Exception:  # noqa: BLE001  (the rule does not apply to this program)
            continue
        for space in spaces:
            for chosen in decisions(space, start.mod[func], tgt):
                if time.perf_counter() - started > deadline_s:
                    return None
                work = Work(make(), func)
                try:
                    apply_sketch(work, space, chosen)
                except (Refused, Unreachable, KeyError):
                    continue
                if same(work.mod[func], target):
                    return work
    return None


def blockize_once(make: Callable[[], Any], func: str, target: Any, tgt: FuncView, same: Callable) -> Work | None:
    """The target as the start with one ``blockize`` (at one of its loops, unit iterators kept or
    not, or of blocks side by side): what the tiling reader misses where the start's loops already
    are the target's and only the outer block is new. Tried only when the target has one more block
    than the start, nested."""
    start = read(make().mod[func])
    if len(tgt.blocks) != len(start.blocks) + 1 or not any(b.scope is not None for b in tgt.blocks):
        return None
    places: list[Any] = [lp.order for lp in start.loops if lp.blocks]
    places += [list(lp.blocks) for lp in start.loops if len(lp.blocks) > 1]  # the blocks inside one loop
    if len(start.blocks) > 1:
        places.append([b.name for b in start.blocks if b.scope is None])
    for place in places:
        for keep in (True, False):
            work = Work(make(), func)
            try:
                at = work.loop_rv(place) if isinstance(place, int) else [work.block_rv(n) for n in place]
                why = "the target makes these one block of their own"
                work.apply("blockize", why, target=at, preserve_unit_iters=keep)
            except Exception:  # noqa: BLE001  (TVM refuses it, or cannot even look the blocks up: not this way)
                continue
            if same(work.mod[func], target):
                return work
    return None
