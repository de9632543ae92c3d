"""mlc-lab grade ASSIGNMENT HAND-IN... [--format text|json|gradescope] [--out DIR]: grade hand-ins.

Traces are parsed, never executed; schedule files and notebooks run only in the sandbox
(``mlc_lab.core.sandbox``) with the assignment's limits, and so does every kernel compiled from a
hand-in (``mlc_lab.core.kernel_sandbox``: the timing and the numeric check). Each hand-in is graded in a child process,
two at a time: one bad hand-in is its own row and never stops the others. Results stream as they come
(stdout), with a progress line on stderr. Inside Gradescope (or with ``--gradescope``) the hand-in is
``/autograder/submission`` and the result goes to ``/autograder/results/results.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

GRADESCOPE_SUBMISSION = "/autograder/submission"
GRADESCOPE_RESULTS = "/autograder/results/results.json"


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "grade", help="grade hand-ins (traces, schedule files, notebooks, folders) against an assignment"
    )
    p.add_argument("assignment", help="the assignment's TOML file")
    p.add_argument(
        "submissions",
        nargs="*",
        help="hand-ins: .py/.json traces, schedule files, .ipynb, or a student's folder (default inside "
        f"Gradescope: {GRADESCOPE_SUBMISSION})",
    )
    p.add_argument("--format", choices=("text", "json", "gradescope"), default=None)
    p.add_argument(
        "--out",
        help="write each result to DIR/<hand-in path relative to the hand-ins' common folder>/ "
        "(results.json, result.json or result.txt by format); with --gradescope, the results.json file",
    )
    p.add_argument("--jobs", type=int, default=2, help="hand-ins graded at once (default 2)")
    p.add_argument(
        "--gradescope",
        action="store_true",
        help="run as Gradescope's autograder (found by itself when /autograder/submission exists)",
    )
    p.add_argument(
        "--check-ref",
        action="store_true",
        help="grade the assignment's reference (its 'reference' key) first, and refuse the assignment unless "
        "it earns full marks; with no hand-ins, only that",
    )
    p.add_argument(
        "--unsafe-same-user",
        action="store_true",
        help="grade even where this machine cannot sandbox: student code then runs as you and sees your "
        "files and the network (only the limits and the kill of its whole process tree stay); only for "
        "code you trust",
    )
    return p


def run(args: argparse.Namespace) -> int:
    from mlc_lab.errors import MlcLabError
    from mlc_lab.grading import load_assignment
    from mlc_lab.grading.batch import grade_batch, result_keys
    from mlc_lab.grading.report import json_text

    gradescope = args.gradescope or (not args.submissions and os.path.isdir(GRADESCOPE_SUBMISSION))
    fmt = args.format or ("gradescope" if gradescope else "text")
    paths = list(args.submissions) or ([GRADESCOPE_SUBMISSION] if gradescope and not args.check_ref else [])
    if not paths and not args.check_ref:
        raise MlcLabError("give the hand-ins to grade (files or students' folders) after the assignment")
    if gradescope and len(paths) > 1:
        raise MlcLabError("--gradescope grades one hand-in (a file or a student's folder) into one results.json")
    if args.jobs < 1:
        raise MlcLabError("--jobs must be 1 or more")
    assignment = load_assignment(args.assignment)
    if not args.unsafe_same_user:
        from mlc_lab.core.sandbox import probe

        refused = probe()
        if refused:
            raise MlcLabError(f"{refused}; nothing was graded (--unsafe-same-user grades without the sandbox)")
    if args.check_ref:
        print(check_reference(assignment, args.unsafe_same_user), file=sys.stderr if paths else sys.stdout, flush=True)
        if not paths:
            return 0
    keys = result_keys(paths)

    def on_result(i: int, r) -> None:
        if args.out and not gradescope:
            _write(Path(args.out) / keys[i], fmt, r, assignment.output_format)
        if fmt == "text":
            print(r.to_text() + "\n", flush=True)

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    results = grade_batch(
        assignment,
        paths,
        jobs=args.jobs,
        unsafe_same_user=args.unsafe_same_user,
        on_result=on_result,
        progress=progress if len(paths) > 1 else None,
    )
    if gradescope:
        target = Path(args.out or GRADESCOPE_RESULTS)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json_text(results[0].to_gradescope(assignment.output_format)), encoding="utf-8")
        return 0
    if fmt == "json" and not args.out:
        doc = {"assignment": assignment.title, "max_score": assignment.max_score}
        doc["results"] = {k: r.to_json() for k, r in zip(keys, results)}
        sys.stdout.write(json_text(doc) + "\n")
    elif fmt == "gradescope" and not args.out:
        of = assignment.output_format
        doc = (
            results[0].to_gradescope(of)
            if len(results) == 1
            else {k: r.to_gradescope(of) for k, r in zip(keys, results)}
        )
        sys.stdout.write(json_text(doc) + "\n")
    return 0


def check_reference(assignment, unsafe_same_user: bool) -> str:
    """Grade the assignment's reference as a hand-in; the sentence saying it earns full marks, or
    `MlcLabError` naming each task it loses and why (an assignment whose own solution cannot earn full
    marks is refused: its task options, hazards_fail or numeric sizes disagree with its handout)."""
    from mlc_lab.errors import MlcLabError
    from mlc_lab.grading.batch import grade_batch

    if assignment.reference is None:
        raise MlcLabError(f"{assignment.path}: --check-ref needs the assignment's reference key (its own solution)")
    (r,) = grade_batch(assignment, [str(assignment.reference)], jobs=1, unsafe_same_user=unsafe_same_user)
    earned = f"{r.score:g}/{r.max_score:g}"
    if r.status == "graded" and r.score == r.max_score:
        return f"the reference ({assignment.reference.name}) earns {earned}: the assignment can give full marks"
    lost = "; ".join(f"task {t.number} ({t.name}): {' '.join(t.messages)}" for t in r.tasks if not t.passed)
    why = r.error or lost
    raise MlcLabError(
        f"{assignment.path}: the assignment's reference ({assignment.reference.name}) earns {earned}, not full "
        f"marks, so no hand-in can be graded fairly: {why}"
    )


def _write(folder: Path, fmt: str, r, output_format: str) -> None:
    from mlc_lab.grading.report import json_text

    folder.mkdir(parents=True, exist_ok=True)
    if fmt == "gradescope":
        (folder / "results.json").write_text(json_text(r.to_gradescope(output_format)), encoding="utf-8")
    elif fmt == "json":
        (folder / "result.json").write_text(json_text(r.to_json()), encoding="utf-8")
    else:
        (folder / "result.txt").write_text(r.to_text() + "\n", encoding="utf-8")
