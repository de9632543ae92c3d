"""What every mlc_lab widget shares: its bundled front end and request/response messaging.

The front end asks with a custom message ``{"kind": "mlc-request", "id", "method", "params"}``;
the method registered with :func:`rpc` answers, and the reply goes back as
``{"kind": "mlc-response", "id", "ok", "result" | "error"}`` with optional binary buffers
(text payloads such as scripts travel as UTF-8 bytes). Plain data only: no TVM in this package.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import anywidget

log = logging.getLogger(__name__)

STATIC = Path(__file__).resolve().parent.parent / "static"
REQUEST = "mlc-request"
RESPONSE = "mlc-response"

_MISSING_BUNDLE = """
export default { render({ el }) {
  el.innerHTML = '<div style="padding:8px;border:1px solid #d32f2f;color:#d32f2f">' +
    'The mlc_lab front end is not built: run <code>npm ci &amp;&amp; npm run build</code> in the ' +
    'mlc_lab checkout (or reinstall the package), then re-run this cell.</div>';
} };
"""


def bundle(name: str) -> Path | str:
    """The built ES module of a widget class, or a stub that says how to build it."""
    path = STATIC / f"{name}.js"
    if path.is_file():
        return path
    log.warning("mlc_lab: %s is missing; the widget will only show how to build it", path)
    return _MISSING_BUNDLE


class Reply:
    """A handler's answer when it carries binary buffers next to the JSON result."""

    __slots__ = ("buffers", "result")

    def __init__(self, result: Any = None, buffers: list[bytes] | None = None):
        self.result = result
        self.buffers = list(buffers or [])

    @classmethod
    def text(cls, text: str, **result: Any) -> Reply:
        data = text.encode("utf-8")
        return cls({"bytes": len(data), **result}, [data])


class RequestError(Exception):
    """Raised by a handler to answer with an error the front end shows as it is."""

    def __init__(self, summary: str, **fields: Any):
        super().__init__(summary)
        self.payload = {"summary": summary, **fields}


def rpc(name: str | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a method as the handler of front-end requests called ``name`` (default: its own name)."""

    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        fn._mlc_rpc = name or fn.__name__  # type: ignore[attr-defined]
        return fn

    return mark


class RpcWidget(anywidget.AnyWidget):
    """An anywidget whose front end can call methods marked with :func:`rpc`."""

    _rpc_handlers: ClassVar[dict[str, str]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        handlers: dict[str, str] = {}
        for klass in reversed(cls.__mro__):
            for attr, value in vars(klass).items():
                name = getattr(value, "_mlc_rpc", None)
                if name:
                    handlers[name] = attr
        cls._rpc_handlers = handlers

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.on_msg(self._handle_request)

    def _handle_request(self, _widget: Any, content: Any, buffers: list[Any] | None) -> None:
        if not isinstance(content, dict) or content.get("kind") != REQUEST:
            return
        started = time.perf_counter()
        req_id = content.get("id")
        method = content.get("method")
        params = content.get("params") or {}
        attr = self._rpc_handlers.get(str(method))
        try:
            if attr is None:
                raise RequestError(f"unknown request {method!r}", type="unknown")
            if not isinstance(params, dict):
                raise RequestError("request parameters must be an object", type="bad_request")
            answer = getattr(self, attr)(**params)
        except RequestError as exc:
            self._reply(req_id, started, ok=False, error=exc.payload)
            return
        except TypeError as exc:  # wrong parameters from a front end that does not match this version
            self._reply(req_id, started, ok=False, error={"summary": f"bad request {method!r}: {exc}", "type": "bad_request"})
            return
        except Exception as exc:  # noqa: BLE001  (a view must never kill the kernel's message loop)
            log.exception("mlc_lab: request %r failed", method)
            self._reply(req_id, started, ok=False, error=self._error_payload(exc))
            return
        if isinstance(answer, Reply):
            self._reply(req_id, started, ok=True, result=answer.result, buffers=answer.buffers)
        else:
            self._reply(req_id, started, ok=True, result=answer)

    def _reply(self, req_id: Any, started: float, *, ok: bool, result: Any = None, error: dict | None = None,
               buffers: list[bytes] | None = None) -> None:
        # elapsed_ms: time spent in the kernel, so the front end can tell it from transport and drawing.
        msg: dict[str, Any] = {"kind": RESPONSE, "id": req_id, "ok": ok,
                               "elapsed_ms": round((time.perf_counter() - started) * 1000, 2)}
        if ok:
            msg["result"] = result
        else:
            msg["error"] = error or {"summary": "unknown error"}
        self.send(msg, buffers or None)

    def _error_payload(self, exc: BaseException) -> dict[str, Any]:
        """Plain-data rendering of an error; subclasses know their domain errors better."""
        return {"summary": str(exc).split("\n", 1)[0] or type(exc).__name__, "detail": str(exc),
                "type": type(exc).__name__}
