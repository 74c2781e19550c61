"""The search's block pricing memo (search/blocks.py): a block priced once per what prices it,
the same numbers as pricing it every time."""

from __future__ import annotations

import itertools

from simengine import presets
from simengine.config import load_scenario
from simengine.errors import ConfigError
from simengine.search.blocks import _BY_ID, block_seconds


def _scenarios(model: str, gpus: int, grid: dict) -> list:
    m = presets.load_preset("models", model)
    system = {**presets.load_preset("systems", "h100-sxm5-80gb"), "num_gpus": gpus}
    out = []
    keys = list(grid)
    for vals in itertools.product(*(grid[k] for k in keys)):
        strat = {"global_batch_size": 256, "seq_len": 4096, "pp": 4, **dict(zip(keys, vals))}
        try:
            out.append(load_scenario({"model": m, "system": system, "strategy": strat}))
        except ConfigError:
            continue
    return out


MOE = _scenarios("deepseek-v3", 1024, {"tp": (1, 2, 4), "cp": (1, 2, 4), "cp_comm_type": ("p2p", "a2a"),
                                       "ep": (8, 16, 64), "micro_batch_size": (1, 2)})
DENSE = [sc for gpus in (256, 8192) for sc in _scenarios(   # two GPU counts: one memo, as a search shares it
    "llama3-8b", gpus, {"tp": (1, 2, 8), "cp": (1, 2, 8), "cp_comm_type": ("p2p", "allgather"), "micro_batch_size": (1, 2)})]


def test_block_memo_prices_as_without_it():
    """Every block of every scenario: the memoised sides equal a fresh pricing, bit for bit, while
    the memo holds fewer blocks than were priced (an attention block does not read ep, the
    embedding never reads cp_comm_type, ...)."""
    assert len(MOE) > 20 and len(DENSE) > 10
    for scs in (MOE, DENSE):
        memo: dict = {}
        first = 0
        for sc in scs:
            fresh = block_seconds(sc)
            assert block_seconds(sc, memo) == fresh
            first += len(fresh)
        held = len(memo)
        priced = sum(k[0] is not _BY_ID for k in memo)   # one entry by content per block priced
        assert 0 < priced < first * 0.6
        for sc in scs[::-1]:   # everything read back from the memo
            assert block_seconds(sc, memo) == block_seconds(sc)
        assert len(memo) == held


def test_an_attention_block_is_shared_across_expert_layouts_but_not_across_cp():
    memo: dict = {}
    by = {}
    for sc in MOE:
        st = sc.strategy
        by[(st.tp, st.cp, st.cp_comm_type, st.ep, st.micro_batch_size)] = block_seconds(sc, memo)["attn"]
    some = [(k, v) for k, v in by.items() if k[0] == 1 and k[4] == 1 and k[2] == "p2p"]
    assert len({k[3] for k, _ in some}) > 1
    for cp in {k[1] for k, _ in some}:
        assert len({v for k, v in some if k[1] == cp}) == 1        # ep does not change the attention block
    assert len({v for k, v in some}) == len({k[1] for k, _ in some})  # cp does
