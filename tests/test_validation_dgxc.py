"""NVIDIA/dgxc-benchmarking's measured NeMo step times (published_runs.csv, source "dgxc-benchmarking"):
the mapping reads the recipes' own settings, every row estimates, and every published layout fits."""

from __future__ import annotations

import pytest

from simengine import api
from simengine.validation.data import read_text
from simengine.validation.published import evaluate, published_runs


@pytest.fixture(scope="module")
def dgxc():
    runs, _ = published_runs(read_text("published_runs.csv"))
    runs = {r.run_id: r for r in runs if r.source == "dgxc-benchmarking"}
    return runs, evaluate(list(runs.values()))[0]


def test_dgxc_benchmarking_runs_map_with_the_nemo_recipe(dgxc):
    """NVIDIA/dgxc-benchmarking v25.04.02 (llama3.1/README.md @0efdb23): Llama 3.1 70B FP8 on 64 H100s,
    TP 4 · PP 8 · VP 5, MBS 1, GBS 128, 9.86 s a step; the NeMo defaults (ZeRO-1, sequence parallelism,
    TP and P2P overlap) and delayed scaling; its Nemotron4 340B rows, printed without interleaving, are
    mapped with the VP its launcher sets."""
    runs, comps = dgxc
    r = runs["dgxc_v25.04.02_llama3.1_70b_FP8_64gpu"]
    st = r.config["strategy"]
    assert (st["tp"], st["pp"], st["cp"], st["vpp"], st["micro_batch_size"], st["global_batch_size"]) == (4, 8, 1, 5, 1, 128)
    assert st["fp8_recipe"] == "delayed" and st["zero_stage"] == 1 and st["tp_comm_overlap"] and st["overlap_p2p_comm"]
    # the recipes' bf16 gradients (grad_reduce_in_fp32 = False) and FP8 primary weights (fp8_params = True)
    assert st["fp32_main_grads"] is False and st["fp8_param_gather"] is True
    assert r.measured == {"step_time": 9.86} and r.units == {"step_time": "s"}
    # that release's 340B table prints VP NA; its own nemotron/launch.sh sets VP=12
    assert runs["dgxc_v25.04.02_nemotron_340b_FP8_512gpu"].config["strategy"]["vpp"] == 12
    dg = list(comps)
    assert len(dg) == 64 and all(c.metric == "step_time" for c in dg)
    assert max(abs(c.error_pct) for c in dg) < 15
    # each ran on 80 GB H100s: with the recipes' own gradient and weight precision every layout fits
    # (with fp32 gradients and BF16 weights, the defaults, 28 of them did not)
    assert all(api.estimate(runs[c.run_id].config).fits for c in dg)
