"""Timing backends of the measurement kit: the same kernels on numpy (CPU; what CI runs) and on
PyTorch (CUDA on a GPU, else CPU).

Timing: ``warmup`` untimed calls, then ``repeats`` timed calls, each timed on its own; the caller
takes the median (robust to a stray slow call: clock ramp, another process). On CUDA each call is
bracketed by ``torch.cuda.Event(enable_timing=True)`` records and read after one
``torch.cuda.synchronize()`` (kernel time without host launch gaps, the method of PyTorch's
``torch.utils.benchmark`` and of nccl-tests' CUDA-event timer); on CPU ``time.perf_counter``
around a call that returns only when the work is done (numpy is synchronous; torch CPU ops too).

Kernels (the ops of ``simengine/workload/ops.py``):
* GEMM ``b × (m×k)·(k×n)`` per layout: TN = x·Wᵀ (forward), NN = dy·W (data grad), NT = dyᵀ·x
  (weight grad).
* grouped GEMM: ``groups`` equal GEMMs, one batched matmul (``torch.bmm`` / ``np.matmul`` on a
  stacked array) — a grouped GEMM with the same m per expert.
* attention: ``scaled_dot_product_attention`` (flash / memory-efficient kernel on GPU) forward, or
  its backward via ``torch.autograd.grad``; numpy: softmax(QKᵀ/√d)·V per head (forward only).
* memory: a copy of ``bytes`` (reads and writes them: 2 × bytes through HBM).
"""

from __future__ import annotations

import platform
import statistics
import time
from collections.abc import Callable

import numpy as np

Kernel = Callable[[], object]


def median_s(times: list[float]) -> float:
    return float(statistics.median(times))


def _layout_arrays(xp_rand, m: int, n: int, k: int, b: int, layout: str):
    if layout == "NN":
        return xp_rand((b, m, k)), xp_rand((b, k, n)), lambda a, w: a @ w
    if layout == "NT":
        return xp_rand((b, k, m)), xp_rand((b, k, n)), lambda a, w: a.swapaxes(-1, -2) @ w
    return xp_rand((b, m, k)), xp_rand((b, n, k)), lambda a, w: a @ w.swapaxes(-1, -2)


class NumpyBackend:
    """CPU timing with numpy float32 (numpy has no bf16): exercises the kit end to end in CI."""

    name = "numpy"
    dtype = "fp32"
    device = "cpu"

    def __init__(self, seed: int = 0):
        self._rng = np.random.default_rng(seed)

    def _rand(self, shape):
        return self._rng.standard_normal(shape, dtype=np.float32)

    def info(self) -> dict[str, str]:
        return {"backend": "numpy", "device": platform.processor() or platform.machine(), "numpy": np.__version__,
                "dtype": self.dtype}

    def gemm(self, m: int, n: int, k: int, b: int = 1, layout: str = "TN") -> Kernel:
        a, w, op = _layout_arrays(self._rand, m, n, k, b, layout)
        return lambda: op(a, w)

    def grouped_gemm(self, groups: int, m: int, n: int, k: int, layout: str = "TN") -> Kernel:
        return self.gemm(m, n, k, groups, layout)

    def attention(self, phase: str, b: int, s: int, heads: int, kv_heads: int, d_qk: int, d_v: int,
                  causal: bool) -> Kernel | None:
        if phase != "fwd":
            return None  # no autograd in numpy
        q, kk, v = self._rand((b, heads, s, d_qk)), self._rand((b, heads, s, d_qk)), self._rand((b, heads, s, d_v))
        mask = np.triu(np.full((s, s), -np.inf, dtype=np.float32), 1) if causal else 0.0

        def run():
            sc = q @ kk.swapaxes(-1, -2) / np.sqrt(d_qk) + mask
            sc = np.exp(sc - sc.max(axis=-1, keepdims=True))
            return (sc / sc.sum(axis=-1, keepdims=True)) @ v

        return run

    def memory(self, nbytes: int) -> Kernel:
        src = np.ones(max(nbytes // 4, 1), dtype=np.float32)
        dst = np.empty_like(src)
        return lambda: np.copyto(dst, src)

    def time(self, fn: Kernel, warmup: int, repeats: int) -> list[float]:
        for _ in range(warmup):
            fn()
        out = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
        return out


class TorchBackend:
    """PyTorch in ``dtype`` (bf16 by default) on ``device`` (``cuda:N`` on a GPU)."""

    name = "torch"

    def __init__(self, device: str = "cuda", dtype: str = "bf16", seed: int = 0):
        import torch  # the kit's only torch import; CI runs the numpy backend

        self.torch = torch
        self.device = device
        self.dtype = dtype
        self._dt = {"bf16": torch.bfloat16, "fp32": torch.float32, "fp16": torch.float16}[dtype]
        self.cuda = device.startswith("cuda")
        torch.manual_seed(seed)

    def _rand(self, shape, grad: bool = False):
        return self.torch.randn(shape, device=self.device, dtype=self._dt, requires_grad=grad)

    def info(self) -> dict[str, str]:
        t = self.torch
        out = {"backend": "torch", "torch": t.__version__, "device": self.device, "dtype": self.dtype}
        if self.cuda:
            idx = t.device(self.device).index or 0
            out["gpu"] = t.cuda.get_device_name(idx)
            out["cuda"] = str(t.version.cuda)
            try:  # needs pynvml; the SM clock the run saw (MHz)
                out["sm_clock_mhz"] = str(t.cuda.clock_rate(idx))
            except Exception:  # noqa: BLE001 - optional information only
                out["sm_clock_mhz"] = "unknown"
        return out

    def gemm(self, m: int, n: int, k: int, b: int = 1, layout: str = "TN") -> Kernel:
        a, w, op = _layout_arrays(self._rand, m, n, k, b, layout)
        return lambda: op(a, w)

    def grouped_gemm(self, groups: int, m: int, n: int, k: int, layout: str = "TN") -> Kernel:
        return self.gemm(m, n, k, groups, layout)

    def attention(self, phase: str, b: int, s: int, heads: int, kv_heads: int, d_qk: int, d_v: int,
                  causal: bool) -> Kernel | None:
        F = self.torch.nn.functional
        q = self._rand((b, heads, s, d_qk), phase == "bwd")
        k = self._rand((b, heads, s, d_qk), phase == "bwd")  # GQA: kv heads expanded, as flash kernels read them
        v = self._rand((b, heads, s, d_v), phase == "bwd")
        if phase == "fwd":
            return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        grad = self.torch.ones_like(out)
        return lambda: self.torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)

    def memory(self, nbytes: int) -> Kernel:
        src = self.torch.ones(max(nbytes // 2, 1), device=self.device, dtype=self.torch.bfloat16)
        dst = self.torch.empty_like(src)
        return lambda: dst.copy_(src)

    def time(self, fn: Kernel, warmup: int, repeats: int) -> list[float]:
        t = self.torch
        for _ in range(warmup):
            fn()
        if not self.cuda:
            out = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                fn()
                out.append(time.perf_counter() - t0)
            return out
        t.cuda.synchronize()
        events = [(t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)) for _ in range(repeats)]
        for start, end in events:
            start.record()
            fn()
            end.record()
        t.cuda.synchronize()
        return [start.elapsed_time(end) * 1e-3 for start, end in events]  # ms → s


def make_backend(name: str, device: str | None = None, dtype: str | None = None):
    if name == "numpy":
        return NumpyBackend()
    if name == "torch":
        return TorchBackend(device or "cuda", dtype or "bf16")
    raise ValueError(f"unknown backend {name!r}: numpy or torch")
