"""The whole suite runs on the strict wire: every reply, error kind and synced trait a widget sends is
checked against mlc_lab.model (mlc_lab.widgets._base.STRICT_WIRE), and a test after which anything
departed fails, naming where."""

from __future__ import annotations

import os
import sys

import pytest

os.environ["MLC_LAB_STRICT_WIRE"] = "1"  # before mlc_lab.widgets is imported (and for kernels started here)


@pytest.fixture(autouse=True)
def _strict_wire():
    base = sys.modules.get("mlc_lab.widgets._base")
    if base is not None:
        base.wire_violations.clear()
    yield
    base = sys.modules.get("mlc_lab.widgets._base")
    if base is not None and base.wire_violations:
        found, base.wire_violations[:] = list(base.wire_violations), []
        pytest.fail("the wire departs from mlc_lab.model:\n  " + "\n  ".join(found[:20]), pytrace=False)
