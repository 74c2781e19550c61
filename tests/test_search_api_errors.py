"""Bad search arguments are refused before any work, naming the argument (API and CLI): a top
of 0 once meant "no top" and ran the whole space unpruned; a huge worker count spawned one
process per batch."""

from __future__ import annotations

import os

import pytest

from simengine import presets
from simengine.cli import main
from simengine.errors import ConfigError
from simengine.search import make_space, search
from simengine.search.executors import ProcessPool, RayExecutor, check_workers, make_executor

TINY = {**presets.load_preset("models", "llama3-8b"), "name": "tiny", "hidden_size": 1024, "num_layers": 4,
        "num_attention_heads": 16, "num_kv_heads": 4, "ffn_hidden_size": 4096, "vocab_size": 32000}
SYSTEM = presets.load_preset("systems", "h100-sxm5-80gb")


def _space():
    return make_space(TINY, SYSTEM, global_batch=16, seq_len=4096, gpus=[8], choices={"tp": (1,), "pp": (1,), "cp": (1,)})


@pytest.mark.parametrize("top", [0, -1, True, 2.5])
def test_search_refuses_a_top_that_is_not_a_positive_count(top):
    with pytest.raises(ConfigError) as e:
        search(_space(), top=top)
    assert e.value.issues[0][0] == "top"


def test_search_accepts_no_top_and_a_positive_top():
    assert len(search(_space(), top=1).candidates) == 1
    assert len(search(_space(), top=None).candidates) >= 1


@pytest.mark.parametrize("workers", [0, -3, 2 * (os.cpu_count() or 1) + 1, 100_000])
def test_worker_counts_outside_1_to_twice_the_cores_are_refused(workers):
    for make in (lambda: check_workers(workers), lambda: make_executor("process", workers),
                 lambda: ProcessPool(workers), lambda: RayExecutor(None, workers)):
        with pytest.raises(ConfigError) as e:
            make()
        assert e.value.issues[0][0] == "workers"


def test_cli_exits_2_with_one_line_on_a_bad_top_or_worker_count(capsys):
    base = ["search", "--model", "llama3-8b", "--system", "h100-sxm5-80gb", "--set", "system.num_gpus=8",
            "--global-batch", "32", "--seq-len", "4096"]
    for extra, field in ((["--top", "0"], "top"), (["--workers", "100000"], "workers")):
        assert main(base + extra) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and field in err[0]


def test_an_address_without_the_ray_executor_is_refused_not_ignored(capsys):
    for name in (None, "inprocess", "process"):
        with pytest.raises(ConfigError) as e:
            make_executor(name, None, "ray://head:10001")
        assert e.value.issues[0][0] == "address" and "--executor ray" in str(e.value)
    assert main(["search", "--model", "small", "--system", "small", "--global-batch", "64", "--seq-len", "8192",
                 "--address", "foo"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "address" in err[0]


def test_a_space_where_nothing_fits_says_so(capsys):
    code = main(["search", "--model", "small", "--system", "small", "--global-batch", "64", "--seq-len", "8192",
                 "--space", "strategy.pp=3"])
    out = capsys.readouterr().out
    assert code == 0 and "no layout of this space is valid and fits" in out and "invalid:" in out
    # each generalised reason (numbers as N) comes with one case in its own numbers
    assert "tp*pp*cp = N*N*N = N" in out and "e.g. strategy.tp: tp*pp*cp = 1*3*1 = 3 does not divide system.num_gpus = 8" in out


def test_a_dimension_pinned_or_restricted_twice_is_refused(capsys):
    """Two --space (or a --set and a --space) for one dimension used to keep the last silently."""
    base = ["search", "--model", "small", "--system", "small", "--global-batch", "64", "--seq-len", "8192"]
    for extra in (["--space", "strategy.tp=4", "--space", "strategy.tp=2"],
                  ["--set", "strategy.tp=4", "--space", "strategy.tp=2,4"],
                  ["--set", "strategy.pp=1", "--set", "strategy.pp=2"],
                  ["--space", "system.num_gpus=8", "--space", "system.num_gpus=16"]):
        assert main(base + extra) == 2, extra
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "twice" in err[0], (extra, err)
