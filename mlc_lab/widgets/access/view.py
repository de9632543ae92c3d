"""The access view: which elements of every buffer a loop touches, when, and by which GPU thread.

A view of a :class:`mlc_lab.Session`, like the explorer (which embeds the same panel and answers
the same two requests). It reads plain data from ``session.footprint`` / ``session.gpu_stats`` /
``session.loop_tree``; this module never imports TVM.

Wire format of a footprint (request ``access_footprint``): a JSON result describing every buffer
(statistics, the box of touched elements ``crop``) plus, per array, the index of a binary buffer
holding its bytes: reads/writes as bit-packed masks (``np.packbits``, row-major, big-endian bit
order), ``first_touch`` as little-endian int32 (float64 beyond 2**31), ``count`` / ``thread`` /
``block`` in the smallest integer type that holds them. Arrays cover only the crop box; large
payloads are deflated (zlib) and marked ``"enc": "deflate"``.

Requests (front end -> kernel): ``access_footprint(loop, at, sweep_threads, shape_vars)`` and
``access_gpu_stats(loop, at, warp, block, shape_vars)``, answered by :class:`AccessView` and by the
explorer (which embeds the same panel), plus ``export_html`` here. The view state (``loop``, ``at``,
``color_by``, ``warp``, ``block``, ``time``, ``region``, ``shape_vars``) lives in traits, written by
either side. A program with symbolic shapes (``n = T.int32()``) is analysed once ``shape_vars``
gives them values; until then the error names them (``shape_vars`` in the error payload) and the
panel asks for them.

Static snapshots (:meth:`AccessView.to_html`, :meth:`AccessView.save_png`) are rendered here with
numpy and zlib, following the same colour rules as the front end (``js/access/color.ts``); a
scrubbed view is drawn with a one-step trail.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, cast

import numpy as np
import traitlets as t

from mlc_lab.core.access.budget import AnalysisCancelled, Budget
from mlc_lab.core.protocol import Analysing, AnalysingSession, SessionLike
from mlc_lab.model.steps import LoopTree, ref_of
from mlc_lab.model.steps import plain as _plain
from mlc_lab.errors import AccessAnalysisError, MlcLabError
from mlc_lab.model.access.payload import ArrayDescr, BufferPayload, FootprintResult, LoopInfo
from mlc_lab.model.requests import REQUESTS, record_key
from mlc_lab.model.traits import AccessViewTraits
from mlc_lab.widgets._base import Reply, RequestError, RpcWidget, bundle
from mlc_lab.widgets.access.pool import pool_arrays, pool_factors
from mlc_lab.widgets.access.render import render_png, render_html

log = logging.getLogger(__name__)

DEFLATE_ABOVE = 2 << 20  # bytes of raw arrays beyond which the payload is compressed
MAX_ELEMENTS = 1 << 24  # per buffer crop; beyond this the view refuses (16M elements)
THREAD_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
BLOCK_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")


# --- the loop tree (plain data) ----------------------------------------------------------------------

_ref = ref_of


def loop_chain(tree: dict, name: str) -> list[dict] | None:
    """The loops from the function's top down to the loop called ``name`` (the one name rule)."""
    return _tree(tree).chain(name)


def all_loops(tree: dict) -> list[dict]:
    return _tree(tree).loops()


def _tree(tree: dict) -> LoopTree:
    return tree if isinstance(tree, LoopTree) else LoopTree(tree)


def launch_dims(tree: dict) -> dict[str, int]:
    """Grid and block sizes: the largest extent bound to each thread tag."""
    dims: dict[str, int] = {}
    for node in all_loops(tree):
        tag = node.get("thread")
        if tag and isinstance(node.get("extent"), int):
            dims[tag] = max(dims.get(tag, 1), int(node["extent"]))
    return dims


def _loop_info(node: dict) -> LoopInfo:
    ext = node.get("extent")
    return {
        "name": node["name"],
        "ref": _ref(node),
        "extent": ext if isinstance(ext, int) else None,
        "min": node.get("min", 0) if isinstance(node.get("min", 0), int) else 0,
        "thread": node.get("thread"),
        "loop_kind": node.get("loop_kind"),
    }


