"""Why the GPU checks did not judge TVM's own CUDA schedules (the conformance corpus): per check, how
many verdicts passed, failed, or were not judged for each reason of ``evidence["reason"]`` ("does not
apply": the program has nothing the check looks at; "not judged yet"; "could not judge": the check
could not read the program). Prints JSON; ``could_not_judge_share`` leaves out "does not apply".

    PYTHONPATH=. .venv/bin/python benchmarks/check_reasons.py
"""

from __future__ import annotations

import gzip
import json
import os
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

GROUPS = ("cuda", "cuda-tensorcore", "dlight")


def main() -> int:
    from mlc_lab.core.session import Session

    with gzip.open(ROOT / "tests" / "conformance" / "corpus.json.gz", "rt") as f:
        entries = [e for e in json.load(f)["entries"] if e["group"] in GROUPS]
    per: dict = defaultdict(Counter)
    examples: dict = defaultdict(list)
    for e in entries:
        report = Session.from_trace(e["module"], e["text"], e.get("func")).check(target="cuda")
        for c in report.checks:
            key = c.verdict if c.judged else str(c.evidence.get("reason", "could not judge"))
            per[c.name][key] += 1
            if not c.judged and key != "does not apply" and len(examples[c.name]) < 3:
                examples[c.name].append({"id": e["id"], "said": c.message})
    total = sum(sum(c.values()) for c in per.values())
    cannot = sum(c["could not judge"] + c["not judged yet"] for c in per.values())
    out = {
        "schedules": len(entries),
        "verdicts": total,
        "could_not_judge_share": round(cannot / total, 3) if total else None,
        "checks": {n: dict(c) for n, c in per.items()},
        "examples": dict(examples),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
