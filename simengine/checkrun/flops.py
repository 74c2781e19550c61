"""The FLOPs a Megatron-LM log says its run did, against the FLOPs of the scenario it is compared with.

Megatron prints ``throughput per GPU (TFLOP/s/GPU)`` = ``num_floating_point_operations(args,
batch_size) / (elapsed_time_per_iteration · 10¹² · world_size)`` (megatron/training/training.py
``training_log``), so TFLOP/s × elapsed time × world size is the model FLOPs of one iteration *as
Megatron counts them*. :func:`megatron_flops` is that count for a scenario (seq_len, global batch and
model dims), in the two versions a log may come from:

* ``"2024"`` — megatron/training/training.py ``num_floating_point_operations`` as of NVIDIA/Megatron-LM
  2bfe9bea (2024-04-03)::

      12·B·s·L·h² · [ (1 + g/n + s/h)·(d·n/h) + (f/h)·topk·(3/2 if swiglu) + V/(2·L·h) ]

  every layer's MLP counted as ``f·topk`` (``num_experts_routed_to = 1`` for a dense model); the
  core-attention term ``s/h`` counts the full s×s score matrix.
* ``"2025"`` — the same function from 8873b55d (2025-03-06, "Fixes in number of floating-point
  operation estimates for MoE and attention layer") to today (d98e8a64, ``transformer_flops``):
  dense and MoE layers apart (``moe_layer_freq``), shared experts, MTP layers, MLA, and the
  core-attention term halved for the causal mask (``/ 2  # causal mask``).

The count is Megatron's, not the simulator's: it ignores sliding windows, recompute and padding, as
Megatron does. A log's version is picked by the date its iteration lines carry (``training_log``
prints ``[%Y-%m-%d %H:%M:%S]``): before 2025-03-06 the 2024 formula, else (or undated) today's.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from ..config.model import ModelSpec
from ..config.scenario import Scenario, padded_vocab
from .logs import RunLog

CAUSAL_FIX_DATE = "2025-03-06"  # 8873b55d: the core-attention term halved for the causal mask
TOLERANCE = 0.03  # the log prints 4 significant figures; a real seq/batch difference is ≥ 2×


def formula_for(date: str | None) -> str:
    """The version of ``num_floating_point_operations`` a log dated ``date`` (YYYY-MM-DD) used."""
    return "2024" if date is not None and date < CAUSAL_FIX_DATE else "2025"


def _fits_2024(m: ModelSpec) -> bool:
    """The 2024 formula has no MLA, shared experts, dense-layer split or MTP; it mis-counts those."""
    return (m.attention != "mla" and not m.shared_ffn and not m.mtp_layers
            and (not m.is_moe or m.num_moe_layers == m.num_layers))


def _coefficients(m: ModelSpec, vocab: int, version: str) -> tuple[float, float]:
    """(a, b) with FLOPs = B·(a·s² + b·s): a the core-attention part, b the token-linear part."""
    h, L, n, d = m.hidden_size, m.num_layers, m.num_attention_heads, m.d_head
    ffn_mult = 3 if m.activation == "swiglu" else 2          # stacked h→(2)f and f→h GEMMs
    if version == "2024":  # 12·B·s·L·h²·[...] multiplied out (2bfe9bea)
        topk = m.top_k if m.is_moe else 1
        f = m.expert_ffn if m.is_moe else m.ffn_hidden_size
        return (12 * L * d * n,
                12 * L * h * (1 + m.kv_heads / n) * (d * n) + 6 * L * h * f * topk * ffn_mult + 6 * h * vocab)
    moe = m.num_moe_layers
    mtp = m.mtp_layers
    last_moe = m.is_moe_layer(L - 1)
    layers = L + mtp  # MTP layers are blocks of the last layer's kind
    moe += mtp if last_moe else 0
    dense = layers - moe
    routed = m.expert_ffn * m.top_k + m.shared_ffn if m.is_moe else 0
    mlp = h * (m.ffn_hidden_size * ffn_mult * dense + routed * ffn_mult * moe)
    if m.attention == "mla":
        la = m.mla
        rope = la.qk_rope_head_dim
        q = (h * n * (la.qk_nope_head_dim + rope) if not la.q_lora_rank
             else la.q_lora_rank * (h + n * (la.qk_nope_head_dim + rope) + 1))
        attn = q + la.kv_lora_rank * (h + n * (la.qk_nope_head_dim + la.v_head_dim) + 1) + h * rope + n * la.v_head_dim * h
        core = n * (la.qk_nope_head_dim + rope) / 2 + n * la.v_head_dim / 2
    else:
        qp, kvp = d * n, d * m.kv_heads
        attn = h * (qp + 2 * kvp) + qp * h
        core = qp  # ·/2 causal mask ·2 for QKᵀ and (QKᵀ)V
    linear = 6 * (mlp + attn * layers + mtp * (3 * h + 2 * h * h) + h * vocab * (mtp + 1))
    return 6 * core * layers, linear


@dataclass(frozen=True)
class FlopsCheck:
    logged: float            # FLOPs per iteration the log's TFLOP/s and time imply
    scenario: float          # Megatron's count for the scenario
    version: str             # "2024" | "2025"
    implied_seq_len: float   # the seq_len that reproduces ``logged`` at the scenario's global batch
    implied_global_batch: float  # the global batch that reproduces it at the scenario's seq_len

    @property
    def ratio(self) -> float:
        return self.scenario / self.logged


def megatron_flops(sc: Scenario, version: str = "2025", seq_len: int | None = None,
                   global_batch: int | None = None) -> float:
    """Megatron's ``num_floating_point_operations`` for one iteration of ``sc``."""
    s = sc.strategy.seq_len if seq_len is None else seq_len
    b = sc.strategy.global_batch_size if global_batch is None else global_batch
    a, lin = _coefficients(sc.model, padded_vocab(sc.model.vocab_size, sc.strategy.tp), version)
    return b * (a * s * s + lin * s)


