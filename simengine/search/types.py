"""Plain picklable records the search passes between executors: candidates, rejections, results."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from ..report import to_train

# the overlap flags as a layout's label names them (``Candidate.label``; the studio's overlap column)
FLAG_LABELS = (("overlap_grad_reduce", "grad"), ("overlap_param_gather", "param"), ("tp_comm_overlap", "tp"))
SEARCHED = ("tp", "pp", "vpp", "schedule", "cp", "cp_comm_type", "ep", "etp", "micro_batch_size", "zero_stage",
            "recompute", "recompute_num_layers", "cpu_offload_layers", "overlap_grad_reduce", "overlap_param_gather", "tp_comm_overlap",
            "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers")

# the pre-filter's headroom (prune.memory_at_zero: the plan's peak with the model states swapped),
# the closed forms' (headroom.headroom_bound) and the estimate's differ by float rounding (~1e-14
# GiB): a key this much looser never prunes a candidate that ties the top-th best
HEADROOM_SLACK_GIB = 1e-6


def example(gpus: int, strategy: dict[str, Any]) -> dict[str, Any]:
    """The searched fields of a candidate and its GPU count: a rejection's example, a layout.
    Filled in place, in the same key order (no intermediate dict: a 16,384-GPU search builds
    ~180k of them)."""
    get = strategy.get
    out: dict[str, Any] = {"num_gpus": gpus}
    for k in SEARCHED:
        out[k] = get(k)
    return out


@dataclass(slots=True)
class Candidate:
    """One fitting, timed layout with the headline numbers of its estimate and their bands."""

    gpus: int
    strategy: dict[str, Any]          # the full strategy dict (loads straight into a scenario)
    tokens_per_s: float
    step_time_s: float
    mfu: float
    cost_per_million_tokens_usd: float
    cost_per_step_usd: float
    peak_memory_gib: float
    reserved_memory_gib: float
    headroom_gib: float               # the estimate's free_memory_gib: capacity − (reserved + non-torch) on the tightest stage
    tight_stage: int
    band: dict[str, tuple[float, float]] = field(default_factory=dict)
    order: int = 0                    # enumeration index: the deterministic tie-break
    gpu_us_per_launch: float = 0.0    # Report.gpu_us_per_launch: below ~50 µs a launch-bound risk (cost/launch.py)
    what_if: str = ""                 # why its stack does not run its schedule (config/notes.py schedule_what_if), '' if it does

    def layout(self) -> dict[str, Any]:
        return example(self.gpus, self.strategy)

    def label(self) -> str:
        s = self.strategy
        parts = [f"{self.gpus} GPUs", f"tp{s['tp']}", f"pp{s['pp']}"]
        if s["vpp"] > 1:
            parts.append(f"vpp{s['vpp']}")
        if s.get("decoder_first_pipeline_num_layers") or s.get("decoder_last_pipeline_num_layers"):
            parts.append(f"split{s.get('decoder_first_pipeline_num_layers') or '-'}/{s.get('decoder_last_pipeline_num_layers') or '-'}")
        if s["cp"] > 1:
            parts.append(f"cp{s['cp']}({s['cp_comm_type']})")
        if s.get("ep", 1) > 1:
            parts.append(f"ep{s['ep']}")
        parts += [f"mbs{s['micro_batch_size']}", f"zero{s['zero_stage']}", _recompute_label(s)]
        if s["pp"] > 1:
            parts.append(s["schedule"])
        on = [n for f, n in FLAG_LABELS if s.get(f)]
        parts.append("overlap " + "+".join(on) if on else "no overlap")
        return " ".join(parts)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["band"] = {k: list(v) for k, v in self.band.items()}
        d["label"] = self.label()
        return d


def _recompute_label(s: dict[str, Any]) -> str:
    if s.get("cpu_offload_layers"):
        return f"offload{s['cpu_offload_layers']}"
    if s["recompute"] != "full":
        return f"rc-{s['recompute']}"
    k = s.get("recompute_num_layers")
    return "rc-full" if k is None else f"rc-full{k}"


def oom_text(over_gib: float, stage: int) -> str:
    """The reason of a candidate over GPU memory."""
    return f"OOM by {over_gib:.2f} GiB on stage {stage}"


@dataclass(slots=True)
class Rejection:
    """``count`` candidates rejected for one reason; ``example`` is one of them (searched fields)."""

    kind: str                         # "invalid" | "oom" | "dominated" | "bound" | "unevaluated"
    reason: str
    count: int
    example: dict[str, Any]

    def key(self) -> str:
        """The reason with its numbers generalised, so like reasons count together; digits inside a
        name stay (``1F1B``, ``a2a``, ``zb-h1``, ``dualpipev``)."""
        return f"{self.kind}: " + re.sub(r"(?<![A-Za-z_\d])\d+(\.\d+)?(?![A-Za-z_\d])", "N", self.reason)


@dataclass(slots=True)
class GroupScreen:
    """Phase 1 of one group: what survived the memory pre-filter and dominance, with bounds."""

    rejections: list[Rejection]
    memory_checked: int               # memory pre-filter calls
    entries: list[tuple[int, dict[str, Any], float, int]]   # (gpus, strategy, step-time lower bound, order), untimed
    flows: list[Any] = field(default_factory=list)          # per entry, its ``flow.Flow`` (None: its bound stands)
    options: list[Any] = field(default_factory=list)        # ``options.Option``s not yet expanded into entries (a lazy screen)
    group: tuple | None = None                              # (gpus, layout, mbs, order) of those options
    heads: list[float] = field(default_factory=list)        # per entry of an eager screen, its memory headroom (GiB)


@dataclass(slots=True)
class Flowed:
    """A screened candidate's bound raised by its data flow (``flow.flow_bound``)."""

    cand: tuple                       # (gpus, strategy, order)
    bound: float


