"""CPU activation offloading as Megatron-Core runs it (``--cpu-offloading-num-layers``, activations
only; StrategySpec.cpu_offload_layers): TransformerEngine's default scheduling
(transformer_engine/pytorch/cpu_offload.py; docs/features/other_optimizations/cpu_offloading):

- the first N of the L layers are offloaded;
- a layer's copy to host starts once its tensors are saved for backward, on its own stream
  (taken here from the end of its forward: at most one layer's overlap early);
- at most L − N layers' activations are on the GPU at any time: compute and reload stall to keep
  that ("N = L − 1 leaves only 1 activation set on GPU — compute and transfers cannot overlap");
- a reload must complete before its layer's backward needs it.

So the GPU holds L − N layers' activations at the peak (``cost/stage.py`` ``_chunk_memory``), and the
copies cost time only where they outlast the compute beside them: ``stalls`` runs the two streams
layer by layer (copies and reloads one after another at the host link's bandwidth,
``GPUSpec.host_link_gbs``; on PCIe-attached GPUs shared with the NIC's traffic of the same phase,
``shared_link``) and returns how much later the forward and the backward end. Copy
engines take no SMs; the HBM traffic of a copy at the host link's rate is a few percent of HBM
bandwidth and is not priced (the TE docs: "unlikely to affect compute-bound operations")."""

from __future__ import annotations


def stalls(saved: list[float], n_layers: int, fwd_s: float, bwd_s: float, link_gbs: float,
           back_gbs: float | None = None) -> tuple[float, float]:
    """(forward stall, backward stall) seconds of one micro-batch through a chunk of ``n_layers``
    layers whose first ``len(saved)`` are offloaded, ``saved[j]`` the bytes of layer j; ``fwd_s`` and
    ``bwd_s`` one layer's forward and backward (input and weight gradients) compute seconds; the
    copies at ``link_gbs``, the reloads at ``back_gbs`` (default the same)."""
    n = len(saved)
    if not n or n >= n_layers:
        return 0.0, 0.0
    keep = n_layers - n  # activation sets the GPU may hold
    back = link_gbs if back_gbs is None else back_gbs
    copy = [b / (link_gbs * 1e9) for b in saved]
    reload = [b / (back * 1e9) for b in saved]
    return _forward(copy, n_layers, keep, fwd_s), _backward(reload, n_layers, keep, bwd_s)


def shared_link(link_gbs: float, nic_gbs: float, busy: float) -> float:
    """The host-copy bandwidth, averaged over a phase, of a GPU whose one PCIe link also carries its
    NIC's traffic (GPUDirect RDMA: on an HGX/DGX H100 or B200 node each GPU reaches both the host
    and its ConnectX NIC through the same x16 link and the NIC's PCIe switch) for a share ``busy``
    of the phase. While both stream, the link splits max-min fair (each DMA flow at least half of
    it; the copies get what the NIC leaves when it needs less); otherwise the copies have it all.
    The collectives are priced at their own bandwidth as before (what the copies take from them is
    not charged: optimistic for them)."""
    busy = min(max(busy, 0.0), 1.0)
    during = max(link_gbs - nic_gbs, link_gbs / 2.0)
    return (1.0 - busy) * link_gbs + busy * during


def _forward(copy: list[float], n_layers: int, keep: int, f: float) -> float:
    """Layer m starts once m − keep copies are done (it allocates a set); layer j's copy starts
    when its forward ends and the stream is free."""
    t = stream = stall = 0.0
    done: list[float] = []
    for m in range(n_layers):
        j = m - keep  # the copy that must be done before layer m allocates its set
        if j >= 0 and done[j] > t:
            stall += done[j] - t
            t = done[j]
        t += f
        if m < len(copy):
            stream = max(stream, t) + copy[m]
            done.append(stream)
    return stall


def _backward(copy: list[float], n_layers: int, keep: int, b: float) -> float:
    """Backward from the last layer down: the GPU starts it holding ``keep`` sets; each finished
    backward frees one, which the next reload (offloaded layers from the last one down) may use;
    an offloaded layer's backward waits for its reload."""
    n = len(copy)
    t = stream = stall = 0.0
    ready: dict[int, float] = {}
    nxt = n - 1  # the next layer to reload
    for freed, m in enumerate(range(n_layers - 1, -1, -1), start=1):
        if m < n and ready[m] > t:
            stall += ready[m] - t
            t = ready[m]
        t += b
        while nxt >= 0 and freed > (n - 1 - nxt):   # one reload per freed set, in order
            stream = max(stream, t) + copy[nxt]
            ready[nxt] = stream
            nxt -= 1
    return stall
