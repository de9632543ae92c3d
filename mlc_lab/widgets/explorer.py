"""The schedule explorer: TVMScript, loop nest, primitives, history and trace of one Session.

The widget is a view of a :class:`mlc_lab.Session`; it holds no schedule state of its own. Every
click reaches Python as a request that calls the same Session methods a user calls, and every
Session change (from a click or from ``explorer.session.apply(...)`` in a cell) refreshes the
traits through ``Session.on_change``. This module never imports TVM: it reads plain data from the
Session API.

Measuring (``Session.measure``) and the CUDA view (``Session.cuda_source``) take seconds in the
measure worker, so those two requests are answered from a background thread: the ``measuring``
trait says what runs, ``measurements`` mirrors ``Session.measurements`` as plain data.
"""

from __future__ import annotations

import difflib
import itertools
import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

import traitlets as t

from mlc_lab.errors import MlcLabError, ScheduleStepError, TraceParseError
# The module by its full name: the package re-exports the function `access_view` under the same name.
from mlc_lab.widgets.access_view import footprint_payload, gpu_payload
from mlc_lab.widgets._base import REQUEST, Reply, RequestError, RpcWidget, bundle, rpc
from mlc_lab.widgets.export import collect_export, render_html

log = logging.getLogger(__name__)

MAX_FAILURES = 50  # failed attempts kept for the history panel
MEASURE_TARGETS = ("cpu", "cuda")
# Requests that build or run code in the measure worker (seconds): answered from a background
# thread so the kernel's message loop stays free (clicks, cells, Cancel) while they run.
BACKGROUND_REQUESTS = frozenset({"measure", "cuda_source"})
MEASUREMENT_FIELDS = ("latency_s", "std_s", "min_s", "max_s", "repeats", "gflops", "flops", "max_abs_error",
                      "max_rel_error", "correct", "error", "error_kind")


