"""What a check judges against (``Target``) and what a named check is (``Check``); the verdicts,
hazards and reports are plain data of the contract (``mlc_lab.model.checks``), re-exported here.

Re-exported by ``mlc_lab.core.checks`` (the API); the checks themselves are in ``check_rules``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from mlc_lab.errors import MlcLabError
from mlc_lab.model.checks import HAZARD_KINDS, CheckReport, CheckResult, Hazard

__all__ = ["HAZARD_KINDS", "Check", "CheckReport", "CheckResult", "Hazard", "Target"]


# --- targets ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """What a check judges against: ``kind`` "cpu" or "cuda", and the limits of one thread block."""

    kind: str
    arch: str | None = None
    max_threads_per_block: int = 1024
    max_shared_memory_per_block: int = 48 * 1024
    registers_per_thread: int = 255
    warp_size: int = 32

    @classmethod
    def of(cls, target: Any) -> "Target":
        """ "cpu", "cuda", an arch such as "sm_75", or a dict like ``{"kind": "cuda", "arch": "sm_75"}``."""
        if isinstance(target, Target):
            return target
        if isinstance(target, str):
            t = target.strip()
            if t in ("cpu", "llvm"):
                return cls("cpu")
            if t == "cuda":
                return cls("cuda")
            if t.startswith("sm_") and t[3:].isdigit():
                return cls("cuda", arch=t)
            raise MlcLabError(f"the target must be 'cpu', 'cuda' or a CUDA arch such as 'sm_80', not {target!r}")
        if isinstance(target, dict):
            kind = str(target.get("kind", "cuda"))
            if kind in ("llvm", "cpu"):
                return cls("cpu")
            if kind != "cuda":
                raise MlcLabError(f"checks judge 'cpu' or 'cuda' targets, not kind {kind!r}")
            arch = target.get("arch")
            return cls(
                "cuda",
                arch=str(arch) if arch else None,
                max_threads_per_block=int(target.get("max_threads_per_block", 1024)),
                max_shared_memory_per_block=int(target.get("max_shared_memory_per_block", 48 * 1024)),
                registers_per_thread=int(target.get("registers_per_thread", 255)),
                warp_size=int(target.get("thread_warp_size", 32)),
            )
        raise MlcLabError(f"the target must be 'cpu', 'cuda', a CUDA arch or a dict, not {type(target).__name__}")

    @property
    def gpu(self) -> bool:
        return self.kind == "cuda"


@dataclass(frozen=True)
class Check:
    """A named check: ``target`` is the kind of target it applies to ("cuda" or "cpu"); ``run`` takes
    the facts of a step (``mlc_lab.core.checks.facts.StepFacts``) and returns a CheckResult, or None when
    the program has nothing it could apply to (no reduction, no epilogue)."""

    name: str
    target: str
    title: str
    run: Callable[[Any], "CheckResult | None"]
