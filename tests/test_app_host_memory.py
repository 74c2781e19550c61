"""Activations offloaded to host memory in the studio: the Estimate and the Timeline pages give
the same verdict when they do not fit the host (system.gpu.host_memory_gib), and say it is the host."""

from __future__ import annotations

import pytest
from app_walk import open_page

from simengine import api
from ui.share import encode_token, size_canonical


def _offloading(host_gib: float) -> dict:
    cfg = size_canonical("small")   # Llama-3-8B on 8 H100: tp2 pp1, no recompute
    cfg["strategy"].update(cpu_offload_layers=16, recompute="none", recompute_num_layers=None, schedule="1f1b")
    cfg["system"]["gpu"]["host_memory_gib"] = host_gib
    return cfg


@pytest.mark.parametrize("page", ["pages/estimate.py", "pages/timeline.py"])
def test_both_pages_say_when_the_host_cannot_hold_the_offloaded_activations(page):
    roomy = api.estimate(_offloading(500.0))
    host = max(m.host_offload_gib for m in roomy.memory_by_stage)
    assert roomy.fits and host > 1.0
    at = open_page(page, s=encode_token(_offloading(host / 2)))
    assert not at.exception
    said = " ".join(str(e.value) for e in at.error)
    assert "Does not fit in host memory" in said and "host_memory_gib" in said
    at = open_page(page, s=encode_token(_offloading(500.0)))
    assert not any("host memory" in str(e.value) for e in at.error)


def test_when_neither_gpu_nor_host_fits_the_estimate_page_says_both():
    cfg = _offloading(0.01)
    cfg["strategy"]["micro_batch_size"] = 8    # the GPU does not fit either
    rep = api.estimate(cfg)
    assert not rep.fits and {w.split(":")[0] for w in rep.warnings} >= {"does not fit", "does not fit in host memory"}
    at = open_page("pages/estimate.py", s=encode_token(cfg))
    said = " ".join(str(e.value) for e in at.error)
    assert "Does not fit:" in said and "The host does not fit either" in said
    assert "more offloaded layers" in said and "recompute" not in said
