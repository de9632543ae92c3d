"""Property tests: random primitive sequences with random arguments on several programs, and
schedules drawn from the conformance corpus with their decisions drawn again.

Whatever is applied, the process never crashes, a failed step leaves the session exactly as it was,
and replaying the session's trace (as text and as JSON) reproduces its current program; a corpus
schedule with new decisions (compute locations -1/-2, dynamic tiles, layouts with sampled values)
replays to exactly TVM's own replay of it. 40 examples each in CI; 1000 under ``pytest -m full``.
"""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

from mlc_lab import MlcLabError, ScheduleStepError, Session
from mlc_lab.tvm.program import structural_equal
from tests.fixtures.programs import CONV, GPU_TWO_BLOCKS, MM_RELU, TWO_STAGE, matmul

PROGRAMS = {"matmul": matmul(64), "mm_relu": MM_RELU, "conv": CONV, "two_stage": TWO_STAGE, "gpu": GPU_TWO_BLOCKS}
_SESSIONS: dict[str, Session] = {}

PRIMITIVES = [
    "split",
    "reorder",
    "fuse",
    "parallel",
    "vectorize",
    "unroll",
    "bind",
    "compute_at",
    "reverse_compute_at",
    "cache_read",
    "cache_write",
    "decompose_reduction",
    "compute_inline",
    "reverse_compute_inline",
    "rfactor",
    "blockize",
    "annotate",
    "sample_perfect_tile",
    "sample_categorical",
]
THREADS = ["blockIdx.x", "threadIdx.x", "threadIdx.y", "vthread.x", "warp.bogus"]


def _nodes(tree: dict, kind: str) -> list[dict]:
    out, stack = [], [c for f in tree["functions"] for c in f["children"]]
    while stack:
        n = stack.pop()
        if n["kind"] == kind:
            out.append(n)
        stack.extend(n["children"])
    return out


def draw_call(data, s: Session, sampled: list):
    tree = s.loop_tree()
    loops = [n["qualified"] for n in _nodes(tree, "loop")] or ["nope"]
    blocks = [n["name"] for n in _nodes(tree, "block")] or ["nope"]
    loop = lambda: data.draw(st.sampled_from(loops + ["missing"]))  # noqa: E731
    block = lambda: data.draw(st.sampled_from(blocks))  # noqa: E731
    prim = data.draw(st.sampled_from(PRIMITIVES))
    factor = st.one_of(st.none(), st.integers(1, 40), st.sampled_from(sampled) if sampled else st.none())
    if prim == "split":
        return prim, (loop(),), {"factors": data.draw(st.lists(factor, min_size=2, max_size=3))}
    if prim in ("reorder", "fuse"):
        return prim, tuple(data.draw(st.lists(st.sampled_from(loops), min_size=1, max_size=4))), {}
    if prim in ("parallel", "vectorize", "unroll", "rfactor") and prim != "rfactor":
        return prim, (loop(),), {}
    if prim == "rfactor":
        return prim, (loop(), data.draw(st.integers(0, 2))), {}
    if prim == "bind":
        return prim, (loop(), data.draw(st.sampled_from(THREADS))), {}
    if prim in ("compute_at", "reverse_compute_at", "decompose_reduction"):
        return prim, (block(), loop()), {}
    if prim in ("cache_read", "cache_write"):
        return (
            prim,
            (block(), data.draw(st.integers(0, 2)), data.draw(st.sampled_from(["local", "shared", "global"]))),
            {},
        )
    if prim in ("compute_inline", "reverse_compute_inline"):
        return prim, (block(),), {}
    if prim == "blockize":
        return prim, (loop(),), {}
    if prim == "annotate":
        return (
            prim,
            (data.draw(st.sampled_from(loops + blocks)), "pragma_unroll_explicit", data.draw(st.integers(0, 9))),
            {},
        )
    if prim == "sample_perfect_tile":
        return prim, (loop(),), {"n": data.draw(st.integers(1, 3)), "max_innermost_factor": 16}
    return prim, (), {"candidates": [1, 2, 4], "probs": [0.2, 0.3, 0.5]}


CI_EXAMPLES = int(os.environ.get("MLC_LAB_FUZZ_EXAMPLES", "40"))
FULL_EXAMPLES = 1000


def _settings(examples: int):
    # Shrinking TVM programs is slow (minutes); the failing example is printed unshrunk instead.
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
        phases=[Phase.explicit, Phase.reuse, Phase.generate],
    )


