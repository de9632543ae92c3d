"""Pairs (start, target) for the path engine (``Session.path_to``), generated from what the project has.

- the corpus: every schedule of ``corpus.json.gz`` with its trace withheld (start: the original
  program; target: TVM's own replay of the trace), and every step of it as a start;
- the course: chapter 2's walk-through (``tests/golden``), exercise 3 (``MyBmmRelu`` to
  ``TargetModule``), the GPU lab's reference and its variants (``tests/labs/gpu_matmul.py``);
- targets no schedule reaches: another computation, a block no primitive makes, a loop no primitive of
  TVM 0.27 makes (one that starts at 4, one that runs backwards). Each must be said not reached.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

# Instructions that transform nothing: look-ups and sampling (their values are literals in a path).
NOT_STEPS = {
    "GetSBlock",
    "GetLoops",
    "GetChildBlocks",
    "GetProducers",
    "GetConsumers",
    "GetOutputBlocks",
    "SamplePerfectTile",
    "SamplePartitionedTile",
    "SampleCategorical",
    "SampleComputeLocation",
    "EnterPostproc",
}


@dataclass
class Pair:
    id: str
    group: str  # "corpus/<group>", "course", "unreachable"
    program: Any  # what Session takes
    target: Any  # what path_to takes
    func: str | None = None
    withheld: int | None = None  # the transforming steps of the withheld trace (None: no trace)
    kinds: tuple[str, ...] = ()  # the primitive kinds of the withheld trace
    reachable: bool = True  # False: must be said not reached


def transforming(trace_json: list) -> list[str]:
    """The instruction kinds of a TVM JSON trace that transform the program, in order."""
    return [inst[0] for inst in trace_json[0] if inst[0] not in NOT_STEPS]


def tvm_target(entry: dict) -> Any:
    """TVM's own replay of a corpus entry's JSON trace (the target; None when TVM cannot)."""
    import tvm
    from tvm import s_tir
    from tvm.s_tir.schedule import Trace

    mod = tvm.script.from_source(entry["module"])
    sch = s_tir.Schedule(mod, debug_mask="none")
    try:
        Trace.apply_json_to_schedule(entry["json"], sch)
    except Exception:  # noqa: BLE001  (the corpus keeps a few schedules TVM cannot replay itself)
        return None
    return sch.mod


def corpus_pairs(subset: str = "all") -> list[Pair]:
    from tests.conformance import harness

    out = []
    for e in harness.entries(subset):
        target = tvm_target(e)
        if target is None:
            continue
        kinds = transforming(e["json"])
        out.append(Pair(e["id"], f"corpus/{e['group']}", e["module"], target, e.get("func"), len(kinds), tuple(kinds)))
    return out


def course_pairs() -> list[Pair]:
    from mlc_lab.core.session import Session
    from mlc_lab.tvm.course_programs import BMM_RELU, BMM_RELU_TARGET, MM_RELU
    from tests.labs import gpu_matmul

    out = []
    for n in range(1, 5):
        golden = (ROOT / "tests" / "golden" / f"mm_relu_step{n}.py").read_text()
        out.append(Pair(f"course/chapter2_step{n}", "course", MM_RELU, golden, None, n))
    out.append(Pair("course/exercise3", "course", BMM_RELU, BMM_RELU_TARGET, "bmm_relu", 9))
    for name, (program, steps) in gpu_matmul.SUBMISSIONS.items():
        session = Session(program)
        gpu_matmul.apply(session, steps)
        out.append(Pair(f"course/gpu_lab/{name}", "course", program, session.module, None, len(steps)))
    return out


# (what is changed, the change): each makes a target no schedule reaches
_UNREACHABLE_EDITS = (
    ("another computation (max becomes min)", r"T\.max\(", "T.min("),
    ("another computation (a product becomes a sum)", r"\] \* ([A-Za-z])", r"] + \1"),
)


def unreachable_pairs() -> list[Pair]:
    """Targets that compute something else, have a block no primitive makes, or a loop no primitive
    of TVM 0.27 makes; built from the course's programs and scheduled ones."""
    from mlc_lab.core.session import Session
    from mlc_lab.tvm.course_programs import BMM_RELU, BMM_RELU_TARGET, MATMUL, MM_RELU

    out = []
    scheduled = Session((ROOT / "tests" / "golden" / "mm_relu_step4.py").read_text()).script
    bases = [("mm_relu", MM_RELU, scheduled), ("bmm_relu", BMM_RELU, BMM_RELU_TARGET), ("matmul", MATMUL, MATMUL)]
    for name, program, target in bases:
        for what, pattern, repl in _UNREACHABLE_EDITS:
            edited = re.sub(pattern, repl, target, count=1)
            if edited != target:
                out.append(Pair(f"unreachable/{name}/{what}", "unreachable", program, edited, reachable=False))
    out.append(Pair("unreachable/matmul/an extra block", "unreachable", MATMUL, _extra_block(MATMUL), reachable=False))
    out.append(Pair("unreachable/matmul/a loop from 4", "unreachable", MATMUL, _shifted_loop(MATMUL), reachable=False))
    out.append(
        Pair("unreachable/matmul/a loop backwards", "unreachable", MATMUL, _reversed_loop(MATMUL), reachable=False)
    )
    out.append(Pair("unreachable/mm_relu/the matmul alone", "unreachable", MM_RELU, MATMUL, reachable=False))
    return out


def _extra_block(text: str) -> str:
    """The matmul with a block after it that doubles C in place (no primitive adds a computation)."""
    extra = (
        "        for i2, j2 in T.grid(128, 128):\n"
        '            with T.sblock("twice"):\n'
        '                vi, vj = T.axis.remap("SS", [i2, j2])\n'
        "                C[vi, vj] = C[vi, vj] * T.float32(2)\n"
    )
    return text.rstrip("\n") + "\n" + extra


def _shifted_loop(text: str) -> str:
    """The matmul whose i loop runs from 4 to 132 (read as i - 4): no primitive of TVM 0.27 shifts a loop."""
    return text.replace(
        "for i, j, k in T.grid(128, 128, 128):", "for i, j, k in T.grid(T.int32(132), 128, 128):"
    ).replace(
        'vi, vj, vk = T.axis.remap("SSR", [i, j, k])',
        'vi = T.axis.spatial(128, i - 4)\n                vj, vk = T.axis.remap("SR", [j, k])\n                T.where(4 <= i)',
    )


def _reversed_loop(text: str) -> str:
    """The matmul whose i loop runs backwards (vi = 127 - i): no primitive of TVM 0.27 reverses a loop."""
    return text.replace(
        'vi, vj, vk = T.axis.remap("SSR", [i, j, k])',
        'vi = T.axis.spatial(128, 127 - i)\n                vj, vk = T.axis.remap("SR", [j, k])',
    )