class Explorer(RpcWidget):
    """Interactive view of a schedule session (see :func:`explore`)."""

    _esm = bundle("explorer")

    func = t.Unicode("").tag(sync=True)
    script = t.Unicode("").tag(sync=True)
    # The loop tree travels as UTF-8 JSON in a binary buffer: one C-speed encode instead of
    # ipywidgets walking hundreds of nested dicts for buffers (read it as ``loop_tree``).
    loop_tree_json = t.Bytes(b"{}").tag(sync=True)
    steps = t.List(t.Dict()).tag(sync=True)
    current = t.Any(None).tag(sync=True)
    changed_lines = t.List(t.Int()).tag(sync=True)
    decisions = t.List(t.Dict()).tag(sync=True)
    trace = t.Unicode("").tag(sync=True)
    selection = t.Dict().tag(sync=True)
    error = t.Dict().tag(sync=True)
    failures = t.List(t.Dict()).tag(sync=True)
    can_undo = t.Bool(False).tag(sync=True)
    can_redo = t.Bool(False).tag(sync=True)
    # step id (as text) -> the Session's Measurement of that step, as plain data (see _measurement_info)
    measurements = t.Dict().tag(sync=True)
    measuring = t.Dict().tag(sync=True)  # {"step", "target"} while a measurement runs, else {}
    height = t.Unicode("640px").tag(sync=True)

    def __init__(self, session: Any, *, height: str = "640px", **kwargs: Any) -> None:
        for name in ("apply", "undo", "redo", "goto", "steps", "script", "loop_tree", "on_change"):
            if not hasattr(session, name):
                raise TypeError(f"Explorer needs a mlc_lab.Session (or an object with .{name}); got {type(session).__name__}")
        self._session = session
        self._lock = threading.RLock()
        self._scripts: dict[str, str] = {}
        self._changed: dict[str, list[int]] = {}
        self._trees: dict[str, tuple[dict, bytes]] = {}  # step id -> loop tree (a step never changes)
        self._failure_ids = itertools.count(1)
        self._error_ids = itertools.count(1)
        self._jobs: list[threading.Thread] = []  # background requests (measure, cuda_source)
        # The first comm message already carries the whole state (no empty first render).
        super().__init__(height=height, **self._read_state(), **kwargs)
        self._unsubscribe = session.on_change(self._on_session_change)

    # --- public API -------------------------------------------------------------------------------
    @property
    def loop_tree(self) -> dict:
        """The loop tree of the current step, as the Session reports it (plain data)."""
        cached = self._trees.get(str(self.current))
        return cached[0] if cached else json.loads(self.loop_tree_json)

    @property
    def session(self) -> Any:
        """The Session this explorer shows; changes made through it appear here at once."""
        return self._session

    def select(self, name: str | None, kind: str | None = None) -> None:
        """Select a loop or block by the name shown in the script (None clears the selection)."""
        if not name:
            self.selection = {}
            return
        node = _find(self.loop_tree, name, kind)
        if node is None:
            raise MlcLabError(f"there is no loop or block called {name!r} in the current program")
        self.selection = {"kind": node["kind"], "name": _ref(node)}

    def to_html(self, path: str | Path | None = None, *, title: str | None = None) -> str:
        """A self-contained HTML page of every step (script, diff, loop tree, trace); written to ``path`` if given."""
        html = render_html(collect_export(self._session), title=title)
        if path is not None:
            Path(path).write_text(html, encoding="utf-8")
        return html

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for running background requests (a measurement, a CUDA compile); False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for job in list(self._jobs):
            job.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if job.is_alive():
                return False
        return True

    def close(self) -> None:
        unsubscribe = getattr(self, "_unsubscribe", None)
        if unsubscribe is not None:
            unsubscribe()
            self._unsubscribe = None
        super().close()

    # --- session -> traits ------------------------------------------------------------------------
    def _on_session_change(self, _session: Any, event: str) -> None:
        if event == "measure":  # only the measurements changed (maybe from a worker thread)
            with self._lock, self.hold_sync():
                self.measurements = self._read_measurements()
                if self.error.get("source") == "measure":
                    self.error = {}
            return
        self.refresh(clear_error=True)

    def refresh(self, *, clear_error: bool = False) -> None:
        """Read the Session's current state into the traits (one comm message)."""
        with self._lock, self.hold_sync():
            state = self._read_state()
            tree = self._trees[str(state["current"])][0]
            for name, value in state.items():
                setattr(self, name, value)
            if self.selection and _find(tree, self.selection.get("name", ""), self.selection.get("kind")) is None:
                self.selection = {}
            if clear_error:
                self.error = {}

    def _read_state(self) -> dict[str, Any]:
        s = self._session
        current = s.current
        cur_id = _plain(current.id)
        tree, tree_json = self._tree_of(cur_id)
        script = s.script
        self._scripts.setdefault(str(cur_id), script)
        return {
            "func": str(tree.get("func") or getattr(s, "func_name", "") or ""),
            "steps": [_step_info(step) for step in s.steps],
            "current": cur_id,
            "script": script,
            "loop_tree_json": tree_json,
            "changed_lines": self._changed_lines(current, script),
            "decisions": [_plain(d) for d in _call(s, "decisions", [])],
            "trace": str(_call(s, "trace", "")),
            "can_undo": current.parent is not None,
            "can_redo": bool(current.children),
            "measurements": self._read_measurements(),
        }

    def _read_measurements(self) -> dict[str, dict]:
        found = getattr(self._session, "measurements", None) or {}
        return {str(_plain(sid)): _measurement_info(m) for sid, m in list(found.items())}

    def _tree_of(self, step_id: Any) -> tuple[dict, bytes]:
        """Loop tree of the current step ``step_id`` (cached: undo/redo/goto reuse it)."""
        key = str(step_id)
        if key not in self._trees:
            tree = self._session.loop_tree()  # JSON-safe by the Session's contract
            self._trees[key] = (tree, json.dumps(tree, separators=(",", ":"), default=str).encode("utf-8"))
        return self._trees[key]

    def _script_at(self, step_id: Any) -> str:
        key = str(step_id)
        if key not in self._scripts:
            self._scripts[key] = self._session.script_at(step_id)
        return self._scripts[key]

    def _changed_lines(self, step: Any, script: str) -> list[int]:
        key = str(step.id)
        if key in self._changed:
            return self._changed[key]
        if step.parent is None:
            lines: list[int] = []
        else:
            lines = changed_lines(self._script_at(step.parent), script)
        self._changed[key] = lines
        return lines

    def _step_id(self, value: Any) -> Any:
        """The Session's own id for an id that came back from the front end (JSON may stringify)."""
        for step in self._session.steps:
            if step.id == value or str(step.id) == str(value):
                return step.id
        raise RequestError(f"there is no step {value!r}", type="unknown_step")

    # --- front-end requests -------------------------------------------------------------------------
    @rpc()
    def apply(self, primitive: str, args: list | None = None, kwargs: dict | None = None,
              then_split: bool = False) -> dict:
        args = list(args or [])
        kwargs = dict(kwargs or {})
        before = self._session.current.id
        try:
            result = self._session.apply(primitive, *args, **kwargs)
            if primitive == "sample_perfect_tile" and then_split:
                loop = kwargs.get("loop", args[0] if args else None)
                result = self._session.apply("split", loop, factors=result)
        except ScheduleStepError as exc:
            self._record_failure(exc, before, primitive, args, kwargs)
            raise RequestError(exc.summary, detail=exc.detail, involved=list(exc.involved),
                               primitive=getattr(exc, "primitive", primitive), type="step") from None
        except MlcLabError as exc:
            self._record_failure(exc, before, primitive, args, kwargs)
            raise RequestError(str(exc), primitive=primitive, type=type(exc).__name__) from None
        names = _names(result)
        self._select_new(names)
        return {"names": names, "step": _plain(self._session.current.id)}

    @rpc()
    def undo(self) -> dict:
        return self._move(lambda: self._session.undo(), "undo")

    @rpc()
    def redo(self) -> dict:
        return self._move(lambda: self._session.redo(), "redo")

    @rpc()
    def goto(self, step: Any) -> dict:
        target = self._step_id(step)
        return self._move(lambda: self._session.goto(target), "goto")

    def _move(self, fn: Any, what: str) -> dict:
        try:
            fn()
        except MlcLabError as exc:
            self._set_error(source="history", primitive=what, summary=str(exc))
            raise RequestError(str(exc), type="history") from None
        return {"step": _plain(self._session.current.id)}

    @rpc()
    def set_decision(self, index: int, value: Any) -> dict:
        try:
            self._session.set_decision(int(index), value)
        except MlcLabError as exc:
            self._set_error(source="decision", primitive=f"decision #{index}", summary=_first_line(exc), detail=str(exc))
            raise RequestError(_first_line(exc), type=type(exc).__name__) from None
        return {"step": _plain(self._session.current.id)}

    @rpc()
    def replay(self, trace: str) -> dict:
        try:
            self._session.replay(trace)
        except TraceParseError as exc:
            line = getattr(exc, "line", None)
            summary = _strip_line_prefix(_first_line(exc), line)
            self._set_error(source="replay", primitive="replay", summary=summary, detail=str(exc), line=line)
            raise RequestError(summary, line=line, detail=str(exc), type="trace") from None
        except MlcLabError as exc:
            self._set_error(source="replay", primitive="replay", summary=_first_line(exc), detail=str(exc))
            raise RequestError(_first_line(exc), detail=str(exc), type=type(exc).__name__) from None
        return {"step": _plain(self._session.current.id)}

    @rpc()
    def script_at(self, step: Any) -> Reply:
        step_id = self._step_id(step)
        return Reply.text(self._script_at(step_id), step=_plain(step_id))

    @rpc()
    def export_trace(self, format: str = "text") -> Reply:  # noqa: A002  (the front end's word)
        s = self._session
        if format == "json":
            text = json.dumps(_plain(s.trace_json), indent=1)
        elif format == "python":
            text = s.trace_python
        elif format == "text":
            text = s.trace
        else:
            raise RequestError(f"unknown trace format {format!r}; use json, text or python", type="bad_request")
        return Reply.text(text, format=format)

    @rpc()
    def export_html(self) -> Reply:
        return Reply.text(self.to_html())

    # The memory-access panel (mlc_lab.widgets.access_view) embedded in the explorer.
    @rpc()
    def access_footprint(self, loop: str, at: dict | None = None) -> Reply:
        result, buffers = footprint_payload(self._session, loop, at, tree=self.loop_tree)
        return Reply(result, buffers)

    @rpc()
    def access_gpu_stats(self, loop: str, at: dict | None = None, warp: int | None = None,
                         block: int | None = None) -> dict:
        return gpu_payload(self._session, loop, at, warp=warp, block=block, tree=self.loop_tree)

    # Measuring and CUDA: both run in the measure worker; answered from a background thread.
    def _handle_request(self, widget: Any, content: Any, buffers: list[Any] | None) -> None:
        if isinstance(content, dict) and content.get("kind") == REQUEST and content.get("method") in BACKGROUND_REQUESTS:
            job = threading.Thread(target=super()._handle_request, args=(widget, content, buffers),
                                   name=f"mlc-lab-explorer-{content.get('method')}", daemon=True)
            self._jobs = [j for j in self._jobs if j.is_alive()] + [job]
            job.start()
            return
        super()._handle_request(widget, content, buffers)

    @rpc()
    def measure(self, target: str = "cpu", step: Any = None) -> dict:
        target = str(target)
        if target not in MEASURE_TARGETS:
            raise RequestError(f"unknown target {target!r}; use {' or '.join(MEASURE_TARGETS)}", type="bad_request")
        sid = self._session.current.id if step is None else self._step_id(step)
        with self._lock:
            if self.measuring:
                raise RequestError(f"step {self.measuring.get('step')} is being measured; wait for it to finish",
                                   type="busy")
            self.measuring = {"step": _plain(sid), "target": target}
        try:
            result = self._session.measure(target=target, step=sid)
        except MlcLabError as exc:
            summary, detail = _summary_detail(exc)
            with self._lock, self.hold_sync():
                self.measuring = {}
                self._set_error(source="measure", primitive=f"measure on {target}", summary=summary, detail=detail,
                                kind=getattr(exc, "kind", type(exc).__name__))
            raise RequestError(summary, detail=detail, type=getattr(exc, "kind", type(exc).__name__)) from None
        except BaseException:
            with self._lock:
                self.measuring = {}
            raise
        with self._lock, self.hold_sync():
            self.measuring = {}
            self.measurements = self._read_measurements()
        return {"step": _plain(sid), "measurement": _measurement_info(result)}

    @rpc()
    def cuda_source(self, step: Any = None, ptx: bool = True) -> dict:
        """The CUDA kernels of a step, or (type "gpu_check") why it cannot be compiled for a GPU."""
        sid = self._session.current.id if step is None else self._step_id(step)
        try:
            build = self._session.cuda_source(step=sid, ptx=bool(ptx))
        except MlcLabError as exc:
            summary, detail = _summary_detail(exc)
            raise RequestError(summary, detail=detail, message=str(exc), step=_plain(sid),
                               type=getattr(exc, "kind", type(exc).__name__)) from None
        return {
            "step": _plain(sid),
            "source": str(getattr(build, "source", "")),
            "kernels": _plain(list(getattr(build, "kernels", []) or [])),
            "ptx": getattr(build, "ptx", None),
            "ptx_error": getattr(build, "ptx_error", None),
        }

    @rpc()
    def clear_error(self) -> dict:
        self.error = {}
        return {}

    @rpc()
    def select_name(self, name: str | None, kind: str | None = None) -> dict:
        try:
            self.select(name, kind)
        except MlcLabError as exc:
            raise RequestError(str(exc), type="unknown_name") from None
        return {"selection": self.selection}

    # --- errors -----------------------------------------------------------------------------------
    def _set_error(self, **fields: Any) -> None:
        self.error = {"id": next(self._error_ids), **{k: _plain(v) for k, v in fields.items()}}

    def _record_failure(self, exc: BaseException, parent: Any, primitive: str, args: list, kwargs: dict) -> None:
        summary = getattr(exc, "summary", None) or _first_line(exc)
        failure = {
            "id": next(self._failure_ids),
            "parent": _plain(parent),
            "primitive": primitive,
            "label": call_label(primitive, args, kwargs),
            "summary": summary,
            "detail": getattr(exc, "detail", "") or "",
            "involved": [str(n) for n in getattr(exc, "involved", []) or []],
        }
        with self.hold_sync():
            self.failures = [*self.failures, failure][-MAX_FAILURES:]
            self._set_error(source="apply", primitive=primitive, summary=summary, detail=failure["detail"],
                            involved=failure["involved"], label=failure["label"])

    def _select_new(self, names: Any) -> None:
        """After a step, select the first new loop/block it made (split -> the outer loop)."""
        flat = names if isinstance(names, list) else [names]
        for name in flat:
            if isinstance(name, str):
                node = _find(self.loop_tree, name, None)
                if node is not None:
                    self.selection = {"kind": node["kind"], "name": _ref(node)}
                    return

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle_ = super()._repr_mimebundle_(**kwargs)
        if isinstance(bundle_, tuple):
            data = bundle_[0]
        else:
            data = bundle_
        if isinstance(data, dict):
            data["text/plain"] = f"<mlc_lab Explorer of {self.func}: step {self.current}>\n{self.script}"
        return bundle_


