"""A corpus of schedules TVM writes, for the access analysis: design spaces of TVM's own workloads.

    .venv/bin/python benchmarks/access_corpus.py --out /tmp/access_corpus.json [--samples 2]

From the wheel only (no network): every workload of ``te_workload.CONFIGS`` (first shape), its
design spaces for llvm with AVX-512 and for CUDA, a float16 matmul and conv for CUDA tensor cores,
each sketch as generated plus ``--samples`` re-samplings of its decisions (fixed seeds), and the
course's schedules (``tests/fixtures/programs_access.py``). Saved as TVMScript text, so the same
programs can be read back by any version of the analysis (``load``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _spaces(kind: str, func, target: str):
    import tvm
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.testing.space_generation import generate_design_space

    mod = tvm.IRModule({"main": func})
    return generate_design_space(kind, mod, tvm.target.Target(target), types=ms.ScheduleRule)


def workloads():
    """(name, PrimFunc, [(kind, target)]) of TVM's te workloads and the tensor-core cases."""
    from tvm import te
    from tvm.s_tir.meta_schedule.testing import te_workload as tw

    avx512 = ("llvm", {"kind": "llvm", "mcpu": "skylake-avx512", "num-cores": 4})
    cuda = ("cuda", {"kind": "cuda", "arch": "sm_80", "max_threads_per_block": 1024,
                     "max_shared_memory_per_block": 49152, "thread_warp_size": 32})
    tc = ("cuda-tensorcore", cuda[1])
    for name in sorted(tw.CONFIGS):
        try:
            func = tw.create_te_workload(name, 0)
        except Exception as exc:  # noqa: BLE001 - a workload this TVM cannot build (winograd: legacy flow)
            print(f"{name}: not built ({type(exc).__name__}: {exc})", file=sys.stderr)
            continue
        yield name, func, [avx512, cuda]
    yield "GMM_fp16", te.create_prim_func(tw.matmul(512, 512, 512, "float16", "float32")), [tc]
    yield "C2D_fp16", te.create_prim_func(tw.conv2d_nhwc(1, 16, 16, 64, 64, 3, 1, 1, in_dtype="float16",
                                                         out_dtype="float32")), [tc]


def course_programs():
    sys.path.insert(0, str(ROOT / "tests"))
    from fixtures import programs_access as P

    builders = {"mm_relu_split": lambda: P.sched_mm_relu_split(128), "vector_add": lambda: P.sched_vector_add(1024),
                "window_sum": lambda: P.sched_window_sum(1024), "gpu_local": lambda: P.sched_gpu_local(1024),
                "gpu_shared": lambda: P.sched_gpu_shared(1024), "cpu_tiled": lambda: P.sched_cpu_tiled(1024),
                "matmul_init": lambda: P.sched_matmul_init(1024), "blockized": lambda: P.sched_blockized(64),
                "tensorized": lambda: P.sched_tensorized_row_sum(64, 64)}
    for name, build in builders.items():
        yield f"course/{name}", build().mod


def build(samples: int = 2, log=print) -> list[dict]:
    import tvm

    out = []
    for name, func, targets in workloads():
        for kind, target in targets:
            try:
                sketches = _spaces(kind, func, target)
            except Exception as exc:  # noqa: BLE001 - a space TVM cannot generate here is skipped, and said
                log(f"{name} {kind}: no design space ({type(exc).__name__}: {str(exc).splitlines()[0][:100]})")
                continue
            for i, sk in enumerate(sketches):
                out.append({"name": f"{name}/{kind}/sketch{i}", "script": sk.mod.script()})
                for seed in range(samples):
                    try:
                        sch = tvm.s_tir.Schedule(tvm.IRModule({"main": func}), seed=seed + 1)
                        tvm.s_tir.schedule.Trace(sk.trace.insts, {}).apply_to_schedule(sch, remove_postproc=True)
                        out.append({"name": f"{name}/{kind}/sketch{i}/seed{seed + 1}", "script": sch.mod.script()})
                    except Exception as exc:  # noqa: BLE001
                        log(f"{name} {kind} sketch {i} seed {seed + 1}: {type(exc).__name__}")
            log(f"{name} {kind}: {len(sketches)} sketches")
    for name, mod in course_programs():
        out.append({"name": name, "script": mod.script()})
    return out


def load(path: str | Path):
    """[(name, PrimFunc)] of a saved corpus."""
    import tvm

    out = []
    for entry in json.loads(Path(path).read_text()):
        mod = tvm.script.from_source(entry["script"])
        funcs = [mod[g] for g in mod.get_global_vars()] if isinstance(mod, tvm.IRModule) else [mod]
        for f in funcs:
            out.append((entry["name"], f))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/access_corpus.json")
    ap.add_argument("--samples", type=int, default=2)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    corpus = build(args.samples, log=lambda m: print(m, file=sys.stderr))
    Path(args.out).write_text(json.dumps(corpus))
    print(json.dumps({"programs": len(corpus), "out": args.out}))


if __name__ == "__main__":
    main()
