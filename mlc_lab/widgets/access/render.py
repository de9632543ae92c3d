"""The memory view as a picture: the heatmap of a buffer's footprint, its PNG, and the standalone HTML
page (what AccessView.save_png and to_html write; the page draws the same with js/access)."""

from __future__ import annotations

import base64
import html
import struct
import zlib
from typing import Any

import numpy as np

from mlc_lab.errors import MlcLabError


# The palette of js/access/color.ts (kept equal by tests/widgets/test_access_view.py).
COLORS = {
    "empty": (236, 238, 241),
    "read": (33, 113, 181),
    "write": (214, 96, 24),
    "both": (128, 60, 170),
}


def _hue_rgb(i: np.ndarray) -> np.ndarray:
    """Categorical colours for thread/block ids: golden-ratio hues (as js/access/color.ts)."""
    h = np.mod(i.astype(np.float64) * 0.61803398875, 1.0)
    s, v = 0.62, 0.88
    k = np.stack([np.mod(5 + h * 6, 6), np.mod(3 + h * 6, 6), np.mod(1 + h * 6, 6)], axis=-1)
    rgb = v - v * s * np.clip(np.minimum(k, 4 - k), 0, 1)
    return np.round(rgb * 255).astype(np.uint8)


def heatmap_rgb(
    fp: Any, color_by: str = "access", time: int = -1, steps: int = 0, region: str = "buffer"
) -> np.ndarray:
    """RGB image (rows, cols, 3) of one buffer: 2-D as is, 1-D as one row, N-D as the first slice."""
    reads, writes = np.asarray(fp.reads), np.asarray(fp.writes)
    first = np.asarray(fp.first_touch)
    thread = None if fp.thread is None else np.asarray(fp.thread)
    blk = None if fp.block is None else np.asarray(fp.block)
    if reads.ndim == 0:
        reads, writes, first = (a.reshape(1, 1) for a in (reads, writes, first))
    elif reads.ndim == 1:
        reads, writes, first = (a.reshape(1, -1) for a in (reads, writes, first))
        thread = None if thread is None else thread.reshape(1, -1)
        blk = None if blk is None else blk.reshape(1, -1)
    elif reads.ndim > 2:
        lead = (0,) * (reads.ndim - 2)
        reads, writes, first = reads[lead], writes[lead], first[lead]
        thread = None if thread is None else thread[lead]
        blk = None if blk is None else blk[lead]
    out = np.empty(reads.shape + (3,), dtype=np.float64)
    out[...] = COLORS["empty"]
    touched = reads | writes
    if color_by == "thread" and thread is not None:
        base = _hue_rgb(np.maximum(thread, 0)).astype(np.float64)
    elif color_by == "block" and blk is not None:
        base = _hue_rgb(np.maximum(blk, 0)).astype(np.float64)
    elif color_by == "order":
        frac = np.clip(first / max(1, steps - 1), 0, 1)[..., None]
        base = (1 - frac) * np.array([68, 1, 84.0]) + frac * np.array([253, 231, 37.0])
    else:
        base = np.empty_like(out)
        base[...] = COLORS["read"]
        base[writes & ~reads] = COLORS["write"]
        base[writes & reads] = COLORS["both"]
    out[touched] = base[touched]
    if time is not None and time >= 0:
        empty = np.array(COLORS["empty"], dtype=np.float64)
        later = touched & (first > time)
        out[later] = empty + (out[later] - empty) * 0.12
        past = touched & (first < time)  # before now: shown dimmer (the end of the trail)
        out[past] = empty + (out[past] - empty) * 0.45
    if region in ("touched", "auto") and touched.any():
        rows, cols = np.flatnonzero(touched.any(axis=1)), np.flatnonzero(touched.any(axis=0))
        box = (int(rows[0]), int(cols[0]), int(rows[-1] - rows[0] + 1), int(cols[-1] - cols[0] + 1))
        r0, c0, nr, nc = box if region == "touched" else view_box(touched.shape, box)
        out = out[r0 : r0 + nr, c0 : c0 + nc]
    return np.round(out).astype(np.uint8)


READABLE_CELL_PX = 6  # as js/access/data.ts: below this a whole buffer hides a small footprint


def view_box(shape: tuple, touched_box: tuple, max_px: int = 280) -> tuple[int, int, int, int]:
    """(r0, c0, rows, cols) the "auto" region shows (the rule of ``viewBox`` in js/access/data.ts):
    the whole 2-D slice when it is readable at ``max_px`` or the touched box with context is most
    of it, else the touched box widened by half its extent (at least 2) on each side."""
    rows, cols = shape
    if max(rows, cols) * READABLE_CELL_PX <= max_px:
        return 0, 0, rows, cols

    def widen(lo: int, n: int, size: int) -> tuple[int, int]:
        m = max(2, -(-n // 2))
        a, b = max(0, lo - m), min(size, lo + n + m)
        return a, b - a

    r0, c0, nr, nc = touched_box
    r0, nr = widen(r0, nr, rows) if rows > 1 else (0, 1)
    c0, nc = widen(c0, nc, cols)
    if nr * nc >= 0.5 * rows * cols:
        return 0, 0, rows, cols
    return r0, c0, nr, nc


def png_bytes(rgb: np.ndarray) -> bytes:
    """Encode an (h, w, 3) uint8 image as PNG (zlib only)."""
    rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
    h, w = rgb.shape[:2]
    raw = np.concatenate([np.zeros((h, 1), dtype=np.uint8), rgb.reshape(h, w * 3)], axis=1).tobytes()

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw, 6))
        + chunk(b"IEND", b"")
    )


