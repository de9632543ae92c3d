"""A teacher's five-task GPU assignment graded on the labelled corpus (issue 28's "done when").

The assignment is the one another course's lab asks for: shared-memory tiling, register tiling,
cooperative fetching, a write cache and epilogue fusion, on gemm + relu + add. A correct hand-in of
every style earns every point, the styles with register-level copies of the shared tiles included;
each single-mistake mutant loses exactly the tasks its labels say it breaks (and, as the assignment's
default says, every task when it has a correctness hazard). The hand-ins are the corpus's traces,
graded by ``mlc_lab.grading.grade`` as a student's files are: nothing here is written for one lab.
"""

from __future__ import annotations

from functools import lru_cache

import pytest

from mlc_lab.grading import grade, load_assignment
from mlc_lab.model.checks import HAZARD_CLASS
from tests.verdicts import generate

TASKS = {  # task name -> its check
    "shared": "shared_memory_tiling",
    "registers": "register_tiling",
    "cooperative": "cooperative_fetching",
    "write_back": "write_cache",
    "epilogue": "epilogue_fusion",
}


@lru_cache(maxsize=1)
def _corpus() -> dict:
    return generate.load(generate.CORPUS)


def _items(styles: tuple[str, ...]) -> list[str]:
    return [i["id"] for i in _corpus()["items"] if i["program"] == "gemm_relu_add" and i["id"].split("/")[1] in styles]


@pytest.fixture(scope="module")
def assignment(tmp_path_factory):
    folder = tmp_path_factory.mktemp("teacher_lab")
    (folder / "gemm_relu_add.py").write_text(_corpus()["programs"]["gemm_relu_add"], encoding="utf-8")
    tasks = "\n".join(
        f'[[tasks]]\nname = "{name}"\ntitle = "{check.replace("_", " ")}"\nchecks = ["{check}"]\npoints = 5\n'
        for name, check in TASKS.items()
    )
    (folder / "lab.toml").write_text(
        f'title = "GEMM + ReLU + add, five tasks"\nprogram = "gemm_relu_add.py"\ntarget = "cuda"\n\n{tasks}',
        encoding="utf-8",
    )
    return load_assignment(folder / "lab.toml"), folder


def _expected(item: dict) -> dict[str, float]:
    correctness = any(HAZARD_CLASS.get(h, "correctness") == "correctness" for h in item["hazards"])
    return {name: 0.0 if correctness or item["checks"][check] == "fail" else 5.0 for name, check in TASKS.items()}


def _grade(assignment, item_id: str) -> tuple[dict, dict]:
    a, folder = assignment
    item = next(i for i in _corpus()["items"] if i["id"] == item_id)
    hand_in = folder / (item_id.replace("/", "__").replace(":", "_") + ".py")
    hand_in.write_text(item["trace"], encoding="utf-8")
    result = grade(a, hand_in)
    assert result.error is None, result.error
    return item, {t.name: t.points for t in result.tasks}


# Every style (with and without register-level copies of the shared tiles, two thread shapes, two
# tile sizes) and each of its single-mistake mutants: 44 hand-ins, a few seconds.
@pytest.mark.parametrize("item_id", _items(("base", "regcopy", "t8x8_tile8x8", "t8x16_regcopy_vec1")))
def test_each_hand_in_loses_exactly_the_tasks_it_breaks(assignment, item_id):
    item, points = _grade(assignment, item_id)
    assert points == _expected(item), item.get("mistake")
    if item["mistake"] is None:
        assert sum(points.values()) == 25.0
    elif item["hazards"] == ["spill"]:  # a performance hazard: the default fails no task on it
        assert sum(points.values()) == 25.0
