"""One worker's budget of buffered bytes: request bodies received and response arrays not yet sent.

The concurrency limit bounds how many requests run, not how much memory they hold: a client
that sends its body slowly, or stops reading a large response, keeps its bytes in the worker.
Every such byte is taken from this budget (`limits.max_buffered_bytes`) while it is held and
given back when the request ends; a request that would go over it is refused with 503 and
Retry-After instead of growing the worker. Bodies are charged as their bytes arrive (a declared
Content-Length reserves nothing, so headers alone cannot exhaust it); a response is charged its
array's upper bound before it is computed, then its real size until its last byte is sent.
The worker's caches hold their bytes from the same budget (`hold_cached`, caches.py), so what
they keep is memory requests cannot take: `held` counts both, `cached` the caches' part.
Used only from the event-loop thread.
"""

from __future__ import annotations

from ..api.errors import HttpError


class MemoryBudget:
    def __init__(self, limit: int):
        self.limit = limit
        self.held = 0
        self.cached = 0  # the part of `held` the caches keep

    def take(self, nbytes: int, what: str) -> Reservation:
        reservation = Reservation(self)
        if nbytes:  # nothing asked, nothing refused (the caches may hold the budget up to its limit)
            reservation.grow(nbytes, what)
        return reservation

    def try_take(self, nbytes: int) -> bool:
        """Hold `nbytes` if they fit (True), for a caller that gives them back itself (give_back) and,
        when they do not fit, lets another path refuse the request."""
        if self.held + nbytes > self.limit:
            return False
        self.held += nbytes
        return True

    def give_back(self, nbytes: int) -> None:
        self.held -= nbytes

    def hold_cached(self, nbytes: int) -> bool:
        """try_take for a cache entry, counted as cached too."""
        if not self.try_take(nbytes):
            return False
        self.cached += nbytes
        return True

    def release_cached(self, nbytes: int) -> None:
        self.held -= nbytes
        self.cached -= nbytes


class Reservation:
    """Bytes held from a budget; `release()` (idempotent) gives them all back."""

    __slots__ = ("budget", "nbytes")

    def __init__(self, budget: MemoryBudget):
        self.budget = budget
        self.nbytes = 0

    def grow(self, nbytes: int, what: str) -> None:
        budget = self.budget
        if budget.held + nbytes > budget.limit:
            raise HttpError("busy", f"this worker holds {budget.held} of its {budget.limit} buffered bytes; "
                            f"{what} needs {nbytes} more: retry shortly", None, headers={"retry-after": "1"})
        budget.held += nbytes
        self.nbytes += nbytes

    def resize(self, nbytes: int) -> None:
        """Hold exactly `nbytes` now (shrinking never fails; growing may, like grow)."""
        if nbytes > self.nbytes:
            self.grow(nbytes - self.nbytes, "the response")
        else:
            self.budget.held -= self.nbytes - nbytes
            self.nbytes = nbytes

    def release(self) -> None:
        self.budget.held -= self.nbytes
        self.nbytes = 0
