"""Errors raised by the pipeline simulator."""

from __future__ import annotations


class DeadlockError(ValueError):
    """An order that can never finish. ``blocked`` lists the first waiting task of every stuck
    stream as (rank, stream, kind, mb, chunk)."""

    def __init__(self, blocked: list[tuple[int, str, str, int, int]]):
        self.blocked = list(blocked)
        shown = ", ".join(
            f"rank {r} {s}: {k} mb={mb} chunk={c}" for r, s, k, mb, c in self.blocked[:12]
        )
        more = f" (+{len(self.blocked) - 12} more)" if len(self.blocked) > 12 else ""
        super().__init__(f"pipeline order deadlocks; blocked tasks: {shown}{more}")
