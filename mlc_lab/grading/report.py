"""One hand-in's grade as data, and the forms it is written in: JSON, text a hand-in cannot forge,
and Gradescope's ``results.json`` (https://gradescope-autograders.readthedocs.io, "Output format")."""

from __future__ import annotations

import re
from typing import Any

from mlc_lab.grading.scoring import failed_task
from mlc_lab.model import grading as model_grading
from mlc_lab.model.errors import ErrorInfo


# A grading child's failure, an ErrorInfo, as users see it: a row's status (a crash or a time-out of the
# child is said as such; anything else is the grader's own failure) and a class verdict's ``error``.
FAILURE_STATUS = {"crash": "crash", "timeout": "timeout"}


def failure_status(info: ErrorInfo) -> str:
    return FAILURE_STATUS.get(info.get("type", "internal"), "grader error")


def failed_verdict(info: ErrorInfo) -> dict:
    """The class server's verdict of a submission its child could not grade: ``error`` the sentence
    (as before), ``error_info`` the whole `ErrorInfo` (its kind, the child's last words in ``detail``)."""
    return {"error": info["summary"], "status": failure_status(info), "error_info": info}


class GradeResult(model_grading.GradeResult):
    """One hand-in's grade: the data of ``mlc_lab.model.grading.GradeResult`` (its fields, its one encoding and
    its strict reading), and the forms it is read in: the row of a hand-in no child could grade, text a
    teacher reads, Gradescope's ``results.json``."""

    @classmethod
    def failed(cls, assignment: Any, submission: str, info: ErrorInfo) -> GradeResult:
        """The row of a hand-in that a child could not grade: every task 0 points, `info`'s sentence."""
        why = info["summary"]
        r = cls(submission, "", [failed_task(t, why) for t in assignment.tasks], error=why, status=failure_status(info))
        r.visibility = assignment.visibility
        return r

    def to_text(self) -> str:
        """The grade as lines a teacher reads. Everything that can hold a hand-in's words (its name, an
        error it raised, names it gave) is quoted on one line after ``| ``, so no line of a hand-in can
        pass for the grader's ``PASS`` lines or score header."""
        head = f"{_quoted(self.submission)} ({self.kind or 'not read'}, {self.status}): {_num(self.score)}/{_num(self.max_score)}"
        lines = [head + (f", {self.latency_ms:.4g} ms" if self.latency_ms is not None else "")]
        if self.error:
            lines.append(f"  | {_quoted(self.error)}")
        lines += [f"  note | {_quoted(n)}" for n in self.notes]
        for t in self.tasks:
            lines.append(f"  {'PASS' if t.passed else 'FAIL'} {t.number} ({_num(t.points)}/{_num(t.max_points)})")
            lines.append(f"       task | {_quoted(t.name)}: {_quoted(t.title)}")
            if not t.passed and not self.error:  # an error is said once, above
                lines += [f"       | {_quoted(m)}" for m in t.messages]
        return "\n".join(lines)

    def to_gradescope(self) -> dict:
        """Gradescope's results.json: one test per task (its number, visibility and messages), the
        hazards and the numeric verdict once, in the top-level output, and a leaderboard entry."""
        tests = []
        for t in self.tasks:
            output = self.error if self.error and not t.passed else "\n".join(t.messages)
            tests.append(
                {
                    "name": t.title,
                    "number": t.number,
                    "score": t.points,
                    "max_score": t.max_points,
                    "status": "passed" if t.passed else "failed",
                    "output": output,
                    "visibility": t.visibility,
                }
            )
        return {
            "score": self.score,
            "execution_time": max(0, round(self.seconds)),
            "output": self._summary(),
            "visibility": self.visibility,
            "stdout_visibility": "hidden",
            "tests": tests,
            "leaderboard": self._leaderboard(),
        }

    def _summary(self) -> str:
        lines = [f"{_num(self.score)} of {_num(self.max_score)} points ({self.status})"]
        if self.error:
            lines.append(self.error)
        lines += self.notes
        if self.numeric is not None:
            lines.append(f"Numeric check ({self.numeric.get('verdict')}): {self.numeric.get('message')}")
        if self.hazards:
            lines.append("Hazards:")
            lines += [
                f"- {h.get('kind', '').replace('_', ' ')} ({h.get('class')}): {h.get('message')}" for h in self.hazards
            ]
        return "\n".join(lines)

    def _leaderboard(self) -> list:
        board = [
            {"name": "Score", "value": self.score, "order": "desc"},
            {"name": "Tasks passed", "value": sum(1 for t in self.tasks if t.passed), "order": "desc"},
        ]
        if self.latency_ms is not None:
            board.append({"name": "Latency (ms)", "value": round(self.latency_ms, 6), "order": "asc"})
        return board


_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def _quoted(text: str) -> str:
    """One line, with newlines, escapes and other control or direction characters written as ``\\xNN``."""
    return _UNSAFE.sub(lambda m: "\\n" if m.group() == "\n" else f"\\x{ord(m.group()):02x}", str(text))


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"
