"""Generate the conformance corpus: schedules TVM itself writes, with TVM's own replay as the oracle.

    PYTHONPATH=. .venv/bin/python tests/conformance/generate.py  # rewrites corpus.json.gz (~1 min)
    PYTHONPATH=. .venv/bin/python tests/conformance/generate.py --sources access_entries  # only these
    PYTHONPATH=. .venv/bin/python tests/conformance/generate.py --sources tvm_test_entries --tvm-tests FILE

Sources, all shipped in the apache-tvm wheel (no network):
- ``meta_schedule.testing.te_workload``: the 13 workloads, design spaces for llvm (AVX-512), CUDA and
  (fp16 GEMMs) CUDA tensor cores; every sketch again with decisions re-sampled under fixed seeds;
- a matmul with a symbolic extent (dynamic ``sample_perfect_tile``, decision ``[-1, ...]``);
- dlight's GPU rules;
- the course's programs (tests/fixtures) with the schedules of the test suite, and at full size
  (1024^3 matmuls on GPU and CPU, its ``T.init()`` kept) with the access analysis's schedules;
- a few schedules per primitive of ``tvm.s_tir.Schedule`` (``primitive_schedules.py``);
- the schedules of TVM's own schedule, meta_schedule and dlight tests, recorded from a checkout of
  apache/tvm's tests by ``tvm_schedule_tests.py`` (``--tvm-tests FILE``; without the file, the
  committed ones are kept).

Each entry stores the original module (TVMScript), the trace as TVM prints it and as its JSON, the
structural hash of the scheduled module, and whether TVM's own replays (text via ``exec`` here, at
generation time only, and JSON) reproduce it. Design spaces are drawn
with a random seed (TuneContext), so a full regeneration changes their sketches' decisions.
"""

from __future__ import annotations

import gzip
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import tvm  # noqa: E402
import tvm_ffi  # noqa: E402
import tvm.s_tir  # noqa: E402,F401
import tvm.s_tir.tensor_intrin  # noqa: E402,F401  (registers the wmma / x86 intrinsics the rules name)
from tvm import s_tir, te  # noqa: E402
from tvm.s_tir import meta_schedule as ms  # noqa: E402
from tvm.s_tir.meta_schedule.testing import te_workload  # noqa: E402
from tvm.s_tir.schedule import Trace  # noqa: E402
from tvm.target import Target  # noqa: E402

from mlc_lab.tvm.program import structural_hash  # noqa: E402
from mlc_lab.tvm.schedule import to_plain  # noqa: E402

CORPUS = Path(__file__).with_name("corpus.json.gz")
WORKLOADS = ["C1D", "C2D", "C3D", "GMM", "GRP", "DIL", "DEP", "T2D", "CAP", "NRM", "SFM", "CBR", "TBG"]
SEEDS = (1, 2)
TARGETS = {
    "llvm": Target({"kind": "llvm", "mcpu": "skylake-avx512", "num-cores": 4}),
    "cuda": Target(
        {
            "kind": "cuda",
            "arch": "sm_80",
            "max_threads_per_block": 1024,
            "thread_warp_size": 32,
            "max_shared_memory_per_block": 49152,
            "registers_per_block": 65536,
        }
    ),
}
TARGETS["cuda-tensorcore"] = TARGETS["cuda"]


def reparsed(mod: tvm.IRModule) -> tvm.IRModule:
    """The module as the corpus stores it (printed) and mlc_lab reads it back: schedule that one, so
    that a printer round trip that is not exact (int64 extents, in-place buffers) is no difference."""
    return tvm.script.from_source(mod.script())


def design_spaces(kind: str, mod: tvm.IRModule) -> list[s_tir.Schedule]:
    ctx = ms.TuneContext(
        mod=mod,
        target=TARGETS[kind],
        task_name="corpus",
        space_generator=ms.space_generator.PostOrderApply(
            sch_rules=ms.ScheduleRule.create(kind), postprocs=[], mutator_probs={}
        ),
    )
    return list(ctx.generate_design_space())


