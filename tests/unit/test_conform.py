"""The one strict reading of what crosses a process (`mlc_lab.model.conform.decode`), and the strict wire
that records what departs (`check_wire`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NotRequired, TypedDict

import pytest

from mlc_lab.model import conform
from mlc_lab.model.conform import WireData, WireError, decode


class Spot(TypedDict):
    buffer: str
    index: list[int]
    note: NotRequired[str]


@dataclass
class Inner(WireData):
    name: str
    size: int = 0


@dataclass
class Outer(WireData):
    label: str
    inner: Inner
    many: list[Inner] = field(default_factory=list)
    by_name: dict[str, Inner] = field(default_factory=dict)
    maybe: Inner | None = None
    spot: Spot | None = None

    __wire_properties__ = ("count",)

    @property
    def count(self) -> int:
        return len(self.many)

    def to_json(self) -> dict:
        return {**super().to_json(), "count": self.count}


def test_a_dataclass_is_built_field_by_field_and_its_encoding_reads_back_equal():
    value = Outer("x", Inner("a", 1), [Inner("b")], {"c": Inner("c", 3)}, Inner("d"), {"buffer": "A", "index": [1, 2]})
    data = value.to_json()
    assert data["count"] == 1
    back = Outer.from_json(data)
    assert back == value and isinstance(back.inner, Inner) and isinstance(back.by_name["c"], Inner)
    assert decode(Outer, {"label": "y", "inner": {"name": "z"}}) == Outer("y", Inner("z"))


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ({"label": "x"}, "Outer.inner: missing (required by Outer)"),
        ({"label": "x", "inner": {"name": "a"}, "extra": 1}, "Outer: Outer declares no key 'extra'"),
        ({"label": 3, "inner": {"name": "a"}}, "Outer.label: 3 is not a string"),
        ({"label": "x", "inner": {"name": "a", "size": "7"}}, "Outer.inner.size: '7' is not an integer"),
        ({"label": "x", "inner": {"name": "a"}, "many": [{"name": 1}]}, "Outer.many[0].name: 1 is not a string"),
        ({"label": "x", "inner": {"name": "a"}, "many": {}}, "Outer.many: {} is not a list"),
        ({"label": "x", "inner": {"name": "a"}, "by_name": {"k": 5}}, "Outer.by_name.k: 5 is not a Inner"),
        ({"label": "x", "inner": {"name": "a"}, "spot": {"buffer": "A"}}, "Outer.spot.index: missing"),
        ({"label": "x", "inner": {"name": "a"}, "count": "one"}, "Outer.count: 'one' is not an integer"),
        ("not an object", "Outer: 'not an object' is not a Outer"),
    ],
)
def test_what_departs_is_refused_with_its_place(data, said):
    with pytest.raises(WireError) as info:
        Outer.from_json(data)
    assert str(info.value).startswith(said)


def test_other_types_are_checked_and_returned_as_they_are():
    spot = {"buffer": "A", "index": [0]}
    assert decode(Spot, spot) is spot
    assert decode(list[int], [1, 2]) == [1, 2]
    with pytest.raises(WireError, match=r"value\[1\]: 'b' is not an integer"):
        decode(list[int], [1, "b"], "value")


def test_the_strict_wire_records_what_departs(monkeypatch):
    found: list[str] = []
    monkeypatch.setattr(conform, "wire_violations", found)
    monkeypatch.setattr(conform, "STRICT_WIRE", True)
    assert conform.check_wire({"buffer": "A", "index": [0]}, Spot, "spot") is True
    assert conform.check_wire({"buffer": "A"}, Spot, "spot") is False
    assert found == ["spot.index: missing (required by Spot)"]
    monkeypatch.setattr(conform, "STRICT_WIRE", False)
    assert conform.check_wire({"buffer": "A"}, Spot, "spot") is True and len(found) == 1
