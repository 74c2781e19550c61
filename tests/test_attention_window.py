"""Sliding-window attention: FLOPs ~ s·w (flash tiles), the per-layer pattern, memory unchanged."""

from __future__ import annotations

import pytest

from scenarios import make
from simengine import presets
from simengine.config import ModelSpec
from simengine.cost.activations import attention_activations
from simengine.errors import ConfigError
from simengine.workload.builder import build_workload
from simengine.workload.dims import dims_of
from simengine.workload.ops import Attention, window_tile_pairs
from simengine.workload.window import (attention_flops_ratio, causal_pairs, window_attention_block,
                                       windowed_layers)


def brute_tile_pairs(s: int, w: int, tile: int) -> int:
    """Count the tile×tile blocks holding at least one (q, k) with q − w < k ≤ q."""
    n = -(-s // tile)
    blocks = 0
    for i in range(n):
        for j in range(n):
            q0, q1, k0, k1 = i * tile, min(s, (i + 1) * tile) - 1, j * tile, min(s, (j + 1) * tile) - 1
            if k0 <= q1 and k1 > q0 - w:
                blocks += 1
    return blocks * tile * tile


@pytest.mark.parametrize("s,w,tile", [(1024, 128, 128), (1000, 100, 64), (4096, 1, 128), (512, 300, 128), (256, 4096, 128)])
def test_tile_pairs_match_enumeration(s, w, tile):
    assert window_tile_pairs(s, w, tile) == brute_tile_pairs(s, w, tile)


def _attn(s, w):
    return Attention("attn", 1, 64, 8, s, s, 64, 64, True, "fwd", "flash", window=w)


def test_window_flops_grow_linearly_in_sequence_length():
    full = [_attn(s, 0).flops for s in (8192, 16384)]
    win = [_attn(s, 128).flops for s in (8192, 16384)]
    assert full[1] / full[0] == pytest.approx(4.0, rel=1e-3)     # s²
    assert win[1] / win[0] == pytest.approx(2.0, rel=1e-2)       # s·w (the first tile has no predecessor)
    # 128-wide band on 128 tiles: the diagonal block and the one before it per query tile
    assert win[0] == pytest.approx(_attn(8192, 0).flops * 2 * 128 * 8192 / (8192 * 8193 / 2), rel=0.01)
    assert _attn(1024, 4096).flops == _attn(1024, 0).flops       # a window wider than s is full attention


def test_gpt_oss_alternates_windowed_and_full_layers():
    m = ModelSpec.model_validate(presets.load_preset("models", "gpt-oss-120b"))
    assert [m.attention_window_of(i) for i in range(4)] == [128, None, 128, None]
    assert windowed_layers(m, range(m.num_layers)) == 18
    s = 4096
    expect = (causal_pairs(s, 128) + causal_pairs(s, None)) / (2 * causal_pairs(s, None))
    assert attention_flops_ratio(m, s) == pytest.approx(expect)
    assert 0.5 < attention_flops_ratio(m, s) < 0.54   # half the layers at ~6 % of full causal


def _sc(window=None, interval=None, seq=8192):
    return make("llama3-8b", model={"attention_window": window, "full_attention_interval": interval},
                strategy={"seq_len": seq, "global_batch_size": 64})


def _core(ph):
    return next(op for op in ph.fwd if isinstance(op, Attention))


def test_every_layer_windowed_prices_the_band_in_the_model_block():
    full, win = build_workload(_sc()), build_workload(_sc(window=512))
    assert _core(win.blocks["attn"]).flops < 0.2 * _core(full.blocks["attn"]).flops


def test_mixed_pattern_keeps_the_shared_block_full_and_builds_a_windowed_one():
    sc = _sc(window=512, interval=2)
    wl = build_workload(sc)
    assert _core(wl.blocks["attn"]).window == 0
    win = window_attention_block(wl.dims, sc.model, sc.strategy.cp_comm_type)
    assert _core(win).window == 512 and _core(win).flops < _core(wl.blocks["attn"]).flops


def test_window_leaves_activation_memory_unchanged():
    a = attention_activations(dims_of(_sc()), _sc().model)
    b = attention_activations(dims_of(_sc(window=512)), _sc(window=512).model)
    assert a == b


def test_interval_without_window_is_refused():
    with pytest.raises(ConfigError) as e:
        _sc(interval=2)
    assert "full_attention_interval" in str(e.value)
