"""mlc_lab's Jupyter server extension: the kernel's websocket sends each message at once.

jupyter_server leaves Nagle's algorithm on for the kernel websocket (tornado's default). A click is
answered by several small messages in a row: the kernel's "busy" status, the widget's state update,
the reply, "idle". While "busy" is not yet acknowledged, TCP holds the state update back until the
browser's delayed acknowledgement, which Linux sends after 40 ms: measured with
tests/e2e/test_transport_probe.py (chromium's network stack received the update 40 ms after the
server wrote it on some clicks, within 10 ms on the others). TCP_NODELAY sends it at once.

Enabled by jupyter-config/jupyter_server_config.d/mlc_lab.json (installed with the wheel into
etc/jupyter; ``./run.sh lab`` and the browser tests point Jupyter at it). This module never imports
TVM, and imports jupyter_server only when the server loads it.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)


def _jupyter_server_extension_points() -> list[dict]:
    return [{"module": "mlc_lab._server"}]


def no_delay(base: type) -> type:
    """``base`` (jupyter_server's kernel websocket connection class), with TCP_NODELAY on connect."""
    if getattr(base, "_mlc_no_delay", False):
        return base

    class NoDelayConnection(base):  # type: ignore[misc, valid-type]
        _mlc_no_delay = True

        def connect(self) -> Any:
            try:
                self.websocket_handler.set_nodelay(True)
            except Exception:  # noqa: BLE001  (a slower socket is no reason to refuse the kernel)
                log.warning("mlc_lab: could not set TCP_NODELAY on the kernel websocket", exc_info=True)
            return super().connect()

    NoDelayConnection.__name__ = NoDelayConnection.__qualname__ = f"NoDelay{base.__name__}"
    return NoDelayConnection


def _load_jupyter_server_extension(serverapp: Any) -> None:
    settings = serverapp.web_app.settings
    base = settings.get("kernel_websocket_connection_class")
    if base is None:
        return
    settings["kernel_websocket_connection_class"] = no_delay(base)
