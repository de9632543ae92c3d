"""A measurement: one timing of one program, and the one rule that says whether it was taken quietly.

The worker returns it (as its JSON), ``mlc_lab.core.measure`` reads it back with :meth:`Measurement.from_json`,
the Session keeps it per step, and the explorer sends :meth:`Measurement.to_json` to the page unchanged.
``js/lib/model.ts`` is generated from this dataclass (``python -m mlc_lab.core.model_ts``), so a field added
here reaches the page's type; a field whose metadata says :func:`hover` is also listed in the explorer's hover
text (``MEASUREMENT_HOVER`` in the generated file), with no edit on the TypeScript side.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from mlc_lab.model.errors import ErrorKind

__all__ = ["Measurement", "PARALLEL_FLOOR", "QUIET_CORES", "STEADY_SPREAD", "hover", "quiet", "spread"]
# What js/lib/model.ts gets of this module, in order (python -m mlc_lab.core.model_ts).
WIRE = ("Measurement",)

QUIET_CORES = 0.25  # below this, a measurement counts as taken on a quiet machine
PARALLEL_FLOOR = 0.8  # and with at least this share of its cores' speed (mlc_lab.tvm.machine.parallel_speed)
# and steady: the repeats' interquartile range at most this share of their median. A figure whose
# own repeats spread wider was disturbed by something no other probe saw (on this project's VM: a
# 512^3 kernel's repeats with a median of 2.85 ms and an interquartile range of 1.64 ms within one
# 0.2 s measurement, others_cores 0.10, parallel_speed 1.0).
STEADY_SPREAD = 0.10
# The thresholds the page words its hover text by; written into js/lib/model.ts.
CONSTANTS = {"QUIET_CORES": QUIET_CORES, "PARALLEL_FLOOR": PARALLEL_FLOOR, "STEADY_SPREAD": STEADY_SPREAD}


def spread(iqr_s: float | None, median_s: float | None) -> float | None:
    """The repeats' interquartile range over their median (None: not known)."""
    if iqr_s is None or not median_s:
        return None
    return iqr_s / median_s


def quiet(cores: float | None, parallel_speed: float | None = None, spread: float | None = None) -> bool | None:
    """The one rule for a quiet figure: other processes used under `QUIET_CORES`, the process got
    at least `PARALLEL_FLOOR` of its cores' speed where that was probed, and the repeats spread at
    most `STEADY_SPREAD` where known (None: not known)."""
    if cores is None:
        return None
    return (
        cores < QUIET_CORES
        and (parallel_speed is None or parallel_speed >= PARALLEL_FLOOR)
        and (spread is None or spread <= STEADY_SPREAD)
    )


def hover(label: str, unit: str = "") -> dict:
    """Field metadata: show the field in the explorer's hover text as ``label: value unit``
    (``unit`` "s" formats seconds as "2.63 ms")."""
    return {"hover": {"label": label, "unit": unit}}


@dataclass
class Measurement:
    """One timing of one program. Times are seconds; `error` is set (and the numbers are empty)
    when the program could not be built, checked or run."""

    latency_s: float | None = None  # median of the repeats
    std_s: float | None = None
    repeats: int = 0
    flops: float = 0.0
    gflops: float | None = None
    max_abs_error: float | None = None  # against the reference program on random inputs
    target: str = ""
    error: str | None = None
    error_kind: ErrorKind | None = None  # mlc_lab.model.errors.ERROR_KINDS
    min_s: float | None = None
    max_s: float | None = None
    results_s: list[float] = field(default_factory=list)
    max_rel_error: float | None = None
    correct: bool | None = None  # max_abs_error within 1e-3 of the output's magnitude
    build_s: float | None = field(default=None, metadata=hover("build", "s"))
    func_name: str | None = None
    iqr_s: float | None = None  # interquartile range of the repeats: the spread
    threads: int | None = None  # TVM's worker threads (CPU)
    cache: str = "warm"  # "warm" or "cold": see mlc_lab.tvm.measure
    method: str = ""  # the timing method in one sentence
    load: float | None = None  # the machine's 1-minute load average when it was measured
    others_cores: float | None = None  # CPU time other processes used while it was timed, in cores
    # the share of its cores' speed the process got right after timing (1.0 full; ~0.5 on 2 threads:
    # the cores were shared, e.g. by a VM's host, which others_cores cannot see); CPU, >1 thread
    parallel_speed: float | None = None
    rounds: int | None = None  # rounds of repeats taken (again while not quiet: mlc_lab.tvm.measure)
    bytes: float | None = None  # memory traffic for the roofline: see bytes_source
    bytes_source: str = ""  # "footprint: ..." (the whole function's distinct bytes) or "compulsory: ..."
    bytes_by_buffer: dict[str, float] = field(default_factory=dict)  # the footprint's bytes per buffer
    intensity: float | None = None  # FLOPs per byte
    peak_gflops: float | None = None  # the machine's roofline at this intensity
    fraction_of_peak: float | None = None  # gflops / peak_gflops
    machine_peak_gflops: float | None = None  # the roof itself (mlc_lab.machine()), for plots
    machine_bandwidth_gbs: float | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def quiet(self) -> bool | None:
        """Whether the machine was quiet while this was timed: other processes used under a quarter
        of a core, the process got its cores' full speed (`parallel_speed`, when probed), and the
        repeats agreed (interquartile range within 10% of the median). Only then is a figure
        comparable with another one taken elsewhere."""
        return quiet(self.others_cores, self.parallel_speed, spread(self.iqr_s, self.latency_s))

    def to_json(self) -> dict:
        """The one encoding of a measurement (plain JSON: the worker, widgets, files, the CLI)."""
        return asdict(self)

    to_dict = to_json  # the older name

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Measurement:
        """A measurement from its encoding. Keys it does not declare are left out: the worker's
        timing dict carries working figures (``number``) that are no part of the measurement."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})