def resampled(trace: Trace, mod: tvm.IRModule, seed: int) -> s_tir.Schedule | None:
    """The sketch with every decision drawn again from ``seed``."""
    sch = s_tir.Schedule(mod, seed=seed, debug_mask="none")
    try:
        Trace(trace.insts, {}).apply_to_schedule(sch, remove_postproc=False)
    except Exception:  # noqa: BLE001  (some draws are invalid for the sketch: TVM refuses them too)
        return None
    return sch


def _printed(trace: Trace) -> str | None:
    """TVM's printed trace; None where its printer fails (decompose_padding in 0.27)."""
    try:
        trace.as_python()
    except Exception:  # noqa: BLE001
        return None
    return str(trace)


def tvm_replays(sch: s_tir.Schedule, mod: tvm.IRModule) -> tuple[bool, bool]:
    """Does TVM's own replay, from its printed Python and from its JSON, reproduce the module?"""
    from tvm.script import tirx as T

    def same(fresh: s_tir.Schedule) -> bool:
        return bool(tvm_ffi.structural_equal(fresh.mod, sch.mod, map_free_vars=True))

    text_ok = json_ok = False
    try:
        fresh = s_tir.Schedule(mod, debug_mask="none")
        env: dict[str, Any] = {"T": T, **tvm.tirx.__dict__}
        exec("\n".join(sch.trace.as_python()), env, {"sch": fresh})  # noqa: S102  (our own corpus, trusted)
        text_ok = same(fresh)
    except Exception:  # noqa: BLE001
        pass
    try:
        fresh = s_tir.Schedule(mod, debug_mask="none")
        Trace.apply_json_to_schedule(sch.trace.as_json(), fresh)
        json_ok = same(fresh)
    except Exception:  # noqa: BLE001
        pass
    return text_ok, json_ok


def entry(ident: str, group: str, mod: tvm.IRModule, sch: s_tir.Schedule, func: str = "main") -> dict:
    text_ok, json_ok = tvm_replays(sch, mod)
    return {
        "id": ident,
        "group": group,
        "func": func,
        "module": mod.script(),
        "text": _printed(sch.trace),
        "json": to_plain(sch.trace.as_json()),
        "hash": structural_hash(sch.mod),
        "tvm_text": text_ok,
        "tvm_json": json_ok,
    }


def te_entries() -> Iterator[dict]:
    for name in WORKLOADS:
        mod = reparsed(tvm.IRModule({"main": te_workload.create_te_workload(name, 0)}))
        for kind in ("llvm", "cuda"):
            yield from _spaces(f"{name}/{kind}", kind, mod)
    gemms = {
        "GMM16": te.create_prim_func(te_workload.matmul(128, 128, 128, "float16", "float32")),
        "BMM16": te.create_prim_func(te_workload.batch_matmul_nkkm(2, 64, 64, 64, "float16", "float32")),
    }
    for name, func in gemms.items():
        yield from _spaces(f"{name}/cuda-tensorcore", "cuda-tensorcore", reparsed(tvm.IRModule({"main": func})))
    n = te.var("n")
    dynamic = te.create_prim_func(te_workload.matmul(n, 128, 128))
    for kind in ("llvm", "cuda"):
        yield from _spaces(f"DYN/{kind}", kind, reparsed(tvm.IRModule({"main": dynamic})))


def _spaces(prefix: str, kind: str, mod: tvm.IRModule) -> Iterator[dict]:
    group = kind
    for i, sch in enumerate(design_spaces(kind, mod)):
        yield entry(f"{prefix}/sketch{i}", group, mod, sch)
        for seed in SEEDS:
            again = resampled(sch.trace, mod, seed)
            if again is not None:
                yield entry(f"{prefix}/sketch{i}/seed{seed}", group, mod, again)


