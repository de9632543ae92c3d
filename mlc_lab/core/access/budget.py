"""A memory budget for one analysis: every large array is accounted for before it is allocated."""

from __future__ import annotations

from mlc_lab.errors import AccessAnalysisError

BUDGET_BYTES = 512 << 20


class BudgetExceeded(AccessAnalysisError):
    """An array the analysis would need does not fit its memory budget."""


class Budget:
    def __init__(self, limit: int = BUDGET_BYTES):
        self.limit = int(limit)
        self.used = 0

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
