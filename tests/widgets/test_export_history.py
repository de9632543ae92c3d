"""The explorer's Export HTML draws the history as the explorer's History panel does: a linear
history as a list, a step made after an undo as a branch off the step it was made from (not under
the undone step), and failed attempts as rows under the step they were tried from."""

from __future__ import annotations

from html.parser import HTMLParser

from mlc_lab.widgets.export import SessionExport, StepExport, render_html


class NavRows(HTMLParser):
    """The rows of the page's <nav>: (kind, step or failure-of, depth, classes, text)."""

    def __init__(self) -> None:
        super().__init__()
        self.in_nav = False
        self.rows: list[dict] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "nav":
            self.in_nav = True
        elif self.in_nav and tag == "li":
            self.rows.append(
                {
                    "classes": (a.get("class") or "").split(),
                    "step": a.get("data-step"),
                    "failure_of": a.get("data-failure-of"),
                    "depth": a.get("data-depth"),
                    "text": "",
                }
            )

    def handle_endtag(self, tag):
        if tag == "nav":
            self.in_nav = False

    def handle_data(self, data):
        if self.in_nav and self.rows:
            self.rows[-1]["text"] += data


def _step(i: int, parent: int | None, children: list[int], label: str) -> StepExport:
    return StepExport(
        id=i, parent=parent, children=children, label=label, kind="apply" if i else "root", script=f"# step {i}\n"
    )


def test_history_in_the_export_is_drawn_like_the_explorers():
    # 0 -> 1 -> 2, undo back to 1, then 3 from 1 (a branch); a failed attempt tried from 3
    data = SessionExport(
        func="mm_relu",
        current=3,
        steps=[
            _step(0, None, [1], "original program"),
            _step(1, 0, [2, 3], "split(Y/j)"),
            _step(2, 1, [], "reorder(Y/i, j_0, k, j_1)"),
            _step(3, 1, [], "parallel(Y/i)"),
        ],
        failures=[{"id": 1, "parent": 3, "label": "split(Y/nope)", "summary": "there is no loop named 'Y/nope'"}],
    )
    page = render_html(data)
    nav = NavRows()
    nav.feed(page)
    rows = nav.rows
    assert [(r["step"] or f"x{r['failure_of']}", r["depth"]) for r in rows] == [
        ("0", "0"),
        ("1", "0"),
        ("2", "0"),
        ("3", "1"),
        ("x3", "2"),
    ]
    assert "branch" in rows[3]["classes"] and "branch" not in rows[2]["classes"]
    assert "failure" in rows[4]["classes"] and "split(Y/nope)" in rows[4]["text"]
    assert "●" in rows[3]["text"]  # the current step
    # the failure is also listed in the section of the step it was tried from
    section = page[page.index('<section class="step" id="step-3"') :]
    assert "there is no loop named" in section[: section.index("</section>")]