def random_schedules_never_break_the_session(name, data, seed):
    s = Session(PROGRAMS[name], seed=seed)
    sampled: list = []
    for _ in range(data.draw(st.integers(1, 8))):
        prim, args, kwargs = draw_call(data, s, sampled)
        before = (s.current.id, s.script, s.trace, len(s.steps))
        try:
            out = s.apply(prim, *args, **kwargs)
        except ScheduleStepError as exc:
            assert exc.summary and "\n" not in exc.summary
            assert (s.current.id, s.script, s.trace, len(s.steps)) == before
            continue
        if prim == "sample_perfect_tile":
            sampled.extend(out)
        if data.draw(st.booleans()) and s.current.parent is not None and data.draw(st.integers(0, 4)) == 0:
            s.undo()
            sampled = [v for v in sampled if v.step in s.path()]
    if True:  # also when the history is back at the original program
        replayed = Session.from_trace(PROGRAMS[name], s.trace, seed=seed)
        assert structural_equal(replayed.module, s.module)
        from_json = Session.from_trace(PROGRAMS[name], json.loads(json.dumps(s.trace_json)), seed=seed)
        assert structural_equal(from_json.module, s.module)
    json.dumps(s.loop_tree())


_RANDOM = given(name=st.sampled_from(sorted(PROGRAMS)), data=st.data(), seed=st.integers(1, 1000))
test_random_schedules_never_break_the_session = _settings(CI_EXAMPLES)(
    _RANDOM(random_schedules_never_break_the_session)
)
test_random_schedules_never_break_the_session_full = pytest.mark.full(
    _settings(FULL_EXAMPLES)(_RANDOM(random_schedules_never_break_the_session))
)


# --- schedules from the conformance corpus, decisions drawn again ------------------------------------


def _corpus_pool() -> list[dict]:
    """Small schedules of every kind the corpus holds (primitives, course, a sketch per workload)."""
    from tests.conformance import harness

    pool = [e for e in harness.entries("fast") if e["tvm_json"]]
    return sorted(pool, key=lambda e: e["id"])


def _drawn_decisions(data, entry: dict) -> list:
    """The entry's JSON trace with each sampling decision kept or drawn again (compute locations
    among -2, -1 and the original; categorical among its candidates; tiles kept: their extents are
    not in the JSON, and a dynamic tile keeps its -1)."""
    insts, decisions = json.loads(json.dumps(entry["json"]))
    new = []
    for pos, value in decisions:
        kind = insts[pos][0]
        if kind == "SampleComputeLocation":
            value = data.draw(st.sampled_from(sorted({-2, -1, value})))
        elif kind == "SampleCategorical":
            value = data.draw(st.integers(0, len(insts[pos][2][0]) - 1))
        new.append([pos, value])
    return [insts, new]


def _tvm_replay(module_text: str, trace: list):
    """TVM's own replay of a JSON trace (the oracle), on a module of its own."""
    import tvm
    from tvm import s_tir
    from tvm.s_tir.schedule import Trace

    sch = s_tir.Schedule(tvm.script.from_source(module_text), debug_mask="none")
    Trace.apply_json_to_schedule(trace, sch)
    return sch


def _same(a, b) -> bool:
    """Structurally equal, free variables matched by position (cache_inplace leaves one in the module:
    two replays cannot share its identity)."""
    import tvm_ffi

    return bool(tvm_ffi.structural_equal(a, b, map_free_vars=True))


def corpus_schedules_replay_like_tvm(data):
    entry = data.draw(st.sampled_from(_corpus_pool()), label="entry")
    trace = _drawn_decisions(data, entry)
    length = data.draw(st.integers(1, len(trace[0])), label="instructions")
    trace = [trace[0][:length], [d for d in trace[1] if d[0] < length]]
    try:
        oracle = _tvm_replay(entry["module"], trace)
    except Exception:  # noqa: BLE001  (TVM refuses these decisions: nothing to compare)
        assume(False)
    s = Session(entry["module"], entry["func"])
    try:
        s.replay(trace)
    except MlcLabError as exc:  # TVM replayed it, so mlc_lab must too
        raise AssertionError(f"{entry['id']}: {exc}") from None
    assert _same(s.module, oracle.mod), entry["id"]
    if entry["tvm_text"]:
        text = Session.from_trace(entry["module"], str(oracle.trace), entry["func"])
        assert _same(text.module, oracle.mod), entry["id"]
    json.dumps(s.loop_tree())


test_corpus_schedules_replay_like_tvm = _settings(CI_EXAMPLES)(given(data=st.data())(corpus_schedules_replay_like_tvm))
test_corpus_schedules_replay_like_tvm_full = pytest.mark.full(
    _settings(FULL_EXAMPLES)(given(data=st.data())(corpus_schedules_replay_like_tvm))
)


def test_errors_are_mlc_lab_errors_only():
    # The hierarchy the property test relies on: every refusal is an MlcLabError.
    assert issubclass(ScheduleStepError, MlcLabError)
