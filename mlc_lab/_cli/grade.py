"""mlc-lab grade ASSIGNMENT SUBMISSION... [--format text|json|gradescope] [--out DIR]: grade hand-ins.

Traces are parsed, never executed; schedule files and notebooks run only in a child process with
the assignment's time and memory limits. One bad submission never stops the others.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("grade", help="grade submissions (traces, schedule files, notebooks) against an assignment")
    p.add_argument("assignment", help="the assignment's TOML file")
    p.add_argument("submissions", nargs="+", help="submission files: .py/.json traces, schedule files, .ipynb")
    p.add_argument("--format", choices=("text", "json", "gradescope"), default="text")
    p.add_argument("--out", help="with --format gradescope: write DIR/<submission>/results.json for each")
    return p


def run(args: argparse.Namespace) -> int:
    from mlc_lab.grading import grade, load_assignment

    assignment = load_assignment(args.assignment)
    results = [grade(assignment, s) for s in args.submissions]
    if args.format == "text":
        print("\n\n".join(r.to_text() for r in results))
    elif args.format == "json":
        json.dump(
            {
                "assignment": assignment.title,
                "max_score": assignment.max_score,
                "results": [r.to_json() for r in results],
            },
            sys.stdout,
            indent=1,
        )
        sys.stdout.write("\n")
    else:
        docs = {r.submission: r.to_gradescope() for r in results}
        if args.out:
            for r in results:
                folder = os.path.join(args.out, os.path.basename(r.submission))
                os.makedirs(folder, exist_ok=True)
                with open(os.path.join(folder, "results.json"), "w", encoding="utf-8") as fh:
                    json.dump(docs[r.submission], fh, indent=1)
        elif len(results) == 1:
            json.dump(results[0].to_gradescope(), sys.stdout, indent=1)
            sys.stdout.write("\n")
        else:
            json.dump(docs, sys.stdout, indent=1)
            sys.stdout.write("\n")
    return 0