# --- array encoding ----------------------------------------------------------------------------------


def _int_array(a: np.ndarray, signed: bool) -> np.ndarray:
    """The smallest little-endian integer type holding ``a`` (-1 sentinels need a signed one)."""
    if a.size == 0:
        return a.astype(np.int32 if signed else np.uint8)
    lo, hi = int(a.min()), int(a.max())
    kinds = (np.int8, np.int16, np.int32) if signed else (np.uint8, np.uint16, np.uint32)
    for dt in kinds:
        info = np.iinfo(dt)
        if info.min <= lo and hi <= info.max:
            return a.astype(np.dtype(dt).newbyteorder("<"), copy=False)
    return a.astype("<f8")  # a step count past 2**31: exact in float64 up to 2**53


class _Packer:
    """Collects arrays as binary buffers and describes each in the JSON result."""

    def __init__(self) -> None:
        self.buffers: list[bytes] = []
        self.descr: list[ArrayDescr] = []

    def add(self, arr: np.ndarray, kind: str) -> ArrayDescr:
        arr = np.ascontiguousarray(arr)
        if kind == "bits":
            data = np.packbits(arr.reshape(-1).astype(bool)).tobytes()
            dtype = "bits"
        elif kind == "first_touch":
            data_arr = arr.astype("<i4") if arr.size == 0 or int(arr.max()) < 2**31 - 1 else arr.astype("<f8")
            data, dtype = data_arr.tobytes(), data_arr.dtype.name
        else:
            data_arr = _int_array(arr, signed=(kind == "signed"))
            data, dtype = data_arr.tobytes(), data_arr.dtype.name
        d: ArrayDescr = {"buffer": len(self.buffers), "dtype": dtype, "size": int(arr.size), "nbytes": len(data)}
        self.buffers.append(data)
        self.descr.append(d)
        return d

    def finish(self) -> list[bytes]:
        if sum(len(b) for b in self.buffers) > DEFLATE_ABOVE:
            # zlib releases the GIL: compress the arrays side by side
            with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
                self.buffers = list(pool.map(lambda b: zlib.compress(b, 1), self.buffers))
            for d in self.descr:
                d["enc"] = "deflate"
        return self.buffers


def resolve_at(chain: list[dict], at: dict | None) -> dict[str, int]:
    """Values of the loops that enclose the last loop of ``chain``: given ones (clamped), others 0."""
    at = dict(at or {})
    out: dict[str, int] = {}
    for node in chain[:-1]:
        info = _loop_info(node)
        value = at.get(info["ref"], at.get(info["name"], info["min"]))
        try:
            value = int(value)
        except (TypeError, ValueError):
            raise RequestError(
                f"the value of loop {info['ref']} must be an integer, not {value!r}", type="bad_request"
            ) from None
        lo = info["min"]
        if info["extent"] is not None:
            value = max(lo, min(lo + info["extent"] - 1, value))
        out[info["ref"]] = value
    return out


def swept_loops(chain: list[dict]) -> list[str]:
    """The enclosing loops bound to ``threadIdx``: with ``sweep_threads`` they run over every thread
    (a loop inside a kernel then shows what the whole thread block touches, coloured by thread)."""
    return [_ref(n) for n in chain[:-1] if str(n.get("thread") or "").startswith("threadIdx")]


def _footprints(
    session: AnalysingSession,
    target: str,
    values: dict,
    step: int | None,
    sweep: bool,
    shape_vars: dict | None = None,
    budget: Any = None,
) -> Any:
    kwargs: dict[str, Any] = {"shape_vars": shape_vars} if shape_vars else {}
    if sweep:
        kwargs["sweep_threads"] = True
    if budget is not None:
        kwargs["budget"] = budget
    return session.footprint(target, at=values, step=step, **kwargs)


