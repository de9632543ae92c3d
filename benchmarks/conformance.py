"""The conformance table of issue 13 on the corpus of ``tests/conformance``; prints JSON.

    PYTHONPATH=. .venv/bin/python benchmarks/conformance.py [--subset fast|all|ID-PART] [--no-footprint]
        [--no-dlight] [--details out.json]

Replays every schedule of the corpus from its printed trace and from its JSON, compares with TVM's
module, builds the loop tree and times ``footprint`` at three loops. Memory is capped (RLIMIT_AS) so
that an analysis asking for too much fails in this process instead of swapping the machine.

``footprint`` in the table: calls, refusals (% and by reason: only "symbolic shapes without
values" should remain), the slowest call in wall and in CPU time and where (the machine is
shared: the CPU time is the analysis's own), and ``messages_with_tvm_placeholder`` (``SBlock#0``,
``For#1`` in any message). ``dlight`` (unless ``--no-dlight``): dlight's GPU rules applied to a
handful of workloads at a language model's sizes (``generate.dlight_full_size``), every loop of
every schedule timed the same way.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # after PYTHONPATH: another checkout's mlc_lab can be measured with this corpus

from tests.conformance import harness  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--subset", default="all")
    parser.add_argument("--no-footprint", action="store_true")
    parser.add_argument("--no-dlight", action="store_true", help="skip dlight's rules at full size")
    parser.add_argument("--details", help="write every outcome to this JSON file")
    parser.add_argument("--memory-gb", type=float, default=12.0)
    parser.add_argument("--from-details", help="summarize a --details file again (with the corpus's TVM flags)")
    args = parser.parse_args()
    if args.from_details:
        flags = {e["id"]: e for e in harness.corpus()}
        outcomes = []
        for item in json.loads(Path(args.from_details).read_text()):
            item.update(tvm_text=flags[item["id"]]["tvm_text"], tvm_json=flags[item["id"]]["tvm_json"])
            item["footprints"] = [tuple(f) for f in item["footprints"]]
            outcomes.append(harness.Outcome(**item))
        print(json.dumps(harness.summarize(outcomes), indent=2))
        return
    limit = int(args.memory_gb * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    started = time.time()
    outcomes = []
    for entry in harness.entries(args.subset):
        outcomes.append(harness.run_entry(entry, footprint=not args.no_footprint))
    table = harness.summarize(outcomes)
    if not args.no_dlight and not args.no_footprint:
        table["dlight"] = dlight_table()
    table["wall_s"] = round(time.time() - started, 1)
    import mlc_lab

    table["mlc_lab"] = str(Path(mlc_lab.__file__).parent)
    if args.details:
        Path(args.details).write_text(json.dumps([harness.outcome_dict(o) for o in outcomes], indent=1))
    print(json.dumps(table, indent=2))


def dlight_table() -> dict:
    """dlight's rules at full size: every loop of every schedule, summarized like the corpus."""
    from tests.conformance import generate

    entries = list(generate.dlight_entries(generate.dlight_full_size(), prefix="dlight-full"))
    outcomes = [harness.run_entry(e, every_loop=True) for e in entries]
    table = harness.summarize(outcomes)
    return {
        "schedules": [e["id"] for e in entries],
        "footprint": table["footprint"],
        "messages_with_tvm_placeholder": table["messages_with_tvm_placeholder"],
    }


if __name__ == "__main__":
    main()
