"""What every mlc_lab widget shares: its front end (one copy per page) and request/response messaging.

Front end: every widget's `_esm` is the same small loader (js/loader.ts); the views themselves are
one bundle (js/mlc_lab.ts) held once per page by the model-only :class:`FrontEnd` widget (one per
kernel in Jupyter, one per browser session in marimo), so a saved notebook with an explorer, a
memory view and a dashboard carries the bundle once.

The front end asks with a custom message ``{"kind": "mlc-request", "id", "method", "params"}``;
the handler the widget names for that request (``RpcWidget.handlers``; every request and its policy is
declared once, in :data:`mlc_lab.model.requests.REQUESTS`) answers, and the reply goes back as
``{"kind": "mlc-response", "id", "ok", "result" | "error"}`` with optional binary buffers
(text payloads such as scripts travel as UTF-8 bytes). Plain data only: no TVM in this package.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import logging
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, cast

import html as _html

import anywidget
import ipywidgets
import traitlets as t

from mlc_lab._threads import helper_thread
from mlc_lab.errors import error_kind
from mlc_lab.model.conform import STRICT, STRICT_WIRE, fields_of, problems, wire_violation, wire_violations  # noqa: F401  (the suite reads them here)
from mlc_lab.model.errors import ERROR_KINDS, ErrorInfo
from mlc_lab.model.requests import REQUEST, REQUESTS, RESPONSE, ResponseMessage, record_key

log = logging.getLogger(__name__)

STATIC = Path(__file__).resolve().parent.parent / "static"
FRONT_END_BUNDLE = STATIC / "mlc_lab.js"  # every view, one bundle (js/mlc_lab.ts)
LOADER_BUNDLE = STATIC / "loader.js"  # what each widget carries as `_esm` (js/loader.ts)

_MISSING_BUNDLE = """
export default { render({ el }) {
  el.innerHTML = '<div style="padding:8px;border:1px solid #d32f2f;color:#d32f2f">' +
    'The mlc_lab front end is not built: run <code>npm ci &amp;&amp; npm run build</code> in the ' +
    'mlc_lab checkout (or reinstall the package), then re-run this cell.</div>';
} };
"""


class LoaderSource(str):
    """The loader's source (a widget's `_esm`), remembering which view of the front end it renders."""

    entry: str

    def __new__(cls, text: str, entry: str) -> LoaderSource:
        obj = super().__new__(cls, text)
        obj.entry = entry
        return obj


def bundle(name: str) -> str:
    """The `_esm` of a widget class whose view is called ``name`` in js/mlc_lab.ts.

    Not the view's code: the loader, a few hundred bytes, which imports the page's one copy of
    the front end from the :class:`FrontEnd` model (so N widgets in a saved notebook cost one
    bundle, not N). A stub that says how to build the front end when it is missing.
    """
    if LOADER_BUNDLE.is_file() and FRONT_END_BUNDLE.is_file():
        return LoaderSource(LOADER_BUNDLE.read_text(encoding="utf-8"), name)
    log.warning("mlc_lab: %s is missing; the widget will only show how to build it", FRONT_END_BUNDLE)
    return _MISSING_BUNDLE


@dataclass(frozen=True)
class FrontEndCode:
    """The front-end bundle as the FrontEnd model ships it: gzip, then base64 (text survives every
    widget-state store: nbclient, JupyterLab, nbconvert, static pages)."""

    code: str
    digest: str
    raw_bytes: int

    ENCODING: ClassVar[str] = "gzip+base64"


_code_cache: dict[tuple[str, float, int], FrontEndCode] = {}


def front_end_code(path: Path = FRONT_END_BUNDLE) -> FrontEndCode:
    """Compress the built bundle once per build (keyed by the file's mtime and size)."""
    st = path.stat()
    key = (str(path), st.st_mtime, st.st_size)
    cached = _code_cache.get(key)
    if cached is None:
        raw = path.read_bytes()
        # mtime=0: the same bundle gives the same bytes, so saved notebooks do not churn.
        packed = gzip.compress(raw, compresslevel=9, mtime=0)
        cached = FrontEndCode(base64.b64encode(packed).decode("ascii"), hashlib.sha256(raw).hexdigest()[:16], len(raw))
        _code_cache.clear()
        _code_cache[key] = cached
    return cached


class FrontEnd(ipywidgets.Widget):
    """The one copy of the front-end code per page (see :func:`front_end`): a model-only widget (no view, no `_esm`)
    that every mlc_lab widget points at (lonboard's host/child pattern turned around: the
    children render, the model holds the code). Saved with the notebook's widget state once."""

    code = t.Unicode("").tag(sync=True)
    encoding = t.Unicode(FrontEndCode.ENCODING).tag(sync=True)
    digest = t.Unicode("").tag(sync=True)


class Recorded(ipywidgets.Widget):
    """A model-only record that a view without a kernel reads instead of asking Python: one
    request's reply (``result`` JSON and binary ``buffers``; ``ok`` False for an error reply, whose
    ``result`` is the error) or one step of the explorer (``data``).
    Sent once when made; saved with the notebook's widget state; closed when it is dropped.

    Large records are stored gzip-compressed (``encoding`` "gzip"): ``data`` and every buffer are
    gzip bytes, and a ``result`` of "" means the reply's JSON is in ``data`` (a lowering is ~250 kB
    of JSON, ~30 kB compressed). js/lib/offline.ts reads both forms."""

    key = t.Unicode("").tag(sync=True)
    result = t.Unicode("null").tag(sync=True)
    data = t.Bytes(b"").tag(sync=True)
    buffers = t.List(t.Bytes()).tag(sync=True)
    ok = t.Bool(True).tag(sync=True)
    encoding = t.Unicode("").tag(sync=True)

    # bytes; smaller records are kept as they are (a step of mm_relu, 3.7 kB, is stored in 1.1 kB)
    COMPRESS_FROM: ClassVar[int] = 1024

    @classmethod
    def make(
        cls, key: str, *, result: Any = None, data: bytes = b"", buffers: list[bytes] | None = None, ok: bool = True
    ) -> Recorded:
        text = json.dumps(result, default=str)
        blobs = [bytes(b) for b in (buffers or [])]
        size = len(text) + len(data) + sum(len(b) for b in blobs)
        if size < cls.COMPRESS_FROM:
            return cls(key=key, result=text, data=bytes(data), buffers=blobs, ok=ok)
        pack = lambda raw: gzip.compress(raw, compresslevel=6, mtime=0)  # noqa: E731
        if not data:  # a reply: its JSON goes into data, compressed
            return cls(
                key=key,
                result="",
                data=pack(text.encode("utf-8")),
                buffers=[pack(b) for b in blobs],
                ok=ok,
                encoding="gzip",
            )
        return cls(
            key=key, result=text, data=pack(bytes(data)), buffers=[pack(b) for b in blobs], ok=ok, encoding="gzip"
        )

    @property
    def raw_data(self) -> bytes:
        """``data`` as it was recorded (decompressed)."""
        return gzip.decompress(self.data) if self.encoding == "gzip" and self.data else bytes(self.data)

    @property
    def nbytes(self) -> int:
        """What the record adds to the saved state (before base64)."""
        return len(self.result) + len(self.data) + sum(len(b) for b in self.buffers)


# Errors not worth keeping for a saved view: they say something about that moment, not the step.
# Error kinds any request may answer with, besides those its entry in the table declares.
_ANY_REQUEST_ERRORS = ("bad_request", "unknown", "internal")

# The strict wire (mlc_lab.model.conform.STRICT_WIRE; the test suite sets MLC_LAB_STRICT_WIRE=1): every
# result is checked against its request's declared type, every error kind against the kinds it declares,
# every synced trait's value against the widget's traits type; what departs is a wire_violation. Off,
# nothing is checked (a reply costs nothing more).


def _transient(kind: Any) -> bool:
    info = ERROR_KINDS.get(kind) if isinstance(kind, str) else None
    return bool(info and info.transient)


# The FrontEnd model of each page (see _page): a widget must point at a model its own page knows.
_front_ends: dict[int, tuple[Any, FrontEnd]] = {}
_front_end_lock = threading.Lock()
_record_lock = threading.RLock()


def _page() -> Any:
    """The page a widget made now is shown on, or None for the kernel's one page.

    A Jupyter kernel has one widget manager: every page of the notebook knows every model. marimo
    serves all browser sessions of `marimo run` from one process, and a model reaches only the
    session whose runtime context made it (its comm keeps that context's stream): a FrontEnd
    made for the first session is "not found" in the second. There the current context
    (thread-local, one per session) names the page: its stream's pipe (a thread the session
    starts writes through a copy of the stream, to the same pipe).
    """
    context = sys.modules.get("marimo._runtime.context")  # never imported here: only if marimo runs us
    if context is None:
        return None
    try:
        ctx = context.safe_get_context()
    except Exception:  # noqa: BLE001  (another marimo version: one front end per process, as before)
        return None
    stream = getattr(ctx, "stream", None) if ctx is not None else None
    return getattr(stream, "pipe", stream)


def front_end() -> FrontEnd | None:
    """This page's FrontEnd model (made on first use, remade after ``Widget.close_all()``)."""
    page = _page()
    with _front_end_lock:
        for key in [k for k, (_p, fe) in _front_ends.items() if fe.comm is None]:
            del _front_ends[key]  # closed (close_all, a marimo cell run again, a session ended)
        held = _front_ends.get(id(page))
        if held is None or held[0] is not page:
            if not FRONT_END_BUNDLE.is_file():
                return None
            packed = front_end_code()
            made = FrontEnd(code=packed.code, digest=packed.digest)
            _front_ends[id(page)] = (page, made)
            return made
        host = held[1]
        if FRONT_END_BUNDLE.is_file():
            packed = front_end_code()  # rebuilt since (npm run dev): widgets made from now on get it
            if packed.digest != host.digest:
                with host.hold_sync():
                    host.code, host.digest = packed.code, packed.digest
        return host


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


SEE_IT_LIVE = "mlc-lab export NOTEBOOK.ipynb -o DIR"
# JupyterLab shows this text in place of a saved widget when the notebook is not trusted: say so first.
SEE_IT_LIVE_HOW = (
    "To see it live: if this is JupyterLab or Notebook 7, trust the notebook (command palette, "
    "Ctrl+Shift+C: Trust Notebook) or run it; elsewhere, open it in JupyterLab with its "
    "widget state saved"
)


def fallback_bundle(what: str) -> dict[str, str]:
    """What a widget's output carries besides the widget itself, for the readers that cannot show
    widgets (``jupyter nbconvert`` of a notebook saved without widget state, GitHub, a text
    console). It names the widget and how to see it live, and nothing of its state: the widget
    changes after it is displayed (an explorer at step 0 is at step 10 a few cells later), and a
    copy taken at display time would show a moment the notebook has left behind."""
    plain = (
        f"[mlc_lab {what}: an interactive widget. This text stands in for it where widgets "
        f"cannot be shown and does not follow its state. {SEE_IT_LIVE_HOW}, or make an offline page "
        f"with `{SEE_IT_LIVE}`.]"
    )
    rich = (
        '<div class="mlc-lab-fallback" style="border:1px dashed #98a2b3;border-radius:4px;'
        'padding:6px 10px;color:#475467;font:13px sans-serif">'
        f"<b>mlc_lab {_html.escape(what)}</b>: an interactive widget. This text stands in for it "
        f"where widgets cannot be shown and does not follow its state. {_html.escape(SEE_IT_LIVE_HOW)}, "
        f"or make an offline page with <code>{_html.escape(SEE_IT_LIVE)}</code>.</div>"
    )
    return {"text/plain": plain, "text/html": rich}


class RpcWidget(anywidget.AnyWidget):
    """An anywidget whose front end sends it the requests of :data:`mlc_lab.model.requests.REQUESTS`.

    A subclass names its handler per request in ``handlers`` (request -> method name); the table says
    the rest (background, recorded, step-implied). tests/widgets/test_requests.py checks both ways.
    """

    handlers: ClassVar[dict[str, str]] = {}
    # The TypedDict of mlc_lab.model.traits naming every synced trait and its type (checked both ways by
    # tests/widgets/test_requests.py; the page's type is generated from it).
    traits_type: ClassVar[type | None] = None
    # Which view of the front end renders this widget, and the FrontEnd model holding that code
    # ("anywidget:<model id>", resolved in JS by anywidget's host.getModel).
    _mlc_entry = t.Unicode("").tag(sync=True)
    _mlc_front_end = t.Unicode("").tag(sync=True)
    # Records for views without a kernel: key -> "IPY_MODEL_<id>" of a Recorded child model.
    _mlc_recorded = t.Dict().tag(sync=True)
    # A widget that holds steps keeps one recorded reply per recorded step (0: the table's ``keep``).
    _mlc_steps_kept: ClassVar[int] = 0

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        esm = cls.__dict__.get("_esm")
        if isinstance(esm, LoaderSource):
            cls._mlc_entry_name = esm.entry
        for name, attr in cls.handlers.items():
            if name not in REQUESTS:
                raise TypeError(
                    f"{cls.__name__} handles {name!r}, which mlc_lab.model.requests.REQUESTS does not declare"
                )
            if not callable(getattr(cls, attr, None)):
                raise TypeError(f"{cls.__name__}.handlers names {attr!r} for {name!r}: no such method")

    _mlc_entry_name: ClassVar[str] = ""

    def __init__(self, **kwargs: Any) -> None:
        # Before the comm opens: the first state the front end sees already names its code.
        host = front_end() if self._mlc_entry_name else None
        if host is not None:
            kwargs.setdefault("_mlc_entry", self._mlc_entry_name)
            kwargs.setdefault("_mlc_front_end", f"anywidget:{host.model_id}")
        super().__init__(**kwargs)
        self._mlc_jobs: list[threading.Thread] = []  # background requests in flight
        self.on_msg(self._handle_request)
        if STRICT_WIRE and self.traits_type is not None:
            self._mlc_conform_traits(list(self.keys))
            self.observe(lambda change: self._mlc_conform_traits([change["name"]]), names=list(self.keys))

    def _mlc_conform_traits(self, names: list[str]) -> None:
        declared = fields_of(self.traits_type)[0]
        for name in names:
            if name in declared:
                where = f"{type(self).__name__}.{name}"
                to_json = self.trait_metadata(name, "to_json", self._trait_to_json)  # as get_state sends it
                for text in problems(to_json(getattr(self, name), self), declared[name], where):
                    wire_violation(text)

    def _handle_request(self, _widget: Any, content: Any, _buffers: list[Any] | None) -> None:
        if not isinstance(content, dict) or content.get("kind") != REQUEST:
            return
        spec = REQUESTS.get(str(content.get("method")))
        if spec is not None and spec.background and str(content.get("method")) in self.handlers:
            job = helper_thread(self._answer, args=(content,), name=f"mlc-lab-{content.get('method')}")
            self._mlc_jobs = [j for j in self._mlc_jobs if j.is_alive()] + [job]
            return
        self._answer(content)

    def _answer(self, content: dict) -> None:
        started = time.perf_counter()
        req_id = content.get("id")
        method = content.get("method")
        params = content.get("params") or {}
        attr = self.handlers.get(str(method))
        try:
            if attr is None:
                raise RequestError(f"unknown request {method!r}", type="unknown")
            if not isinstance(params, dict):
                raise RequestError("request parameters must be an object", type="bad_request")
            answer = getattr(self, attr)(**params)
        except RequestError as exc:
            spec = REQUESTS.get(str(method))
            if spec is not None and exc.payload.get("type") not in (*spec.errors, *_ANY_REQUEST_ERRORS):
                log.warning(
                    "mlc_lab: %r answered an error of kind %r, which mlc_lab.model.requests does not declare",
                    method,
                    exc.payload.get("type"),
                )
                if STRICT_WIRE:
                    wire_violation(f"{method!r} answered an error of undeclared kind {exc.payload.get('type')!r}")
            self._reply(req_id, started, ok=False, error=exc.payload)
            if not _transient(exc.payload.get("type")):  # e.g. "this step has no GPU kernel"
                self._record_reply(str(method), params if isinstance(params, dict) else {}, exc.payload, [], ok=False)
            return
        except TypeError as exc:  # wrong parameters from a front end that does not match this version
            self._reply(
                req_id, started, ok=False, error={"summary": f"bad request {method!r}: {exc}", "type": "bad_request"}
            )
            return
        except Exception as exc:  # noqa: BLE001  (a view must never kill the kernel's message loop)
            log.exception("mlc_lab: request %r failed", method)
            self._reply(req_id, started, ok=False, error=self._error_payload(exc))
            return
        result, buffers = (answer.result, answer.buffers) if isinstance(answer, Reply) else (answer, [])
        if STRICT_WIRE and str(method) in REQUESTS:
            for text in problems(result, REQUESTS[str(method)].result, f"{method} result"):
                wire_violation(text)
        self._reply(req_id, started, ok=True, result=result, buffers=buffers)
        self._record_reply(str(method), params, result, buffers)

    def _record_reply(self, method: str, params: dict, result: Any, buffers: list[bytes], *, ok: bool = True) -> None:
        spec = REQUESTS.get(method)
        if spec is None or not spec.keep:
            return
        keep = self._mlc_steps_kept or spec.keep
        try:
            if spec.step_implied:
                params = self._mlc_step_params(params)
            self.mlc_record(record_key(method, params), group=method, keep=keep, result=result, buffers=buffers, ok=ok)
        except Exception:  # noqa: BLE001  (a record is a nicety; the reply went out)
            log.exception("mlc_lab: recording the reply to %r failed", method)

    def _mlc_step_params(self, params: dict) -> dict:
        """The parameters a step-implied reply is recorded under: a widget with steps adds the current
        one (js/lib/offline.ts looks it up the same way); a widget without steps records them as sent."""
        return params

    # Bytes of recorded replies (every group but the explorer's steps) a widget keeps; the oldest go
    # first. A saved notebook stays small however many panels were opened.
    _mlc_reply_budget: ClassVar[int] = 1_500_000

    def mlc_record(
        self,
        key: str,
        *,
        group: str,
        keep: int,
        result: Any = None,
        data: bytes = b"",
        buffers: list[bytes] | None = None,
        ok: bool = True,
    ) -> None:
        """Keep a record for views without a kernel; of each group only the last ``keep`` stay, and
        replies (groups other than "step") within ``_mlc_reply_budget`` bytes in all (the dropped
        ones are closed, so they leave the saved state too; ``mlc_records_dropped`` counts them)."""
        if self.comm is None:  # closed (a background analysis that ended after its view): nothing to keep
            return
        with _record_lock:
            records: dict[str, tuple[str, Recorded]] = self.__dict__.setdefault("_mlc_records", {})
            old = records.pop(key, None)
            if old is not None:
                old[1].close()
            records[key] = (group, Recorded.make(key, result=result, data=data, buffers=buffers, ok=ok))
            dropped = self.__dict__.setdefault("_mlc_dropped", {})
            in_group = [k for k, (g, _r) in records.items() if g == group]
            for k in in_group[: max(0, len(in_group) - keep)]:
                records.pop(k)[1].close()
                dropped[group] = dropped.get(group, 0) + 1
            if group != "step":
                replies = [k for k, (g, _r) in records.items() if g != "step"]
                total = sum(records[k][1].nbytes for k in replies)
                for k in replies[:-1]:  # never the one just made
                    if total <= self._mlc_reply_budget:
                        break
                    g, rec = records.pop(k)
                    total -= rec.nbytes
                    rec.close()
                    dropped[g] = dropped.get(g, 0) + 1
            self._mlc_recorded = {k: f"IPY_MODEL_{r.model_id}" for k, (_g, r) in records.items() if r.comm is not None}

    @property
    def mlc_records_dropped(self) -> dict[str, int]:
        """How many records of each group were dropped to keep the saved state small."""
        return dict(self.__dict__.get("_mlc_dropped", {}))

    def close(self) -> None:
        for _group, rec in self.__dict__.pop("_mlc_records", {}).values():
            rec.close()
        super().close()

    def _reply(
        self,
        req_id: Any,
        started: float,
        *,
        ok: bool,
        result: Any = None,
        error: dict | None = None,
        buffers: list[bytes] | None = None,
    ) -> None:
        if STRICT_WIRE and not ok:
            for text in problems(error, ErrorInfo, "error"):
                wire_violation(text)
        # elapsed_ms: time spent in the kernel, so the front end can tell it from transport and drawing.
        msg: ResponseMessage = {
            "kind": RESPONSE,
            "id": req_id,
            "ok": ok,
            "elapsed_ms": round((time.perf_counter() - started) * 1000, 2),
        }
        if ok:
            msg["result"] = result
        else:
            msg["error"] = cast(ErrorInfo, error or {"summary": "unknown error"})  # held to ErrorInfo above
        self.send(msg, buffers or None)

    def mlc_what(self) -> str:
        """What this widget is, in facts that do not change once it is shown (see fallback_bundle)."""
        return "widget"

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        shown = super()._repr_mimebundle_(**kwargs)
        data = shown[0] if isinstance(shown, tuple) else shown
        if isinstance(data, dict):
            data.update(fallback_bundle(self.mlc_what()))
        return shown

    def _error_payload(self, exc: BaseException) -> dict[str, Any]:
        """Plain-data rendering of an error; subclasses know their domain errors better."""
        return {
            "summary": str(exc).split("\n", 1)[0] or type(exc).__name__,
            "detail": f"{type(exc).__name__}: {exc}",
            "type": error_kind(exc),
        }