def shape_values(shape_vars: Any) -> dict[str, int]:
    """Values of symbolic shapes as the front end sends them (numbers or numeric text)."""
    out: dict[str, int] = {}
    for name, value in dict(shape_vars or {}).items():
        try:
            out[str(name)] = int(value)
        except (TypeError, ValueError):
            raise RequestError(
                f"the value of the symbolic shape {name} must be an integer, not {value!r}", type="bad_request"
            ) from None
    return out


def _analysis_error(summary: str, exc: BaseException) -> RequestError:
    """The error of a failed analysis; one that needs symbolic shapes names them for the panel."""
    fields: dict[str, Any] = {"detail": str(exc), "type": "analysis"}
    shape_vars = getattr(exc, "shape_vars", None)
    if shape_vars:
        fields["shape_vars"] = list(shape_vars)
    return RequestError(summary, **fields)


def footprint_payload(
    session: AnalysingSession,
    loop: str,
    at: dict | None = None,
    step: int | None = None,
    tree: dict | None = None,
    sweep_threads: bool = False,
    shape_vars: dict | None = None,
    budget: Any = None,
) -> tuple[FootprintResult, list[bytes]]:
    """The footprint of ``loop`` as (JSON result, binary buffers) for the front end.

    ``sweep_threads``: the enclosing ``threadIdx`` loops run over every thread instead of the value
    ``at`` gives them (listed in the result as ``swept``). ``shape_vars``: values of symbolic shapes.
    ``budget``: an ``access.Budget`` that can cancel the analysis and hear its progress."""
    tree = tree if tree is not None else session.step_view(step).loop_tree
    chain = loop_chain(tree, loop)
    if chain is None:
        raise RequestError(f"there is no loop called {loop!r} in the current program", type="unknown_loop")
    values = resolve_at(chain, at)
    target = chain[-1]
    swept = swept_loops(chain) if sweep_threads else []
    shapes = shape_values(shape_vars)
    try:
        fps = _footprints(session, _ref(target), values, step, bool(swept), shapes, budget)
    except AnalysisCancelled as exc:
        raise RequestError(
            f"the analysis of loop {_ref(target)} was cancelled", detail=str(exc), type="cancelled"
        ) from None
    except (AccessAnalysisError, ValueError) as exc:  # the analysis cannot handle this loop nest
        raise _analysis_error(f"the access analysis cannot show loop {_ref(target)}: {_first_line(exc)}", exc) from None
    except MlcLabError as exc:
        raise _analysis_error(_first_line(exc), exc) from None
    pack = _Packer()
    buffers = [_buffer_entry(name, fp, pack) for name, fp in fps.items()]
    data = pack.finish()
    result: FootprintResult = {
        "loop": _loop_info(target),
        "enclosing": [{**_loop_info(n), "value": values[_ref(n)]} for n in chain[:-1]],
        "at": values,
        "swept": swept,
        "shape_vars": shapes,
        "steps": int(fps.steps),
        "gpu": bool(fps.gpu),
        "launch": _plain(fps.launch),
        "buffers": buffers,
    }
    return result, data


def _buffer_entry(name: str, fp: Any, pack: _Packer) -> BufferPayload:
    """One buffer's statistics and its arrays over the touched box (as the analysis cropped them)."""
    summary = _plain(fp.summary())
    if fp.distinct:  # refused before cropping: the crop works out each element's thread and block
        n = math.prod(int(hi) - int(lo) + 1 for lo, hi in fp.bounds)
        if n > MAX_ELEMENTS:
            raise RequestError(
                f"buffer {name} has {n} touched elements in its box, more than the "
                f"{MAX_ELEMENTS} this view draws; pick an inner loop",
                type="too_large",
            )
    offset, arrays = fp.crop()
    size = list(arrays["reads"].shape) if arrays else [0] * len(fp.shape)
    pool = pool_factors(tuple(size))
    if arrays and any(f > 1 for f in pool):  # more than the page draws: pooled to its pixels
        arrays = pool_arrays(arrays, pool)
        size = list(arrays["reads"].shape)
    crop = {"offset": [int(o) for o in offset], "shape": [int(n) for n in size]}
    entry = cast(BufferPayload, {**summary, "crop": crop, "arrays": {}})  # summary: the analysis's own fields
    if any(f > 1 for f in pool):
        entry["crop"]["pool"] = pool
    if not fp.distinct:
        return entry
    out = entry["arrays"]
    out["reads"] = pack.add(arrays["reads"], "bits")
    out["writes"] = pack.add(arrays["writes"], "bits")
    out["first_touch"] = pack.add(arrays["first_touch"], "first_touch")
    if "count" in arrays:  # per-element counts are optional in the analysis
        out["count"] = pack.add(arrays["count"], "unsigned")
    if "thread" in arrays:
        out["thread"] = pack.add(arrays["thread"], "signed")
        out["block"] = pack.add(arrays["block"], "signed")
    return entry


