"""The search's what-if candidates: those whose pipeline schedule their stack does not ship
(``Candidate.what_if``, config/notes.py ``schedule_what_if``), and what a result says of them —
the one place the CLI's footnote, ``--json`` and the Search page read it from."""

from __future__ import annotations

from typing import Any, Sequence

from ..config.notes import shipped, unshipped
from .rank import OBJECTIVES
from .types import Candidate

# how the gap between the best candidate the stack runs and #1 reads, per objective; the gap itself
# is taken on the objective's own sort key (rank.py ``OBJECTIVES``: smaller is better)
_GAP_READS = {"tokens_per_s": "% fewer tokens/s", "time_to_train": "% fewer tokens/s", "mfu": "% lower MFU",
              "cost_per_million_tokens": "% dearer per token", "cost_to_train": "% dearer per token",
              "memory_headroom": "% less headroom"}


def first_shipped(cands: Sequence[Candidate]) -> int | None:
    """Index of the best candidate whose schedule its stack runs, None when every one is a what-if."""
    return next((i for i, c in enumerate(cands) if not c.what_if), None)


def summary(cands: Sequence[Candidate], framework: str, objective: str) -> dict[str, Any]:
    """``first_shipped``, ``what_if`` (which schedules the stack does not ship, '' when no candidate
    is a what-if), ``shipped_schedules`` (the restriction that keeps the stack's own) and
    ``what_if_summary`` (one plain sentence: the note and where the best candidate it runs ranks)."""
    whats = sorted({c.strategy["schedule"] for c in cands if c.what_if})
    own = shipped(framework)
    k = first_shipped(cands)
    out: dict[str, Any] = {"first_shipped": k, "what_if": unshipped(framework, whats) if whats else "",
                           "shipped_schedules": own, "what_if_summary": ""}
    if not whats:
        return out
    text = f"{out['what_if']}; they are priced with its kernels."
    if k is None:
        text += (f" None of the candidates shown runs on this stack: search only its schedules "
                 f"({', '.join(own) or 'none'}) for the best one it runs.")
    elif k > 0:
        key = OBJECTIVES[objective][0]
        a, b = key(cands[0]), key(cands[k])
        gap = (b - a) / abs(a) * 100 if a else 0.0
        text += f" The best this stack runs is #{k + 1} ({gap:.1f} {_GAP_READS[objective]} than #1)."
    out["what_if_summary"] = text
    return out