def dlight_full_size() -> dict:
    """dlight's workloads at the sizes a language model gives them (``benchmarks/conformance.py``
    times the access analysis on them: too large for the corpus's quick runs)."""
    return {
        "matmul_2048_f16": te.create_prim_func(te_workload.matmul(2048, 2048, 2048, "float16", "float32")),
        "gemv_4096": te.create_prim_func(te_workload.matmul(1, 4096, 4096, "float16", "float16")),
        "softmax_2048": te.create_prim_func(te_workload.softmax_mn(2048, 2048)),
        "norm_2048": te.create_prim_func(te_workload.norm_bmn(1, 2048, 2048)),
        "matmul_4096x512": te.create_prim_func(te_workload.matmul(512, 4096, 4096, "float16", "float32")),
    }


def dlight_entries(funcs: dict | None = None, prefix: str = "dlight") -> Iterator[dict]:
    from tvm.s_tir import dlight as dl

    target = Target(
        {
            "kind": "cuda",
            "arch": "sm_80",
            "max_threads_per_block": 1024,
            "thread_warp_size": 32,
            "max_shared_memory_per_block": 49152,
        }
    )
    n = te.var("n")
    funcs = funcs or {
        "matmul": te.create_prim_func(te_workload.matmul(256, 256, 256)),
        "matmul_dyn": te.create_prim_func(te_workload.matmul(n, 256, 256)),
        "softmax": te.create_prim_func(te_workload.softmax_mn(256, 256)),
        "norm": te.create_prim_func(te_workload.norm_bmn(1, 256, 256)),
        "gemv": te.create_prim_func(te_workload.matmul(1, 256, 256)),
    }
    rules = [dl.gpu.Matmul(), dl.gpu.GEMV(), dl.gpu.Reduction(), dl.gpu.GeneralReduction(), dl.gpu.Fallback()]
    for name, func in funcs.items():
        mod = reparsed(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}))
        func = mod["main"]
        for rule in rules:
            try:
                sch = rule.apply(func, target, False)
            except Exception:  # noqa: BLE001  (the rule does not apply to this function)
                continue
            if sch is None:
                continue
            for k, one in enumerate(sch if isinstance(sch, list) else [sch]):
                if one.trace is None or not one.trace.insts:
                    continue
                yield entry(f"{prefix}/{type(rule).__name__}/{name}/{k}", "dlight", mod, one)
            break


def course_entries() -> Iterator[dict]:
    """The course's programs with the test suite's schedules (applied through mlc_lab by name: the
    module and trace are TVM's own, as in any notebook)."""
    from mlc_lab.tvm.program import load
    from tests.unit.test_trace import SCENARIOS, run_scenario

    for name in sorted(SCENARIOS):
        session = run_scenario(name)
        sch = session._state.sch  # noqa: SLF001  (the TVM schedule behind the session's last step)
        yield entry(f"course/{name}", "course", load(SCENARIOS[name][0]), sch, session.func_name)


def access_entries() -> Iterator[dict]:
    """The course's programs at the size the course runs them, scheduled as the access analysis's
    tests do (tests/fixtures/programs_access.py): what the Memory view is asked about in class."""
    from tests.fixtures import programs_access as P

    cases = {
        "mm_relu_split": (lambda: P.mm_relu(128), lambda: P.sched_mm_relu_split(128)),
        "vector_add": (lambda: P.vector_add(1024), lambda: P.sched_vector_add(1024)),
        "window_sum": (lambda: P.window_sum(1024), lambda: P.sched_window_sum(1024)),
        "gpu_local": (lambda: P.matmul(1024), lambda: P.sched_gpu_local(1024)),
        "gpu_shared": (lambda: P.matmul(1024), lambda: P.sched_gpu_shared(1024)),
        "cpu_tiled": (lambda: P.matmul(1024), lambda: P.sched_cpu_tiled(1024)),
        "matmul_init": (lambda: P.matmul(1024), lambda: P.sched_matmul_init(1024)),
    }
    for name, (original, scheduled) in cases.items():
        done = scheduled()
        func = done.mod.get_global_vars()[0].name_hint
        prog = original()  # a module or a lone PrimFunc, as the fixtures write them
        prog = prog[func] if isinstance(prog, tvm.IRModule) else prog
        mod = reparsed(tvm.IRModule({func: prog.with_attr("global_symbol", func)}))
        sch = s_tir.Schedule(mod, debug_mask="none")
        done.trace.apply_to_schedule(sch, remove_postproc=False)
        yield entry(f"course-access/{name}", "course-access", mod, sch, func)


