"""An exercise's grade as a student reads it: the checks it ran, the structural differences it found, as
text and as HTML in a notebook (mlc_lab.exercises makes them; the data is ``mlc_lab.model.grading.ExerciseResult``)."""

from __future__ import annotations

import html

from mlc_lab.model.checks import CheckResult
from mlc_lab.model.grading import Difference, ExerciseResult

__all__ = ["Check", "Difference", "GradeReport"]


# One check of an exercise: the named checks' verdict (name, ok, message), the type grading scores tasks from.
Check = CheckResult


class GradeReport(ExerciseResult):
    """What an exercise's grader found (`ExerciseResult`), as a student reads it: text (``print``) and HTML
    in a notebook. ``passed`` is True when every check held."""

    @property
    def summary(self) -> str:
        if self.passed:
            return f"{self.exercise}: PASSED"
        failed = [c.name for c in self.checks if not c.ok]
        return f"{self.exercise}: not yet ({', '.join(failed)})"

    def text(self) -> str:
        lines = [self.summary]
        for c in self.checks:
            lines.append(f"  [{'ok' if c.ok else 'FAIL'}] {c.name}: {c.message}")
        if self.differences:
            sim = self.similarity
            extra = f", {sim:.0%} of the way done" if sim is not None else ""
            lines.append(f"  {len(self.differences)} structural difference(s) from the target{extra}:")
            for d in self.differences:
                lines.append("    - " + d.text().replace("\n", "\n    "))
        if self.outline_yours and self.outline_target and self.differences:
            lines.append("  your loop nests:")
            lines += ["    " + ln for ln in self.outline_yours.splitlines()]
            lines.append("  the target's loop nests:")
            lines += ["    " + ln for ln in self.outline_target.splitlines()]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:  # the whole report: IPython's console and doctests show it as is
        return self.text()

    def _repr_html_(self) -> str:
        e = html.escape
        color = "#1a7f37" if self.passed else "#cf222e"
        parts = [
            "<div class='mlc-grade' style='font-family:sans-serif;border:1px solid #d0d7de;border-radius:6px;"
            "padding:8px 12px;max-width:980px'>",
            f"<div style='font-weight:600;color:{color};font-size:1.05em'>{e(self.summary)}</div>",
            "<table style='border-collapse:collapse;margin-top:6px'>",
        ]
        for c in self.checks:
            mark = "&#10004;" if c.ok else "&#10008;"
            col = "#1a7f37" if c.ok else "#cf222e"
            parts.append(
                f"<tr><td style='color:{col};padding:2px 8px'>{mark}</td><td style='padding:2px 8px'><b>{e(c.name)}</b></td>"
                f"<td style='padding:2px 8px;white-space:pre-wrap'>{e(c.message)}</td></tr>"
            )
        parts.append("</table>")
        if self.differences:
            sim = self.similarity
            extra = f" &mdash; {sim:.0%} of the way done" if sim is not None else ""
            parts.append(
                f"<div style='margin-top:8px'><b>{len(self.differences)} structural difference(s)</b>{extra}</div>"
            )
            parts.append(
                "<table style='border-collapse:collapse;font-size:0.92em;margin-top:4px'>"
                "<tr style='background:#f6f8fa'><th style='text-align:left;padding:3px 6px'>where</th>"
                "<th style='text-align:left;padding:3px 6px'>what</th><th style='text-align:left;padding:3px 6px'>yours</th>"
                "<th style='text-align:left;padding:3px 6px'>target</th><th style='text-align:left;padding:3px 6px'>hint</th></tr>"
            )
            cell = "text-align:left;vertical-align:top;padding:3px 6px"  # JupyterLab right-aligns cells
            for d in self.differences:
                where = e(d.where) + (f" <span style='color:#57606a'>(line {d.line})</span>" if d.line else "")
                parts.append(
                    "<tr style='border-top:1px solid #eaeef2'>"
                    f"<td style='{cell}'>{where}</td><td style='{cell}'>{e(d.what)}</td>"
                    f"<td style='{cell}'><code>{e(d.yours or '')}</code></td>"
                    f"<td style='{cell}'><code>{e(d.target or '')}</code></td>"
                    f"<td style='{cell};color:#0969da'>{e(d.hint or '')}</td></tr>"
                )
            parts.append("</table>")
            if self.outline_yours and self.outline_target:
                parts.append(
                    "<div style='display:flex;gap:16px;margin-top:8px'>"
                    "<div><div style='font-weight:600'>your loop nests</div>"
                    f"<pre style='background:#f6f8fa;padding:6px;margin:2px 0'>{e(self.outline_yours)}</pre></div>"
                    "<div><div style='font-weight:600'>the target's</div>"
                    f"<pre style='background:#f6f8fa;padding:6px;margin:2px 0'>{e(self.outline_target)}</pre></div></div>"
                )
        parts.append("</div>")
        return "".join(parts)