def gpu_payload(
    session: AnalysingSession,
    loop: str,
    at: dict | None = None,
    warp: int | None = None,
    block: int | dict | None = None,
    step: int | None = None,
    tree: dict | None = None,
    shape_vars: dict | None = None,
) -> dict:
    """Per-access warp statistics (coalescing, bank conflicts) in plain data."""
    tree = tree if tree is not None else session.step_view(step).loop_tree
    chain = loop_chain(tree, loop)
    if chain is None:
        raise RequestError(f"there is no loop called {loop!r} in the current program", type="unknown_loop")
    values = resolve_at(chain, at)
    warp = _opt_int(warp)  # -1 / None: the warp of the thread fixed by ``at``
    if isinstance(block, (int, np.integer)) or block is None:
        block = _opt_int(block)
        block_dict = None if block is None else block_coords(block, launch_dims(tree))
    else:
        block_dict = dict(block)
    shapes = shape_values(shape_vars)
    try:
        kwargs = {"shape_vars": shapes} if shapes else {}
        stats = session.gpu_stats(_ref(chain[-1]), at=values, warp=warp, block=block_dict, step=step, **kwargs)
    except (MlcLabError, ValueError) as exc:
        raise RequestError(
            f"no warp statistics for loop {_ref(chain[-1])}: {_first_line(exc)}", detail=str(exc), type="analysis"
        ) from None
    data = stats.to_json() if hasattr(stats, "to_json") else dict(stats)
    return _plain(data)