def explore(x: Any, func: str | None = None, **kwargs: Any) -> Explorer:
    """Open an explorer on a module, TVMScript text or file, or an existing Session.

    >>> ex = mlc_lab.explore(MMRelu)        # display it: last expression of a cell
    >>> ex.session.apply("split", "Y/j", factors=[None, 4])   # shows up in the open explorer
    """
    if hasattr(x, "apply") and hasattr(x, "on_change"):
        session = x
    else:
        from mlc_lab.core.session import Session  # core is allowed; it is the one that talks to TVM

        session = Session(x, func)
    return Explorer(session, **kwargs)


# --- plain-data helpers ------------------------------------------------------------------------------

def changed_lines(before: str, after: str) -> list[int]:
    """1-based lines of ``after`` that a step inserted or rewrote."""
    a, b = before.splitlines(), after.splitlines()
    # A step usually rewrites one region: match the common head and tail cheaply first.
    head = 0
    while head < len(a) and head < len(b) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < len(a) - head and tail < len(b) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    a_mid, b_mid = a[head:len(a) - tail], b[head:len(b) - tail]
    out: list[int] = []
    matcher = difflib.SequenceMatcher(None, a_mid, b_mid, autojunk=False)
    for tag, _i1, _i2, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            out.extend(range(head + j1 + 1, head + j2 + 1))
    return out