def check(sc: Scenario, tflops_per_gpu: float, step_s: float, date: str | None,
          world: int | None = None) -> FlopsCheck | None:
    """The logged FLOPs beside the scenario's; None when the formula here does not cover the model
    (the 2024 one's gaps, or a hybrid Mamba stack). ``world``: the GPUs the log says it ran on
    (its layout line), which Megatron divided by; else the scenario's (a GPU count that differs is
    its own mismatch line, not a batch or a sequence the FLOPs would blame)."""
    version = formula_for(date)
    if (version == "2024" and not _fits_2024(sc.model)) or sc.model.hybrid_pattern is not None:
        return None  # (hybrid Mamba stacks: Megatron's hybrid FLOP branch is not reproduced here)
    logged = tflops_per_gpu * 1e12 * step_s * (world or sc.system.num_gpus)
    a, lin = _coefficients(sc.model, padded_vocab(sc.model.vocab_size, sc.strategy.tp), version)
    b, s = sc.strategy.global_batch_size, sc.strategy.seq_len
    per_sample = logged / b  # a·s² + lin·s = per_sample, the positive root
    seq = (-lin + math.sqrt(lin * lin + 4 * a * per_sample)) / (2 * a)
    return FlopsCheck(logged, megatron_flops(sc, version), version, seq, logged / (a * s * s + lin * s))


def logged_check(log: RunLog, used: tuple[int, ...], sc: Scenario) -> FlopsCheck | None:
    """:func:`check` on the median over the iterations ``used`` of TFLOP/s × step time (Megatron logs
    both per iteration; their product is constant up to the printed rounding)."""
    kept = set(used)   # (a tuple: n × m membership tests, 6.7 s of a 40,000-line log)
    its = [i for i in log.iterations if i.step in kept and i.tflops_per_gpu and i.time_s]
    if log.framework != "megatron" or not its:
        return None
    per_s = statistics.median(i.tflops_per_gpu * i.time_s for i in its)  # type: ignore[operator]
    world = log.stated.get("world_size")
    return check(sc, per_s, 1.0, log.date, world if isinstance(world, int) and world > 0 else None)


def _count(x: float) -> str:
    """A batch size as a count: whole when it is one to the printed precision, else one decimal
    (a non-whole implied batch says the seq_len, not the batch, is what differs)."""
    return f"{round(x)}" if abs(x - round(x)) < 0.05 else f"{x:.1f}"


def mismatch(c: FlopsCheck, sc: Scenario) -> str | None:
    """One sentence when the scenario's FLOPs are not the logged run's, naming the setting that would be."""
    if abs(c.ratio - 1) <= TOLERANCE:
        return None
    st = sc.strategy
    return (f"the logged TFLOP/s imply {c.logged / 1e15:.2f} PFLOP per iteration (Megatron's {c.version} count), "
            f"the scenario has {c.scenario / 1e15:.2f} ({c.ratio - 1:+.0%}): they imply seq_len {c.implied_seq_len:.0f} "
            f"at global batch {st.global_batch_size}, or global batch {_count(c.implied_global_batch)} at seq_len "
            f"{st.seq_len}; the scenario has seq_len {st.seq_len}, global batch {st.global_batch_size}")
