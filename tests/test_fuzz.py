"""Hostile and random input never escapes as anything but ConfigError (engine) or exit 2 (CLI)."""

import contextlib
import io
import json
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simengine import api
from simengine.cli import main
from simengine.config import ModelSpec, StrategySpec, SystemSpec, load_scenario
from simengine.errors import ConfigError

from scenarios import scenario_dict

FIELDS = {
    "model": list(ModelSpec.model_fields),
    "system": list(SystemSpec.model_fields) + ["gpu.memory_gib", "gpu.peak_tflops.bf16", "scale_up.domain_size",
                                               "scale_out.bandwidth_gbs", "efficiency.gemm", "efficiency.kernel_overhead_us"],
    "strategy": list(StrategySpec.model_fields),
}

hostile = st.one_of(
    st.integers(min_value=-10**12, max_value=10**12), st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(), st.none(), st.text(max_size=20), st.sampled_from(["1e400", "-0", "NaN", "[]", "{}", '"x"', "1f1b", "fp8", "mla"]),
    st.lists(st.integers(), max_size=3), st.integers(min_value=0, max_value=64),
)
sets = st.lists(st.tuples(st.sampled_from(sorted(FIELDS)), st.data()), max_size=4)


def run_cli(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_cli_never_crashes(data):
    argv = ["estimate", "--model", "small", "--system", "small", "--strategy", "small", "--json"]
    for _ in range(data.draw(st.integers(0, 4))):
        section = data.draw(st.sampled_from(sorted(FIELDS)))
        field = data.draw(st.sampled_from(FIELDS[section]))
        value = data.draw(hostile)
        raw = value if isinstance(value, str) else json.dumps(value)
        argv += ["--set", f"{section}.{field}={raw}"]
    code, out, err = run_cli(argv)
    assert code in (0, 2), err
    if code == 0:
        rep = json.loads(out)
        assert math.isfinite(rep["step_time_s"]) and rep["step_time_s"] > 0
    else:
        assert err.startswith("error: ") and err.count("\n") == 1


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_scenario_never_escapes(data):
    cfg = scenario_dict("llama3-8b", "h100-sxm5-80gb", system={"num_gpus": 8}, strategy={"global_batch_size": 16})
    for _ in range(data.draw(st.integers(1, 5))):
        section = data.draw(st.sampled_from(sorted(FIELDS)))
        field = data.draw(st.sampled_from([f for f in FIELDS[section] if "." not in f]))
        cfg[section][field] = data.draw(hostile)
    try:
        sc = load_scenario(cfg)
    except ConfigError as e:
        assert e.issues and all(isinstance(f, str) for f, _ in e.issues)
        return
    try:
        rep = api.estimate(sc)
    except ConfigError:
        return
    assert math.isfinite(rep.step_time_s) and rep.step_time_s > 0
    assert all(math.isfinite(s.peak_gib) for s in rep.memory_by_stage)


@settings(max_examples=100, deadline=None)
@given(st.recursive(st.one_of(st.none(), st.integers(), st.text(max_size=5), st.floats()),
                    lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(st.text(max_size=8), c, max_size=4)), max_leaves=12))
def test_arbitrary_json_is_rejected_cleanly(doc):
    with contextlib.suppress(ConfigError):
        load_scenario(doc)


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=200))
def test_estimate_json_text(text):
    with contextlib.suppress(ConfigError):
        api.estimate_json(text)