def primitive_entries() -> Iterator[dict]:
    from tests.conformance.primitive_schedules import SCHEDULES

    for name, (mod, fn) in SCHEDULES.items():
        mod = reparsed(mod)
        sch = s_tir.Schedule(mod, seed=7, debug_mask="none")
        fn(sch)
        yield entry(f"primitive/{name}", "primitive", mod, sch, [gv.name_hint for gv in mod.functions][0])


TVM_TESTS = Path("/tmp/tvm_tests.jsonl")  # --tvm-tests FILE: what tvm_schedule_tests.py recorded


def tvm_test_entries() -> Iterator[dict]:
    """The schedules TVM's own tests make (tests/python/s_tir/{schedule,meta_schedule,dlight} of
    apache/tvm, recorded by ``tests/conformance/tvm_schedule_tests.py`` with ``MLC_LAB_CORPUS_OUT``):
    each module read back as mlc_lab reads it (``program.load``: ``tir.noalias`` is spelled
    ``tirx.noalias`` today) and its trace replayed on it by TVM; a schedule TVM cannot replay so is kept
    as recorded."""
    from mlc_lab.tvm.program import load

    if not TVM_TESTS.exists():  # no new recording: the committed ones stay
        kept = json.loads(gzip.decompress(CORPUS.read_bytes()))["entries"]
        yield from (e for e in kept if e["group"] == "tvm-tests")
        return
    for line in TVM_TESTS.read_text().splitlines():
        row = json.loads(line)
        if "skipped" in row:
            continue
        try:
            mod = load(row["module"])
            sch = s_tir.Schedule(mod, debug_mask="none")
            Trace.apply_json_to_schedule(row["json"], sch)
            yield entry(row["id"], "tvm-tests", mod, sch, row["func"])
        except Exception:  # noqa: BLE001  (TVM's replay on the module as read fails: the recorded entry)
            yield {k: v for k, v in row.items() if k != "source"}


def main() -> None:
    """``--sources access_entries,...``: regenerate only these sources and keep every other entry
    of the committed corpus as it is (TuneContext draws a sketch's decisions from a random seed:
    regenerating the design spaces changes their entries)."""
    started = time.time()
    sources: list[Callable[[], Iterator[dict]]] = [
        primitive_entries,
        course_entries,
        access_entries,
        dlight_entries,
        te_entries,
        tvm_test_entries,
    ]
    global TVM_TESTS
    if "--tvm-tests" in sys.argv:
        at = sys.argv.index("--tvm-tests")
        TVM_TESTS = Path(sys.argv[at + 1])
        del sys.argv[at : at + 2]
    only = None
    if len(sys.argv) > 2 and sys.argv[1] == "--sources":
        only = set(sys.argv[2].split(","))
        unknown = only - {f.__name__ for f in sources}
        if unknown:
            raise SystemExit(f"unknown sources {sorted(unknown)}; sources are {[f.__name__ for f in sources]}")
    entries: list[dict] = []
    for source in sources:
        if only is not None and source.__name__ not in only:
            continue
        t0 = time.time()
        got = list(source())
        print(f"{source.__name__}: {len(got)} schedules in {time.time() - t0:.1f} s", file=sys.stderr)
        entries.extend(got)
    if only is not None:
        fresh = {e["id"]: e for e in entries}
        kept = json.loads(gzip.decompress(CORPUS.read_bytes()))["entries"]
        entries = [fresh.pop(e["id"], e) for e in kept] + list(fresh.values())
    data = json.dumps({"tvm": tvm.__version__, "entries": entries}, separators=(",", ":"), sort_keys=True)
    CORPUS.write_bytes(gzip.compress(data.encode(), mtime=0))
    print(
        f"{len(entries)} schedules, {CORPUS.stat().st_size // 1024} KiB, {time.time() - started:.0f} s", file=sys.stderr
    )


if __name__ == "__main__":
    main()