def block_coords(linear: int, dims: dict[str, int]) -> dict[str, int]:
    nx, ny = dims.get("blockIdx.x", 1), dims.get("blockIdx.y", 1)
    out = {"blockIdx.x": linear % nx, "blockIdx.y": (linear // nx) % ny, "blockIdx.z": linear // (nx * ny)}
    return {k: v for k, v in out.items() if k in dims}


def _first_line(exc: BaseException) -> str:
    return (str(exc).split("\n", 1)[0] or type(exc).__name__).strip()


# --- the widget --------------------------------------------------------------------------------------


_TICKETS = threading.Lock()
PROGRESS_AFTER_S = 1.0  # an analysis running longer tells the page how far it is
PROGRESS_EVERY_S = 0.25


class AccessRequests:
    """The memory panel's requests, for a widget that has ``_session`` and ``loop_tree``: the memory
    view, and the explorer that embeds the panel.

    The analyses run off the kernel's message loop (background requests), so a step never waits for
    one. Each footprint has a ticket: a newer footprint request, a Cancel (``access_cancel``) or a new
    step makes it stale, and it stops at its next part and answers "cancelled". One running longer
    than a second sends the page ``{"kind": "mlc-progress", ...}`` messages (parts done of total)."""

    _session: SessionLike
    loop_tree: Any
    _mlc_fp_ticket: int = 0  # the panel's footprint requests
    _mlc_record_ticket: int = 0  # the records a saved notebook keeps (the memory view's own)

    def access_footprint(
        self, loop: str, at: dict | None = None, sweep_threads: bool = False, shape_vars: dict | None = None
    ) -> Reply:
        return Reply(*self._footprint(loop, at, sweep_threads, shape_vars))

    def access_cancel(self) -> dict:
        with _TICKETS:
            self._mlc_fp_ticket += 1
        return {}

    def _analysis_budget(self, loop: str, step: Any, tickets: str = "_mlc_fp_ticket") -> Budget:
        """A budget that cancels when this analysis goes stale (a newer one on the same ``tickets``, a
        Cancel, another step) and reports progress after a second."""
        with _TICKETS:  # handlers run in their own threads
            ticket = getattr(self, tickets) + 1
            setattr(self, tickets, ticket)
        started = time.monotonic()
        last = [started]

        def cancelled() -> bool:
            return ticket != getattr(self, tickets) or self._session.current.id != step

        def progress(done: int, total: int) -> None:
            now = time.monotonic()
            if now - started < PROGRESS_AFTER_S or now - last[0] < PROGRESS_EVERY_S:
                return
            last[0] = now
            send = getattr(self, "send", None)
            if send is not None and tickets == "_mlc_fp_ticket":
                send({"kind": "mlc-progress", "method": "access_footprint", "loop": loop, "done": done, "total": total})

        return Budget(cancelled=cancelled, progress=progress)

    def _footprint(
        self, loop: str, at: dict | None, sweep_threads: bool = False, shape_vars: dict | None = None
    ) -> tuple[FootprintResult, list[bytes]]:
        step = self._session.current.id
        budget = self._analysis_budget(loop, step)
        return footprint_payload(
            self._analysing(),
            loop,
            at,
            step=step,
            tree=self.loop_tree,
            sweep_threads=bool(sweep_threads),
            shape_vars=shape_vars,
            budget=budget,
        )

    def access_gpu_stats(
        self,
        loop: str,
        at: dict | None = None,
        warp: int | None = None,
        block: int | None = None,
        shape_vars: dict | None = None,
    ) -> dict:
        session = self._analysing()
        return gpu_payload(session, loop, at, warp=warp, block=block, tree=self.loop_tree, shape_vars=shape_vars)

    def _analysing(self) -> AnalysingSession:
        """The session, as one with the memory analyses (an explorer's stand-in may have none)."""
        if not isinstance(self._session, Analysing):
            raise MlcLabError(f"a {type(self._session).__name__} has no memory analyses (no footprint())")
        return self._session


class AccessView(AccessRequests, RpcWidget):
    """Heatmaps of the memory a loop touches (see :func:`access_view`).

    Traits ``loop``, ``at``, ``color_by``, ``warp``, ``block`` and ``time`` are the view's state: set
    them from Python (``view.loop = "j_1"; view.at = {"Y/i": 3, "k": 7}``) or by clicks.
    """

    _esm = bundle("access_view")
    # The requests of mlc_lab.model.requests.REQUESTS it answers, and the method answering each.
    handlers = {
        "access_footprint": "access_footprint",
        "access_gpu_stats": "access_gpu_stats",
        "access_cancel": "access_cancel",
        "export_html": "export_html",
    }
    traits_type = AccessViewTraits
    # A saved memory view still scrubs and plays the footprint it was showing (the recorded requests
    # of mlc_lab.model.requests keep their last replies).

    loop_tree_json = t.Bytes(b"{}").tag(sync=True)
    current = t.Any(None).tag(sync=True)
    loop = t.Unicode("").tag(sync=True)
    at = t.Dict().tag(sync=True)
    color_by = t.Unicode("access").tag(sync=True)  # access | order | thread | block
    warp = t.Int(-1).tag(sync=True)  # -1: no warp picked
    block = t.Int(-1).tag(sync=True)  # linear block id, -1: none picked
    time = t.Int(-1).tag(sync=True)  # scrubber position in steps; -1: the whole footprint
    # enclosing threadIdx loops run over every thread (else fixed at ``at``, thread 0 by default)
    sweep_threads = t.Bool(True).tag(sync=True)
    # auto: the touched part with context when the whole buffer would show it as a few pixels;
    # touched: only the box of touched elements; buffer: the whole buffer
    region = t.Unicode("auto").tag(sync=True)
    # values of the program's symbolic shapes ({"n": 128}); the panel asks for them when needed
    shape_vars = t.Dict().tag(sync=True)
    height = t.Unicode("").tag(sync=True)
    error = t.Dict().tag(sync=True)

    def __init__(
        self, session: AnalysingSession, loop: str | None = None, *, at: dict | None = None, **kwargs: Any
    ) -> None:
        if not isinstance(session, AnalysingSession):
            raise TypeError(
                f"AccessView needs a mlc_lab.Session (or an AnalysingSession); got {type(session).__name__}"
            )
        self._session: AnalysingSession = session
        self._lock = threading.RLock()
        tree = session.step_view().loop_tree
        if loop:
            chain = loop_chain(tree, loop)
            if chain is None:
                raise MlcLabError(f"there is no loop called {loop!r} in the current program")
            loop = _ref(chain[-1])
        else:
            loops = all_loops(tree)
            loop = _ref(loops[-1]) if loops else ""
        super().__init__(
            loop_tree_json=_tree_bytes(tree),
            current=_plain(session.current.id),
            loop=loop or "",
            at=dict(at or {}),
            **kwargs,
        )
        self._unsubscribe: Callable[[], None] | None = session.on_change(self._on_session_change)
        # A notebook saved without ever being displayed (nbclient) still carries the footprint it shows.
        # after a change, off the message loop (a step never waits for an analysis; a newer change or
        # step makes a running one stale)
        self.observe(
            lambda _change: self._record_footprint_later(),
            names=["loop", "at", "current", "sweep_threads", "shape_vars"],
        )
        self._record_footprint()

    def _record_footprint_later(self) -> None:
        job = threading.Thread(target=self._record_footprint, name="mlc-lab-record-footprint", daemon=True)
        self._mlc_jobs = [j for j in self._mlc_jobs if j.is_alive()] + [job]
        job.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the analyses running in the background; False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for job in list(self._mlc_jobs):
            job.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if job.is_alive():
                return False
        return True

    def mlc_what(self) -> str:
        name = self._session.func_name or ""
        return f"memory-access view of `{name}`" if name else "memory-access view"

    def _record_footprint(self) -> None:
        if not self.loop:
            return
        # the request js/access/panel.ts sends (the record's key)
        params = {"loop": self.loop, "at": dict(self.at), "sweep_threads": bool(self.sweep_threads)}
        if self.shape_vars:
            params["shape_vars"] = dict(self.shape_vars)
        step = self._session.current.id
        try:
            result, buffers = footprint_payload(
                self._session,
                self.loop,
                self.at,
                step=step,
                tree=self.loop_tree,
                sweep_threads=bool(self.sweep_threads),
                shape_vars=self.shape_vars,
                budget=self._analysis_budget(self.loop, step, "_mlc_record_ticket"),
            )
        except Exception:  # noqa: BLE001  (the live view reports errors when it asks)
            return
        self.mlc_record(
            record_key("access_footprint", params),
            group="access_footprint",
            keep=REQUESTS["access_footprint"].keep,
            result=result,
            buffers=buffers,
        )

    @property
    def session(self) -> AnalysingSession:
        return self._session

    @property
    def loop_tree(self) -> dict:
        return json.loads(self.loop_tree_json or b"{}")

    def close(self) -> None:
        unsubscribe = getattr(self, "_unsubscribe", None)
        if unsubscribe is not None:
            unsubscribe()
            self._unsubscribe = None
        super().close()

    def _on_session_change(self, change: Any) -> None:
        if change.kind == "measure":  # the program did not change
            return
        with self._lock, self.hold_sync():
            tree = change.step.loop_tree
            self.loop_tree_json = _tree_bytes(tree)
            self.current = change.step.id
            if self.loop and loop_chain(tree, self.loop) is None:
                self.loop = ""
            self.error = {}

    # --- requests (access_footprint, access_gpu_stats: AccessRequests) --------------------------------
    def export_html(self) -> Reply:
        return Reply.text(self.to_html())

    def _footprint(
        self, loop: str, at: dict | None, sweep_threads: bool = False, shape_vars: dict | None = None
    ) -> tuple[FootprintResult, list[bytes]]:
        try:
            result, buffers = super()._footprint(loop, at, sweep_threads, shape_vars)
        except RequestError as exc:
            if exc.payload.get("type") == "cancelled":  # a newer request or step took its place
                raise
            self.error = {
                "summary": exc.payload["summary"],
                "detail": exc.payload.get("detail", ""),
                "loop": loop,
                **({"shape_vars": exc.payload["shape_vars"]} if "shape_vars" in exc.payload else {}),
            }
            raise
        if self.error:
            self.error = {}
        return result, buffers

    # --- snapshots -----------------------------------------------------------------------------------
    def snapshot(self) -> dict:
        """Plain data of what the view shows: footprint arrays (numpy) and statistics."""
        if not self.loop:
            raise MlcLabError("the access view shows no loop; set view.loop first")
        return snapshot_data(
            self._session,
            self.loop,
            self.at,
            warp=self.warp,
            block=self.block,
            tree=self.loop_tree,
            sweep_threads=self.sweep_threads,
            shape_vars=self.shape_vars,
        )

    def to_html(self, path: str | Path | None = None, *, title: str | None = None, scale: int | None = None) -> str:
        """A self-contained HTML page of the view (heatmaps as inline PNGs, statistics as tables)."""
        page = render_html(
            self.snapshot(), color_by=self.color_by, time=self.time, title=title, scale=scale, region=self.region
        )
        if path is not None:
            Path(path).write_text(page, encoding="utf-8")
        return page

    def save_png(self, path: str | Path, *, buffer: str | None = None, scale: int | None = None) -> Path:
        """Write the heatmaps (all buffers side by side, or one) as a PNG, rendered in Python."""
        snap = self.snapshot()
        data = render_png(snap, color_by=self.color_by, time=self.time, buffer=buffer, scale=scale, region=self.region)
        out = Path(path)
        out.write_bytes(data)
        return out


def _opt_int(v: Any) -> int | None:
    if v is None:
        return None
    v = int(v)
    return None if v < 0 else v


def _tree_bytes(tree: dict) -> bytes:
    return json.dumps(tree, separators=(",", ":"), default=str).encode("utf-8")


def access_view(x: Any, loop: str | None = None, **kwargs: Any) -> AccessView:
    """Open an access view on a Session (or a module / TVMScript, which starts a Session).

    >>> s = mlc_lab.Session(MyModule)
    >>> view = mlc_lab.widgets.access.view(s, "j_1", at={"Y/i": 3, "k": 7})
    """
    session: AnalysingSession
    if isinstance(x, AnalysingSession):
        session = x
    else:
        from mlc_lab.core.session import Session

        session = Session(x)  # mypy: a Session has the memory analyses (a renamed member fails here)
    return AccessView(session, loop, **kwargs)


# --- server-side rendering (static snapshots) ------------------------------------------------------


def snapshot_data(
    session: AnalysingSession,
    loop: str,
    at: dict | None = None,
    *,
    warp: int = -1,
    block: int = -1,
    tree: dict | None = None,
    sweep_threads: bool = False,
    shape_vars: dict | None = None,
) -> dict:
    tree = tree if tree is not None else session.step_view().loop_tree
    chain = loop_chain(tree, loop)
    if chain is None:
        raise MlcLabError(f"there is no loop called {loop!r} in the current program")
    values = resolve_at(chain, at)
    shapes = shape_values(shape_vars)
    fps = _footprints(session, _ref(chain[-1]), values, None, sweep_threads and bool(swept_loops(chain)), shapes)
    gpu = None
    if fps.gpu:
        try:
            gpu = gpu_payload(session, loop, values, warp=warp, block=block, tree=tree, shape_vars=shapes)
        except RequestError:
            gpu = None
    return {
        "loop": _ref(chain[-1]),
        "at": values,
        "footprints": fps,
        "gpu": gpu,
        "steps": int(fps.steps),
        "launch": _plain(fps.launch),
        "warp": warp,
        "block": block,
    }
