"""The memory-access analysis, in plain data (numpy only; no TVM).

``mlc_lab.tvm.access`` lowers a PrimFunc into an :class:`AccessProgram` once; here that program
is analysed: which elements of every buffer a loop touches, when, how often and by which GPU
thread (:func:`footprint`), and how one warp's requests coalesce or conflict (:func:`gpu_stats`).

Modules: ``program`` (the plain IR), ``expr`` (evaluation and affine decomposition), ``space``
(the iteration space of a query), ``grid`` (one access over its relevant digits), ``accumulate``
(per-buffer accumulation), ``footprint`` and ``gpu`` (the entry points), ``model`` (the results),
``shapes`` (symbolic shapes), ``budget`` (the memory budget).
"""

from mlc_lab.core.access.budget import BUDGET_BYTES, AnalysisCancelled, Budget
from mlc_lab.core.access.footprint import footprint
from mlc_lab.core.access.gpu import gpu_stats
from mlc_lab.core.access.model import Footprint, GpuStats, LoopFootprint, WarpAccess
from mlc_lab.model.access.program import Access, AccessProgram, BufferInfo, Const, Leaf, Loop, Op, Opaque, Seq, Var, op
from mlc_lab.errors import AccessAnalysisError

__all__ = [
    "AccessAnalysisError",
    "AnalysisCancelled",
    "AccessProgram",
    "Access",
    "BufferInfo",
    "Budget",
    "BUDGET_BYTES",
    "Const",
    "Footprint",
    "GpuStats",
    "Leaf",
    "Loop",
    "LoopFootprint",
    "Op",
    "Opaque",
    "Seq",
    "Var",
    "WarpAccess",
    "footprint",
    "gpu_stats",
    "op",
]
