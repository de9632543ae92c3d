from __future__ import annotations

import comm
import pytest

from tests.widgets.fakes import FakeSession, RecordingComm


@pytest.fixture()
def comms(monkeypatch):
    """Every comm a widget opens, in order (a DOMWidget opens its Layout's first: use ``w.comm``)."""
    opened: list[RecordingComm] = []

    def create_comm(**kwargs):
        c = RecordingComm(**kwargs)
        opened.append(c)
        return c

    monkeypatch.setattr(comm, "create_comm", create_comm)
    return opened


@pytest.fixture(scope="module")
def programs():
    """The access-analysis programs (tests/fixtures/programs_access.py)."""
    from tests.fixtures import programs_access

    return programs_access


@pytest.fixture()
def session() -> FakeSession:
    return FakeSession()


@pytest.fixture()
def explorer(comms, session):
    from mlc_lab.widgets.explorer import Explorer

    w = Explorer(session)
    yield w
    w.close()