@dataclass(slots=True)
class Refined:
    """A group's bound raised by the recompute its memory certainly needs (``refine.py``), or
    its rejection (invalid, or OOM at every ZeRO stage and recompute)."""

    group: tuple                      # (gpus, layout, mbs, order)
    bound: float
    rejection: Rejection | None
    then: str = "screen"              # the group's next step on the frontier


@dataclass(slots=True)
class Timed:
    """Phase 3 of a batch: the timed candidates."""

    candidates: list[Candidate]
    rejections: list[Rejection]
    timed: int = 0


@dataclass(slots=True)
class SearchResult:
    candidates: list[Candidate]       # ranked, best first (all fitting candidates)
    pareto: list[Candidate]
    rejections: list[Rejection]
    space_size: int
    evaluated: int
    memory_checked: int
    seconds: float
    objective: str
    ties: list[int] = field(default_factory=list)   # indices (in candidates) within the best one's band
    token_budget: float | None = None  # tokens to train (SearchSpace.token_budget): adds time and cost to train
    framework: str = "megatron-te"     # the space's stack (StrategySpec.framework): which schedules it ships

    def what_if(self, cands: list[Candidate] | None = None) -> dict[str, Any]:
        """What the result says of its what-if candidates (``what_if.summary``), of ``cands``
        (default: every candidate kept)."""
        from .what_if import summary

        return summary(self.candidates if cands is None else cands, self.framework, self.objective)

    def rejected_counts(self) -> dict[str, int]:
        return _counts(self.rejected_by_key())

    def rejected_examples(self) -> dict[str, dict[str, Any]]:
        """Per key of ``rejected_counts``, its first rejection's own reason (numbers kept: the key's
        ``tp*pp*cp = N*N*N = N`` reads as ``tp*pp*cp = 3*1*1 = 3``) and example layout."""
        return _examples(self.rejected_by_key())

    def rejected_by_key(self) -> dict[str, tuple[int, Rejection]]:
        """Per ``Rejection.key`` (each computed once: a 16,384-GPU space holds ~700k rejections), the
        candidates it counts and its first rejection; most candidates first, then by key."""
        out: dict[str, tuple[int, Rejection]] = {}
        for r in self.rejections:
            k = r.key()
            n, first = out.get(k, (0, r))
            out[k] = (n + r.count, first)
        return dict(sorted(out.items(), key=lambda kv: (-kv[1][0], kv[0])))

    def to_json(self, top: int | None = None) -> dict[str, Any]:
        cands = self.candidates if top is None else self.candidates[:top]
        by = self.rejected_by_key()
        out = {"objective": self.objective, "candidates": [self._json(c) for c in cands],
               "pareto": [self._json(c) for c in self.pareto], "ties": self.ties,
               "rejected": _counts(by), "rejected_examples": _examples(by),
               "space_size": self.space_size, "evaluated": self.evaluated,
               "memory_checked": self.memory_checked, "shown": len(self.candidates), "seconds": self.seconds,
               **self.what_if(cands)}
        if self.token_budget:
            out["token_budget"] = self.token_budget
        return out

    def _json(self, c: Candidate) -> dict[str, Any]:
        """A candidate's JSON; with a token budget, the time and cost to train it (budget / tokens
        per second; budget × cost per token)."""
        out = c.to_json()
        if self.token_budget:
            out["time_to_train_s"], out["cost_to_train_usd"] = to_train(self.token_budget, c.tokens_per_s,
                                                                        c.cost_per_million_tokens_usd)
        return out


def _counts(by: dict[str, tuple[int, Rejection]]) -> dict[str, int]:
    return {k: n for k, (n, _) in by.items()}


def _examples(by: dict[str, tuple[int, Rejection]]) -> dict[str, dict[str, Any]]:
    return {k: {"reason": r.reason, "example": r.example} for k, (_, r) in by.items()}
