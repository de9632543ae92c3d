"""What the memory view receives: the footprint payload and the warp statistics (plain data, one encoding).

``mlc_lab.widgets.access.view`` builds these (``footprint_payload``, ``gpu_payload``) from the access
analysis of ``mlc_lab.core.access``; the TypeScript types in ``js/lib/model.ts`` are generated from here
(``python -m mlc_lab.core.model_ts``) and read by ``js/access/data.ts`` and ``js/access/panel.ts``.
The footprint's arrays travel as binary buffers beside the JSON: ``ArrayDescr`` says where each is.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal, NotRequired, TypedDict

__all__ = [
    "ArrayDescr",
    "BufferArrays",
    "BufferPayload",
    "BufferStats",
    "CropBox",
    "EnclosingLoop",
    "FootprintResult",
    "GpuStats",
    "LoopInfo",
    "WarpAccess",
]
# What js/lib/model.ts gets of this module, in order (python -m mlc_lab.core.model_ts).
WIRE = (
    "LoopInfo",
    "EnclosingLoop",
    "ArrayDescr",
    "BufferArrays",
    "BufferStats",
    "CropBox",
    "BufferPayload",
    "FootprintResult",
    "WarpAccess",
    "GpuStats",
)


class LoopInfo(TypedDict):
    """A loop as the memory view names it."""

    name: str
    ref: str  # the qualified name: what requests use
    extent: int | None
    min: int
    thread: str | None
    loop_kind: str | None


class EnclosingLoop(LoopInfo):
    """A loop around the one shown, with the value the analysis fixed it at."""

    value: int


class ArrayDescr(TypedDict):
    """One array of a footprint: the index of its binary buffer and how to read it."""

    buffer: int
    dtype: str  # bits | int8 | int16 | int32 | uint8 | uint16 | uint32 | float64
    size: int  # elements
    nbytes: int
    enc: NotRequired[Literal["deflate"]]


class BufferArrays(TypedDict, total=False):
    """The arrays of one buffer over its crop box (none when it is untouched; thread/block on GPU)."""

    reads: ArrayDescr
    writes: ArrayDescr
    first_touch: ArrayDescr
    count: ArrayDescr
    thread: ArrayDescr
    block: ArrayDescr


class BufferStats(TypedDict):
    """What one loop does to one buffer, in numbers (mlc_lab.core.access.Footprint.summary)."""

    buffer: str
    shape: list[int]
    dtype: str
    scope: str
    itemsize: int
    distinct: int
    accesses: int
    n_reads: int
    n_writes: int
    reuse: float
    cache_lines: int
    bounds: list[tuple[int, int] | None]  # per dimension: the touched [min, max], None untouched
    strides: dict[str, int | None]


class CropBox(TypedDict):
    offset: list[int]
    shape: list[int]
    # per dimension, buffer elements per array element: a crop too large to draw whole is sent
    # pooled (each array element stands for a block: its earliest touch, any read, any write)
    pool: NotRequired[list[int]]


class BufferPayload(BufferStats):
    """A buffer's statistics and its arrays over the touched box."""

    crop: CropBox
    arrays: BufferArrays


class FootprintResult(TypedDict):
    """The footprint of one loop (the JSON half of ``access_footprint``'s answer)."""

    loop: LoopInfo
    enclosing: list[EnclosingLoop]
    at: dict[str, int]
    # (these two are absent from the replies that notebooks saved by older versions recorded)
    swept: NotRequired[list[str]]  # enclosing threadIdx loops run over every thread (not fixed at `at`)
    shape_vars: NotRequired[dict[str, int]]  # the values of symbolic shapes the analysis used
    steps: int
    gpu: bool
    launch: dict[str, int]
    buffers: list[BufferPayload]


@dataclass
class WarpAccess:
    """One access of a block body, as one warp issues it (Nsight Compute vocabulary)."""

    buffer: str
    block: str
    kind: str  # read / write / read+write
    scope: str
    index: str
    requests: int  # warp-level instructions over the loop's iterations
    lanes: int  # threads x vector lanes in one request
    vector: int
    active_lanes: float
    sectors_per_request: float | None = None  # global memory: 32-byte sectors per request
    sectors: int | None = None
    efficiency: float | None = None  # bytes asked for / bytes of the sectors moved
    wavefronts: int | None = None  # shared memory
    bank_conflicts: int | None = None  # extra wavefronts over the ideal
    ways: float | None = None  # mean of the worst n-way conflict per request
    max_ways: int | None = None
    layout: dict | None = None  # shared: compacted shape/strides used for banks
    note: str | None = None

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class GpuStats:
    """Per-access warp statistics of one warp (the answer of ``access_gpu_stats``)."""

    warp: int
    threads: list[int]
    launch: dict[str, int]
    accesses: list[WarpAccess]

    def to_json(self) -> dict:
        return {
            "warp": self.warp,
            "threads": list(self.threads),
            "launch": dict(self.launch),
            "accesses": [a.to_json() for a in self.accesses],
        }
