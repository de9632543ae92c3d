"""One hand-in's grade as data, and the forms it is written in: JSON, text a hand-in cannot forge,
and Gradescope's ``results.json`` (https://gradescope-autograders.readthedocs.io, "Output format")."""

from __future__ import annotations

import html
import math
import re
from typing import Any

from mlc_lab.grading.scoring import failed_task
from mlc_lab.model import grading as model_grading
from mlc_lab.model.checks import numeric_failure
from mlc_lab.model.errors import ErrorInfo

OUTPUT_FORMATS = ("text", "md")  # what Gradescope is told its output strings are


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
        """The grade as lines a teacher reads: the score, then once what holds for every task (the error,
        the notes, the numeric check's verdict, each hazard), then each task. Everything that can hold a
        hand-in's words (its name, an error it raised, names it gave) is quoted on one line after ``| ``,
        so no line of a hand-in can pass for the grader's ``PASS`` lines or score header."""
        head = f"{_quoted(self.submission)} ({self.kind or 'not read'}, {self.status}): {_num(self.score)}/{_num(self.max_score)}"
        lines = [head + (f", {self.latency_ms:.4g} ms" if _finite(self.latency_ms) else "")]
        if self.error:
            lines.append(f"  | {_quoted(self.error)}")
        lines += [f"  note | {_quoted(n)}" for n in self.notes]
        if self.numeric is not None:
            lines.append(f"  numeric {self.numeric.get('verdict')} | {_quoted(self.numeric.get('message') or '')}")
        said = self._said_above()
        for n, h in enumerate(self.hazards, 1):
            lines.append(f"  hazard {n} {_hazard_name(h)} ({h.get('class')}) | {_quoted(h.get('message') or '')}")
        for t in self.tasks:
            lines.append(f"  {'PASS' if t.passed else 'FAIL'} {t.number} ({_num(t.points)}/{_num(t.max_points)})")
            lines.append(f"       task | {_quoted(t.name)}: {_quoted(t.title)}")
            if not t.passed and not self.error:  # an error is said once, above
                lines += [f"       {said[m]}" if m in said else f"       | {_quoted(m)}" for m in t.messages]
        return "\n".join(lines)

    def _said_above(self) -> dict:
        """A task's message that repeats a hazard or the numeric verdict -> the line that points at it."""
        out = {f"{_hazard_name(h)}: {h.get('message')}": f"(hazard {n} above)" for n, h in enumerate(self.hazards, 1)}
        wrong = numeric_failure(self.numeric) if self.numeric else None  # type: ignore[arg-type]
        if wrong:
            out[wrong] = "(the numeric check above)"
        return out

    def to_gradescope(self, output_format: str = "text") -> dict:
        """Gradescope's results.json: one test per task (its number, visibility and messages), the
        hazards and the numeric verdict once, in the top-level output, and a leaderboard entry. Every
        output is ``output_format`` (``text``: shown as written; ``md``: Markdown, the hand-in's words
        escaped), with control characters escaped, and no number is NaN or infinite (JSON has none)."""
        fmt = output_format if output_format in OUTPUT_FORMATS else "text"
        tests = []
        for t in self.tasks:
            messages = [self.error] if self.error and not t.passed else list(t.messages)
            tests.append(
                {
                    "name": _quoted(t.title),
                    "number": t.number,
                    "score": _number(t.points),
                    "max_score": _number(t.max_points),
                    "status": "passed" if t.passed else "failed",
                    "output": _lines(messages, fmt),
                    "output_format": fmt,
                    "visibility": t.visibility,
                }
            )
        return {
            "score": _number(self.score),
            "execution_time": max(0, round(self.seconds)) if _finite(self.seconds) else 0,
            "output": self._summary(fmt),
            "output_format": fmt,
            "test_output_format": fmt,
            "visibility": self.visibility,
            "stdout_visibility": "hidden",
            "tests": tests,
            "leaderboard": self._leaderboard(),
        }

    def _summary(self, fmt: str = "text") -> str:
        head = f"{_num(self.score)} of {_num(self.max_score)} points ({self.status})"
        lines = [f"**{head}**" if fmt == "md" else head]
        lines.append(_lines([self.error] if self.error else [], fmt))
        lines.append(_lines(self.notes, fmt))
        if self.numeric is not None:
            verdict = f"Numeric check ({self.numeric.get('verdict')}): "
            lines.append(verdict + _lines([self.numeric.get("message") or ""], fmt))
        if self.hazards:
            lines.append("Hazards:")
            lines += [
                f"- {_hazard_name(h)} ({h.get('class')}): " + _lines([h.get("message") or ""], fmt)
                for h in self.hazards
            ]
        return "\n".join(x for x in lines if x)

    def _leaderboard(self) -> list:
        board = [
            {"name": "Score", "value": self.score, "order": "desc"},
            {"name": "Tasks passed", "value": sum(1 for t in self.tasks if t.passed), "order": "desc"},
        ]
        if _finite(self.latency_ms):
            board.append({"name": "Latency (ms)", "value": round(float(self.latency_ms), 6), "order": "asc"})
        return board


_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def _quoted(text: str) -> str:
    """One line, with newlines, escapes and other control or direction characters written as ``\\xNN``."""
    return _UNSAFE.sub(lambda m: "\\n" if m.group() == "\n" else f"\\x{ord(m.group()):02x}", str(text))


def json_text(doc: Any, indent: int | None = 1) -> str:
    """``doc`` as strict JSON: a NaN or infinite number (a latency that could not be timed) is written
    as null, never as the ``NaN`` that ``json.dumps`` allows and JSON readers (Gradescope's) refuse."""
    import json

    return json.dumps(_finite_only(doc), indent=indent, allow_nan=False)


def _finite_only(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite_only(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite_only(v) for v in x]
    return x


def _hazard_name(h: dict) -> str:
    return str(h.get("kind", "")).replace("_", " ")


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _number(x: Any) -> float:
    """A score as JSON can hold it (NaN and infinities are not JSON): 0 in their place."""
    return float(x) if _finite(x) else 0.0


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~])")


def _lines(messages: list, fmt: str) -> str:
    """Sentences, one a line, each with its control characters escaped; in Markdown also its markup
    (``i < 128`` and ``*`` in a name are text, never HTML or emphasis)."""
    out = []
    for m in messages:
        text = _quoted(str(m))
        if fmt == "md":
            text = _MD_SPECIAL.sub(r"\\\1", html.escape(text, quote=False))
        out.append(text)
    return "\n".join(out)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"