def _auto_scale(shape: tuple) -> int:
    longest = max(shape[:2]) if len(shape) else 1
    return max(1, min(16, 256 // max(1, longest)))


def render_png(
    snap: dict,
    *,
    color_by: str = "access",
    time: int = -1,
    buffer: str | None = None,
    scale: int | None = None,
    region: str = "auto",
) -> bytes:
    fps = snap["footprints"]
    names = [buffer] if buffer else list(fps)
    if buffer and buffer not in fps:
        raise MlcLabError(f"there is no buffer {buffer!r}; buffers are {', '.join(fps)}")
    images = [heatmap_rgb(fps[n], color_by, time, snap["steps"], region) for n in names]
    k = scale or min(_auto_scale(im.shape) for im in images)
    images = [np.repeat(np.repeat(im, k, axis=0), k, axis=1) for im in images]
    gap = 8
    height = max(im.shape[0] for im in images)
    width = sum(im.shape[1] for im in images) + gap * (len(images) - 1)
    canvas = np.full((height, width, 3), 255, dtype=np.uint8)
    x = 0
    for im in images:
        canvas[: im.shape[0], x : x + im.shape[1]] = im
        x += im.shape[1] + gap
    return png_bytes(canvas)


def _stats_rows(fp: Any) -> list[tuple[str, str]]:
    s = fp.summary()
    strides = ", ".join(f"{k}: {'–' if v is None else v}" for k, v in s["strides"].items()) or "–"
    bounds = " × ".join("–" if b is None else f"[{b[0]}, {b[1]}]" for b in s["bounds"]) or "–"
    return [
        ("distinct elements", f"{s['distinct']:,}"),
        ("accesses", f"{s['accesses']:,} ({s['n_reads']:,} R / {s['n_writes']:,} W)"),
        ("64-byte cache lines", f"{s['cache_lines']:,}"),
        ("reuse", f"{s['reuse']:.2f} accesses/element"),
        ("bounds", bounds),
        ("strides (elements)", strides),
    ]


def render_html(
    snap: dict,
    *,
    color_by: str = "access",
    time: int = -1,
    title: str | None = None,
    scale: int | None = None,
    region: str = "auto",
) -> str:
    esc = html.escape
    at = ", ".join(f"{k}={v}" for k, v in snap["at"].items())
    head = title or f"Memory touched by loop {snap['loop']}"
    cards = []
    for name, fp in snap["footprints"].items():
        img = heatmap_rgb(fp, color_by, time, snap["steps"], region)
        k = scale or _auto_scale(img.shape)
        uri = "data:image/png;base64," + base64.b64encode(png_bytes(img)).decode("ascii")
        rows = "".join(f"<tr><th>{esc(a)}</th><td>{esc(b)}</td></tr>" for a, b in _stats_rows(fp))
        shape = "×".join(str(d) for d in fp.shape) or "scalar"
        cards.append(
            f'<div class="card"><h3>{esc(name)} <small>{esc(shape)} {esc(fp.dtype)} {esc(fp.scope)}</small></h3>'
            f'<img alt="{esc(name)}" src="{uri}" width="{img.shape[1] * k}" height="{img.shape[0] * k}">'
            f"<table>{rows}</table></div>"
        )
    gpu = ""
    if snap.get("gpu"):
        g = snap["gpu"]
        body = "".join(
            "<tr>"
            + "".join(
                f"<td>{esc(str(v))}</td>"
                for v in (
                    a.get("buffer"),
                    a.get("block"),
                    a.get("kind"),
                    a.get("scope"),
                    a.get("index"),
                    a.get("requests"),
                    _fmt(a.get("sectors_per_request")),
                    _fmt(a.get("efficiency"), pct=True),
                    a.get("wavefronts", "–"),
                    a.get("bank_conflicts", "–"),
                )
            )
            + "</tr>"
            for a in g.get("accesses", [])
        )
        gpu = (
            "<h2>One warp ("
            + esc(f"warp {g.get('warp')}, threads {g['threads'][0]}–{g['threads'][-1]}" if g.get("threads") else "")
            + ")</h2><table class='gpu'><tr><th>buffer</th><th>block</th><th>access</th><th>scope</th><th>index</th>"
            "<th>requests</th><th>sectors/request</th><th>sector efficiency</th><th>shared wavefronts</th>"
            f"<th>bank conflicts</th></tr>{body}</table>"
        )
    legend = "".join(
        f'<span class="key" style="background:rgb{COLORS[k]}"></span>{k} ' for k in ("read", "write", "both")
    )
    when = f"; step {time} of {snap['steps']}" if time is not None and time >= 0 else f"; {snap['steps']:,} steps"
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>{esc(head)}</title><style>
body{{font:13px system-ui,sans-serif;margin:16px;color:#222}} .cards{{display:flex;flex-wrap:wrap;gap:16px}}
.card{{border:1px solid #ddd;border-radius:6px;padding:8px}} .card h3{{margin:0 0 6px}} small{{color:#666;font-weight:normal}}
img{{image-rendering:pixelated;display:block;border:1px solid #ccc}} table{{border-collapse:collapse;margin-top:6px}}
th,td{{text-align:left;padding:1px 8px 1px 0;font-weight:normal}} th{{color:#666}} table.gpu td,table.gpu th{{border-bottom:1px solid #eee}}
.key{{display:inline-block;width:10px;height:10px;margin:0 3px 0 8px}}</style></head><body>
<h1>{esc(head)}</h1><p>enclosing loops: {esc(at or "none")}{esc(when)}; colour: {esc(color_by)} {legend if color_by == "access" else ""}</p>
<div class="cards">{"".join(cards)}</div>{gpu}</body></html>"""


def _fmt(v: Any, pct: bool = False) -> str:
    if v is None:
        return "–"
    return f"{100 * v:.0f}%" if pct else f"{v:.2f}".rstrip("0").rstrip(".")