def call_label(primitive: str, args: list, kwargs: dict) -> str:
    def text(v: Any) -> str:
        if isinstance(v, str):
            return v
        if isinstance(v, list):
            return "[" + ", ".join(text(x) for x in v) + "]"
        return repr(v)

    parts = [text(a) for a in args] + [f"{k}={text(v)}" for k, v in kwargs.items()]
    return f"{primitive}({', '.join(parts)})"


def _step_info(step: Any) -> dict:
    return {
        "id": _plain(step.id),
        "parent": _plain(step.parent),
        "children": [_plain(c) for c in step.children],
        "primitive": step.primitive or "",
        "label": step.label,
        "kind": getattr(step, "kind", "apply"),
    }


def target_label(target: Any) -> str:
    """"cpu", "cuda" or the target's kind, from what a Measurement records (often TVM's target JSON)."""
    text = str(target or "")
    kind = text
    if text.startswith("{"):
        try:
            kind = str(json.loads(text).get("kind", text))
        except (ValueError, AttributeError):
            kind = text
    return {"llvm": "cpu", "c": "cpu"}.get(kind, kind)


def _measurement_info(m: Any) -> dict:
    """A Measurement as plain JSON (times in seconds)."""
    out = {name: _plain(getattr(m, name, None)) for name in MEASUREMENT_FIELDS}
    out["target"] = target_label(getattr(m, "target", ""))
    return out


