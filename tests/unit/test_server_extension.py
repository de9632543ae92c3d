"""mlc_lab's server extension: the kernel websocket sends each message at once (TCP_NODELAY).

Without it a widget's state update can wait 40 ms behind the kernel's "busy" status for the
browser's delayed acknowledgement (Nagle's algorithm; see mlc_lab/_server.py and the figures of
tests/e2e/test_transport_probe.py)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from jupyter_server.services.kernels.connection.channels import ZMQChannelsWebsocketConnection

from mlc_lab import _server

REPO = Path(__file__).resolve().parents[2]


class _Handler:
    def __init__(self) -> None:
        self.nodelay = None

    def set_nodelay(self, value: bool) -> None:
        self.nodelay = value


class _Connection:
    def __init__(self, handler: _Handler) -> None:
        self.websocket_handler = handler

    def connect(self) -> str:
        return "connected"


def test_a_connection_sets_nodelay_then_connects():
    handler = _Handler()
    conn = _server.no_delay(_Connection)(handler)
    assert conn.connect() == "connected" and handler.nodelay is True
    assert _server.no_delay(_server.no_delay(_Connection)).__mro__[1] is _Connection  # wrapped once


def test_the_server_uses_the_wrapped_connection_class():
    app = SimpleNamespace(
        web_app=SimpleNamespace(settings={"kernel_websocket_connection_class": ZMQChannelsWebsocketConnection})
    )
    _server._load_jupyter_server_extension(app)
    cls = app.web_app.settings["kernel_websocket_connection_class"]
    assert issubclass(cls, ZMQChannelsWebsocketConnection) and cls is not ZMQChannelsWebsocketConnection
    assert "connect" in vars(cls)


def test_the_config_installed_with_the_wheel_enables_it():
    cfg = json.loads((REPO / "jupyter-config" / "jupyter_server_config.d" / "mlc_lab.json").read_text())
    (name,) = [m for m, on in cfg["ServerApp"]["jpserver_extensions"].items() if on]
    assert name == "mlc_lab._server" and _server._jupyter_server_extension_points() == [{"module": name}]
    text = (REPO / "pyproject.toml").read_text()
    assert (
        '"jupyter-config/jupyter_server_config.d/mlc_lab.json" = "etc/jupyter/jupyter_server_config.d/mlc_lab.json"'
        in text
    )
