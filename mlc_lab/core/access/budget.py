"""A memory budget for one analysis: every large array is accounted for before it is allocated.

The budget also carries the analysis's control: ``cancelled`` (asked between the parts of the
work: an access's grid, a slice, a buffer) and ``progress`` (told ``(done, total)`` parts)."""

from __future__ import annotations

from collections.abc import Callable

from mlc_lab.errors import AccessAnalysisError

BUDGET_BYTES = 512 << 20


class BudgetExceeded(AccessAnalysisError):
    """An array the analysis would need does not fit its memory budget."""


class AnalysisCancelled(AccessAnalysisError):
    """The analysis was cancelled (by the person, or by a newer request) before it finished."""

    kind = "cancelled"


class Budget:
    def __init__(
        self,
        limit: int = BUDGET_BYTES,
        *,
        cancelled: Callable[[], bool] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ):
        self.limit = int(limit)
        self.used = 0
        self.cancelled = cancelled
        self.progress = progress

    def stop_if_cancelled(self) -> None:
        if self.cancelled is not None and self.cancelled():
            raise AnalysisCancelled("the analysis was cancelled before it finished")

    def tick(self, done: int, total: int) -> None:
        """Between two parts of the work: stop here when cancelled, else report how far it is."""
        self.stop_if_cancelled()
        if self.progress is not None:
            self.progress(done, total)

    def check(self, nbytes: int, what: str) -> None:
        """Refuse ``what`` when it would not fit next to what is already held."""
        if self.used + nbytes > self.limit:
            raise BudgetExceeded(
                f"{what} needs {_mb(nbytes)} of memory, beyond the analysis's budget of {_mb(self.limit)} "
                f"({_mb(self.used)} already held); pick an inner loop or fix more enclosing loops"
            )

    def take(self, nbytes: int, what: str) -> None:
        self.check(nbytes, what)
        self.used += nbytes


def _mb(n: int) -> str:
    return f"{n / (1 << 20):.0f} MB" if n >= 1 << 20 else f"{n / 1024:.0f} kB"
