"""What this machine can do, as data: the roofline's figures (``mlc_lab.core.machine`` measures them in
the worker, caches and re-checks them; this is the one type the worker's answer decodes into)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from mlc_lab.model.measure import QUIET_CORES

__all__ = ["Machine"]


@dataclass(frozen=True)
class Machine:
    cpu: str
    cores: int
    threads: int
    vector_isa: str
    fp32_lanes: int
    peak_gflops: float
    bandwidth_gbs: float
    caches: list = field(default_factory=list)  # [{level, type, bytes, shared_cpu_list}]
    gpu: dict = field(default_factory=dict)  # {"present": False, "note": ...} without a GPU
    target: str = ""
    peak_kernel: str = ""
    bandwidth_kernel: str = ""
    load: float | None = None  # 1-minute load average while it was measured
    tvm: str = ""
    peak_one_core_gflops: float | None = None  # the FMA kernel on one core alone
    peak_all_cores_gflops: float | None = None  # the FMA kernel on all cores at once, as measured
    peak_source: str = ""  # "all cores at once", or why threads x the one-core figure was taken
    bandwidth_one_core_gbs: float | None = None  # the triad on one core
    bandwidth_all_cores_gbs: float | None = None  # the triad on all cores (bandwidth_gbs: the higher)
    others_cores: float | None = None  # cores other processes used while it was measured
    measured_at: float | None = None  # time.time() of the measurement
    peak_note: str = ""  # set when the peak was raised to a figure a real kernel reached

    @property
    def measured_quiet(self) -> bool:
        return self.others_cores is not None and self.others_cores < QUIET_CORES

    def when(self) -> str:
        """When and under what load the figures were measured, in words."""
        import time as _time

        at = (
            _time.strftime("%Y-%m-%d %H:%M UTC", _time.gmtime(self.measured_at))
            if self.measured_at
            else "an unknown time"
        )
        busy = (
            "other processes' CPU use unknown"
            if self.others_cores is None
            else f"other processes used {self.others_cores:.2f} cores meanwhile"
        )
        return f"measured {at} ({busy}; load {self.load})"

    @property
    def ridge_intensity(self) -> float:
        """FLOPs per byte where the roofline bends: below it a kernel is bound by memory."""
        return self.peak_gflops / self.bandwidth_gbs if self.bandwidth_gbs else float("inf")

    def roof_gflops(self, intensity: float) -> float:
        """The attainable GFLOP/s at `intensity` FLOPs per byte."""
        return min(self.peak_gflops, self.bandwidth_gbs * intensity)

    def cache_bytes(self, level: int) -> int | None:
        return next((c["bytes"] for c in self.caches if c["level"] == level and c["type"] != "instruction"), None)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Machine:
        """A machine from its cache file or the worker's answer (keys of no field are dropped)."""
        return cls(**{k: v for k, v in data.items() if k in _FIELDS})

    __wire_properties__ = ("ridge_intensity",)  # sent with the fields (see to_json)

    def to_json(self) -> dict:
        out = asdict(self)
        out["ridge_intensity"] = self.ridge_intensity
        return out

    def __str__(self) -> str:
        l3 = self.cache_bytes(3)
        gpu = "no GPU" if not self.gpu.get("present") else str(self.gpu.get("device_name", "GPU"))
        return (
            f"{self.cpu}: {self.threads} threads, {self.vector_isa} ({self.fp32_lanes} fp32 lanes), "
            f"peak {self.peak_gflops:.0f} GFLOP/s, {self.bandwidth_gbs:.1f} GB/s"
            + (f", L3 {l3 / 2**20:.0f} MiB" if l3 else "")
            + f"; {gpu}; {self.when()}"
        )


_FIELDS = frozenset(Machine.__dataclass_fields__)
