"""A plot of a parameter sweep: latency against the parameter (``mlc_lab.core.measure.sweep``).

>>> results = sweep(lambda j: schedule_with_jfactor(j), [1, 2, 4, 8, 16, 32, 64, 128])
>>> sweep_figure(results, param="jfactor")          # a plotly figure: shows itself in JupyterLab
>>> sweep_html(results, "sweep.html", param="jfactor")   # a self-contained page (plotly.js inlined)

Plain data in: each result is ``(value, measurement)`` where the measurement has ``latency_s`` and,
when known, ``min_s``/``max_s``, ``gflops`` and ``error`` (a ``Measurement`` or a dict alike).
No TVM here, and plotly is imported only when a figure is made.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

BEST = "#ff7f0e"
POINT = "#1f77b4"
FAILED = "#d62728"


def _get(m: Any, name: str) -> Any:
    return m.get(name) if isinstance(m, dict) else getattr(m, name, None)


def sweep_points(results: Iterable[tuple[Any, Any]]) -> list[dict]:
    """The sweep as plain rows: value, latency_s (None when it failed), min_s, max_s, gflops, error."""
    rows = []
    for value, m in results:
        lat = _get(m, "latency_s")
        err = _get(m, "error")
        ok = lat is not None and not err and math.isfinite(lat)
        rows.append(
            {
                "value": value,
                "latency_s": float(lat) if ok else None,
                "min_s": _get(m, "min_s") if ok else None,
                "max_s": _get(m, "max_s") if ok else None,
                "gflops": _get(m, "gflops") if ok else None,
                "intensity": _get(m, "intensity") if ok else None,
                "fraction_of_peak": _get(m, "fraction_of_peak") if ok else None,
                "error": None if ok else str(err or "no latency measured"),
            }
        )
    return rows


def _unit(seconds: float) -> tuple[str, float]:
    if seconds < 1e-3:
        return "µs", 1e6
    if seconds < 1:
        return "ms", 1e3
    return "s", 1.0


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _log2_axis(values: list[Any]) -> bool:
    """Numbers like 1, 2, 4, ... 128 read best on a log axis; a few close numbers do not."""
    if not values or not all(_is_number(v) and v > 0 for v in values):
        return False
    return max(values) / min(values) >= 8


@dataclass(frozen=True)
class _Axes:
    """How a sweep's rows are placed: the parameter's name, the latency unit and its scale, and
    whether the swept values are labels (categorical) or numbers (on a log axis when `log_x`)."""

    param: str
    unit: str
    scale: float
    categorical: bool
    log_x: bool

    def x(self, row: dict) -> Any:
        return str(row["value"]) if self.categorical else row["value"]

    def y(self, row: dict) -> float:
        return row["latency_s"] * self.scale


def sweep_figure(
    results: Iterable[tuple[Any, Any]], *, param: str = "value", title: str | None = None, height: int = 380
) -> Any:
    """Latency (with min-max bars) against the swept value; the best marked, failures shown in red."""
    import plotly.graph_objects as go

    rows = sweep_points(results)
    ok = [r for r in rows if r["latency_s"] is not None]
    failed = [r for r in rows if r["latency_s"] is None]
    unit, scale = _unit(min((r["latency_s"] for r in ok), default=1e-3))
    values = [r["value"] for r in rows]
    axes = _Axes(param, unit, scale, not all(_is_number(v) for v in values), _log2_axis(values))
    if not axes.categorical:  # the line joins neighbours in value, whatever order the sweep ran in
        ok.sort(key=lambda r: r["value"])
    fig = go.Figure()
    fig.add_trace(_latency_trace(go, ok, axes))
    if ok:
        _mark_best(go, fig, min(ok, key=lambda r: r["latency_s"]), axes)
    if failed:
        fig.add_trace(_failed_trace(go, failed, ok, axes))
    fig.update_layout(**_sweep_layout(values, ok, axes, title, height))
    return fig


def _latency_trace(go: Any, ok: list[dict], axes: _Axes) -> Any:
    """The measured values joined by a line, with min-max bars when every one has them."""

    def hover(r: dict) -> str:
        text = f"{axes.param} = {r['value']}<br>{axes.y(r):.4g} {axes.unit}"
        return text + (f"<br>{r['gflops']:.1f} GFLOPS" if r.get("gflops") else "")

    error_y = None
    if ok and all(r["min_s"] is not None and r["max_s"] is not None for r in ok):
        error_y = {
            "type": "data",
            "symmetric": False,
            "thickness": 1,
            "width": 3,
            "color": "rgba(31,119,180,0.5)",
            "array": [(r["max_s"] - r["latency_s"]) * axes.scale for r in ok],
            "arrayminus": [(r["latency_s"] - r["min_s"]) * axes.scale for r in ok],
        }
    return go.Scatter(
        x=[axes.x(r) for r in ok],
        y=[axes.y(r) for r in ok],
        mode="lines+markers",
        name="latency",
        line={"color": POINT, "width": 2},
        marker={"size": 8, "color": POINT},
        text=[hover(r) for r in ok],
        hovertemplate="%{text}<extra></extra>",
        error_y=error_y,
    )


def _mark_best(go: Any, fig: Any, best: dict, axes: _Axes) -> None:
    """A star on the fastest value, and a label above it saying which it is."""
    bx = axes.x(best)
    fig.add_trace(
        go.Scatter(
            x=[bx],
            y=[axes.y(best)],
            mode="markers",
            name="best",
            marker={"symbol": "star", "size": 16, "color": BEST, "line": {"color": "white", "width": 1}},
            hoverinfo="skip",
        )
    )
    label = f"best: {axes.param} = {best['value']}, {axes.y(best):.4g} {axes.unit}"
    if best.get("gflops"):
        label += f" ({best['gflops']:.1f} GFLOPS)"
    fig.add_annotation(  # annotations on a log axis are placed in log10 units
        x=math.log10(float(bx)) if axes.log_x else bx,
        y=math.log10(axes.y(best)),
        text=label,
        showarrow=True,
        arrowhead=0,
        ax=0,
        ay=-44,
        font={"color": BEST},
        bgcolor="rgba(255,255,255,0.85)",
    )


def _failed_trace(go: Any, failed: list[dict], ok: list[dict], axes: _Axes) -> Any:
    """The values that failed, as red crosses below the lowest latency, each with its error."""
    low = min((axes.y(r) for r in ok), default=1.0) * 0.8
    return go.Scatter(
        x=[axes.x(r) for r in failed],
        y=[low] * len(failed),
        mode="markers",
        name=f"failed ({len(failed)})",
        marker={"symbol": "x", "size": 11, "color": FAILED},
        text=[f"{axes.param} = {r['value']} failed<br>{_short(r['error'])}" for r in failed],
        hovertemplate="%{text}<extra></extra>",
    )


def _sweep_layout(values: list[Any], ok: list[dict], axes: _Axes, title: str | None, height: int) -> dict:
    """The figure's layout: the swept values on x (every one ticked on a log axis of up to 16),
    latency on a log y axis with written-out ticks."""
    xaxis: dict[str, Any] = {"title": {"text": axes.param}, "zeroline": False}
    if axes.log_x:
        few = len(values) <= 16
        xaxis.update(type="log", tickvals=values if few else None, ticktext=[str(v) for v in values] if few else None)
    ys = [axes.y(r) for r in ok] + [r["max_s"] * axes.scale for r in ok if r["max_s"]]
    return {
        "title": {"text": title or f"latency against {axes.param}", "x": 0.02},
        "template": "plotly_white",
        "height": height,
        "margin": {"l": 64, "r": 20, "t": 56, "b": 48},
        "xaxis": xaxis,
        "yaxis": {
            "title": {"text": f"latency ({axes.unit}, lower is better)"},
            "type": "log",
            "zeroline": False,
            **_log_ticks(ys),
        },
        "legend": {"orientation": "h", "x": 1, "xanchor": "right", "y": 1.02, "yanchor": "bottom"},
        "hovermode": "closest",
    }


def roofline_figure(
    results: Iterable[tuple[Any, Any]],
    *,
    param: str = "value",
    title: str | None = None,
    height: int = 380,
    machine: Any = None,
) -> Any:
    """The sweep on the machine's roofline (log-log: FLOPs per byte against GFLOP/s), each value a
    point, the roof from `mlc_lab.machine()` (or the figures the measurements carry)."""
    import plotly.graph_objects as go

    results = list(results)
    rows = [r for r in sweep_points(results) if r["gflops"] and r["intensity"]]
    peak = bw = None
    if machine is not None:
        peak, bw = machine.peak_gflops, machine.bandwidth_gbs
    else:
        for _, m in results:
            if _get(m, "machine_peak_gflops") and _get(m, "machine_bandwidth_gbs"):
                peak, bw = _get(m, "machine_peak_gflops"), _get(m, "machine_bandwidth_gbs")
                break
    fig = go.Figure()
    xs = [r["intensity"] for r in rows]
    if peak and bw:
        ridge = peak / bw
        lo, hi = min(xs + [ridge]) / 8, max(xs + [ridge]) * 8
        fig.add_trace(
            go.Scatter(
                x=[lo, ridge, hi],
                y=[bw * lo, peak, peak],
                mode="lines",
                hoverinfo="skip",
                name=f"roof: {peak:.0f} GFLOP/s, {bw:.1f} GB/s",
                line={"color": FAILED, "width": 2},
            )
        )
    if rows:
        best = max(rows, key=lambda r: r["gflops"])
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=[r["gflops"] for r in rows],
                mode="markers+text",
                name=param,
                text=[str(r["value"]) for r in rows],
                textposition="top center",
                marker={
                    "size": [14 if r is best else 9 for r in rows],
                    "color": [BEST if r is best else POINT for r in rows],
                },
                customdata=[f"{(r['fraction_of_peak'] or 0) * 100:.1f}%" for r in rows],
                hovertemplate=f"{param} = %{{text}}<br>%{{y:.1f}} GFLOP/s at %{{x:.2f}} FLOPs/byte<br>%{{customdata}} of the roof<extra></extra>",
            )
        )
    fig.update_layout(
        title={"text": title or f"{param} on the roofline", "x": 0.02},
        template="plotly_white",
        height=height,
        margin={"l": 64, "r": 20, "t": 56, "b": 48},
        xaxis={"title": {"text": "arithmetic intensity (FLOPs per byte)"}, "type": "log"},
        yaxis={"title": {"text": "GFLOP/s (higher is better)"}, "type": "log"},
        legend={"orientation": "h", "x": 1, "xanchor": "right", "y": 1.02, "yanchor": "bottom"},
    )
    return fig


def sweep_html(results: Iterable[tuple[Any, Any]], path: str | Path | None = None, **kwargs: Any) -> str:
    """A self-contained HTML page of the sweep plot (plotly.js inlined: opens offline)."""
    html = sweep_figure(results, **kwargs).to_html(include_plotlyjs=True, full_html=True)
    if path is not None:
        Path(path).write_text(html, encoding="utf-8")
    return html


def _log_ticks(values: list[float]) -> dict:
    """1, 2 and 5 of each decade, written out ("200", "0.05"): plotly labels its minor log ticks with a
    bare digit."""
    vals = [v for v in values if v and v > 0 and math.isfinite(v)]
    if not vals:
        return {}
    lo, hi = min(vals) / 3, max(vals) * 3  # plotly draws only those inside the range it picks
    ticks = [
        float(f"{m * 10.0**k:.1g}")
        for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
        for m in (1, 2, 5)
        if lo <= m * 10.0**k <= hi
    ]
    if len(ticks) > 13:
        ticks = [t for t in ticks if f"{t:g}".lstrip("0.").startswith("1")]
    if len(ticks) < 2:
        return {}
    return {"tickvals": ticks, "ticktext": [f"{t:g}" if t < 1 else str(round(t)) for t in ticks]}


def _short(text: str | None, limit: int = 200) -> str:
    line = next((ln.strip() for ln in (text or "").splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


class SweepResult(list):
    """The ``(value, Measurement)`` pairs of a sweep; shows itself as the latency plot in a notebook."""

    def __init__(self, results: Iterable[tuple[Any, Any]], param: str = "value"):
        super().__init__(results)
        self.param = param

    def figure(self, **kwargs: Any) -> Any:
        kwargs.setdefault("param", self.param)
        return sweep_figure(self, **kwargs)

    def roofline(self, **kwargs: Any) -> Any:
        """The sweep's points on the machine's roofline (a plotly figure)."""
        kwargs.setdefault("param", self.param)
        return roofline_figure(self, **kwargs)

    def to_html(self, path: str | Path | None = None, **kwargs: Any) -> str:
        kwargs.setdefault("param", self.param)
        return sweep_html(self, path, **kwargs)

    def best(self) -> tuple[Any, Any] | None:
        ok = [(v, m) for v, m in self if _get(m, "latency_s") is not None and not _get(m, "error")]
        return min(ok, key=lambda vm: _get(vm[1], "latency_s")) if ok else None

    def _repr_mimebundle_(self, **_kwargs: Any) -> dict:
        # JupyterLab draws plotly's own MIME type offline (the renderer ships with plotly).
        import plotly.io as pio

        bundle = pio.renderers["plotly_mimetype"].to_mimebundle(self.figure().to_dict())
        bundle["text/plain"] = f"<sweep of {len(self)} {self.param} values; best: {self._best_text()}>"
        return bundle

    def _best_text(self) -> str:
        best = self.best()
        if best is None:
            return "none succeeded"
        return f"{self.param}={best[0]} at {_get(best[1], 'latency_s') * 1e3:.3f} ms"


def sweep(make: Any, values: Iterable[Any], target: Any = "cpu", *, param: str = "value", **kwargs: Any) -> SweepResult:
    """Measure ``make(value)`` (a Session or module) for every value and plot latency against it."""
    from mlc_lab.core.measure import sweep as measure_sweep

    return SweepResult(measure_sweep(make, list(values), target, **kwargs), param=param)