def _summary_detail(exc: BaseException) -> tuple[str, str]:
    """First line of an error, and the rest (with the error's own detail) for a details box."""
    text = str(getattr(exc, "summary", None) or exc)
    first, _, rest = text.partition("\n")
    detail = getattr(exc, "detail", "") or ""
    rest = rest.strip("\n")
    return first.strip() or type(exc).__name__, "\n\n".join(p for p in (rest, detail) if p)


def _call(obj: Any, attr: str, default: Any) -> Any:
    try:
        return getattr(obj, attr)
    except Exception:  # noqa: BLE001  (a view shows what it can)
        log.exception("mlc_lab: reading session.%s failed", attr)
        return default


def _plain(value: Any) -> Any:
    """JSON-safe copy (tuples to lists, unknown objects to text)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "value") and isinstance(getattr(value, "value"), (int, float, list, tuple)):
        return _plain(value.value)  # a Sampled value
    try:
        return int(value)
    except (TypeError, ValueError):
        return str(value)


def _names(result: Any) -> Any:
    if result is None or isinstance(result, str):
        return result
    if isinstance(result, (list, tuple)):
        return [_names(r) for r in result]
    return _plain(result)


def _ref(node: dict) -> str:
    return node.get("qualified") or node["name"]


def _walk(tree: dict):
    for fn in tree.get("functions", []) or []:
        stack = list(reversed(fn.get("children", [])))
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.get("children", [])))


def _find(tree: dict, name: str, kind: str | None) -> dict | None:
    if not name:
        return None
    fallback = None
    for node in _walk(tree):
        if kind and node.get("kind") != kind:
            continue
        if _ref(node) == name:
            return node
        if fallback is None and (node.get("name") == name or _ref(node).endswith("/" + name)):
            fallback = node
    return fallback


def _first_line(exc: BaseException) -> str:
    return (str(exc).split("\n", 1)[0] or type(exc).__name__).strip()


def _strip_line_prefix(text: str, line: int | None) -> str:
    prefix = f"line {line}: "
    return text[len(prefix):] if line is not None and text.startswith(prefix) else text
