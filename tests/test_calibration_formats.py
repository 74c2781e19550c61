"""The attention and grouped-GEMM CSV readers, logs given as a list, and the schema bounds turned
into row-level ConfigErrors (never a pydantic ValidationError)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from simengine import presets
from simengine.calibration import calibrate_with_summary
from simengine.calibration.formats.attention_csv import attention_flops, read_attention_csv
from simengine.calibration.formats.grouped_gemm_csv import read_grouped_gemm_csv
from simengine.errors import ConfigError

NCCL = Path(__file__).resolve().parent / "data" / "calibration" / "nccl_logs"


def test_attention_time_becomes_efficiency_on_causal_flops():
    flops = attention_flops("fwd", 1, 4096, 32, 128, 128, True)
    assert flops == pytest.approx(2 * 32 * 4096 * 4096 * 256 * (4097 / 8192))
    assert attention_flops("bwd", 1, 4096, 32, 128, 128, True) == pytest.approx(2.5 * flops)
    t_us = flops / (0.5 * 1000e12) * 1e6  # 50 % of a 1000 TFLOP/s peak
    text = f"# gpu: test\nphase,batch,seq_len,heads,kv_heads,d_qk,d_v,causal,time_us\nfwd,1,4096,32,8,128,128,1,{t_us}\n"
    (p,) = read_attention_csv(text, peak_tflops=1000)
    assert p.efficiency == pytest.approx(0.5) and p.kv_heads == 8 and p.phase == "fwd"


def test_attention_rows_refused_with_line_numbers():
    text = "phase,seq_len,heads,efficiency\nfwd,4096,32,0.4\nsideways,4096,32,0.4\nbwd,4096,32,0.00001\n"
    with pytest.raises(ConfigError) as e:
        read_attention_csv(text)
    msgs = " ".join(m for _, m in e.value.issues)
    assert "line 3" in msgs and "line 4" in msgs and e.value.field == "attention_csv"
    with pytest.raises(ConfigError, match="needs the GPU"):
        read_attention_csv("phase,seq_len,heads,tflops\nfwd,4096,32,400\n")


def test_grouped_gemm_reader():
    t_ms = 2 * 8 * 1024 * 4096 * 2048 / (0.4 * 1000e12) * 1e3
    text = f"groups,m,n,k,layout,time_ms\n8,1024,4096,2048,TN,{t_ms}\n8,1024,4096,2048,NN,{t_ms * 2}\n"
    a, b = read_grouped_gemm_csv(text, peak_tflops=1000)
    assert (a.efficiency, b.efficiency) == pytest.approx((0.4, 0.2)) and b.layout == "NN"
    with pytest.raises(ConfigError, match="line 2"):
        read_grouped_gemm_csv("groups,m,n,k,efficiency\n8,4294967297,8,8,0.5\n")


def test_calibrate_with_attention_and_grouped_tables():
    system = presets.load_spec("systems", "h100-sxm5-80gb")
    att = "phase,seq_len,heads,efficiency\nfwd,4096,32,0.4\nfwd,8192,32,0.5\nbwd,4096,32,0.3\n"
    grp = "groups,m,n,k,efficiency\n8,1024,4096,2048,0.35\n"
    new, summary = calibrate_with_summary(system, attention_csv=att, grouped_gemm_csv=grp)
    e = new.efficiency
    assert len(e.attention_table) == 3 and e.attention_fwd == pytest.approx(0.45) and e.attention_bwd == pytest.approx(0.3)
    assert e.grouped_gemm == pytest.approx(0.35) and len(e.grouped_gemm_table) == 1
    assert {p.target for p in summary.provenance} == {"efficiency.attention_table", "efficiency.grouped_gemm_table"}


@pytest.mark.parametrize("form", ["list of paths", "list of pairs", "mapping", "list of bytes"])
def test_nccl_logs_as_list_or_mapping(form):
    logs = sorted(NCCL.glob("*_all_reduce_*.log"))[:2]
    given = {"list of paths": logs, "list of pairs": [(p.name, p.read_text()) for p in logs],
             "mapping": {p.name: p.read_bytes() for p in logs}, "list of bytes": [p.read_bytes() for p in logs]}[form]
    system = presets.load_spec("systems", "h100-sxm5-80gb")
    new, summary = calibrate_with_summary(system, None, given)
    assert new.efficiency.collective_table and len({f.source for f in summary.collective_fits}) == 2


BOUNDS = {
    "efficiency 1e-5": "m,n,k,efficiency\n128,128,128,0.00001\n",
    "m above 2^31": "m,n,k,efficiency\n2147483649,128,128,0.5\n",
    "k above 2^31": "m,n,k,efficiency\n128,128,2147483649,0.5\n",
    "b above 2^20": "m,n,k,b,efficiency\n128,128,128,2000000,0.5\n",
    "time gives efficiency 1e-6": "m,n,k,time_s\n128,128,128,1000\n",
    "simumax m above 2^31": "table,op,efficiency,k_m,k_n,k_k\nop_shape,matmul,0.5,4294967296,8,8\n",
    "simumax efficiency 1e-6": "table,op,efficiency,k_m,k_n,k_k\nop_shape,matmul,0.000001,8,8,8\n",
}


@pytest.mark.parametrize("case", sorted(BOUNDS))
def test_schema_bounds_are_config_errors_naming_the_row(case):
    system = presets.load_spec("systems", "h100-sxm5-80gb")
    try:
        calibrate_with_summary(system, BOUNDS[case])
    except ValidationError as exc:  # pragma: no cover - the failure this test guards against
        raise AssertionError(f"ValidationError leaked: {exc}") from exc
    except ConfigError as exc:
        assert exc.field == "gemm_csv" and "line 2" in str(exc)
    else:
        raise AssertionError("accepted")


def test_an_empty_sweep_names_the_header_its_own_format_expects():
    """An empty memory-bandwidth CSV was told to expect 'm,n,k,efficiency' (a GEMM header)."""
    from simengine.calibration.formats.memory_csv import read_memory_csv
    from simengine.calibration.gemm import load_gemm_csv
    from simengine.errors import ConfigError

    with pytest.raises(ConfigError, match="expected e.g. 'bytes,time_us'"):
        read_memory_csv(b"# nothing measured\n")
    with pytest.raises(ConfigError, match="expected e.g. 'm,n,k,efficiency'"):
        load_gemm_csv(b"\n")


def test_a_shape_too_large_is_said_so_not_called_not_a_positive_integer():
    from simengine.calibration.gemm import load_gemm_csv
    from simengine.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        load_gemm_csv(b"m,n,k,efficiency\n99999999999999999999999,1024,1024,0.5\n-4,1024,1024,0.5\n")
    said = [m for _, m in err.value.issues]
    assert "line 2, column 'm': '99999999999999999999999' is too large (at most 15 digits)" in said
    assert "line 3, column 'm': '-4' is not a positive integer" in said


def test_a_zero_padded_shape_is_its_number():
    """'0000000000000001' (16 characters) was 'too large'; it is 1."""
    from simengine.calibration.csvutil import Issues, pos_int

    issues = Issues("gemm_csv")
    assert [pos_int(x, 2, "m", issues) for x in ("0000000000000001", "+12", "12.0", "0", "1.5")] == [1, 12, 12, None, None]
    assert [m for _, m in issues.items] == ["line 2, column 'm': '0' is not a positive integer",
                                           "line 2, column 'm': '1.5' is not a positive integer"]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-8-sig"])
def test_a_utf16_sweep_reads_as_its_text(encoding):
    """Excel's "Unicode text" export (UTF-16) read as UTF-8 gave the header "\ufffd\ufffdm, n, k" and a
    "missing column" error; the bytes say which encoding they are (a byte-order mark, or a NUL beside
    every ASCII character)."""
    from simengine.calibration.source import read_text

    text = "m,n,k,dtype,efficiency\n4096,4096,4096,bf16,0.62\n"
    assert read_text(text.encode(encoding), "gemm")[0] == text
    system = presets.load_spec("systems", "h100-sxm5-80gb")
    got, _ = calibrate_with_summary(system, text.encode(encoding))
    assert [p.efficiency for p in got.efficiency.gemm_table] == [0.62]


def test_a_cell_past_the_csv_limit_is_named_as_such():
    """A 200,000-character cell was reported as "a malformed quoted field" (Python's field limit)."""
    system = presets.load_spec("systems", "h100-sxm5-80gb")
    with pytest.raises(ConfigError) as e:
        calibrate_with_summary(system, "m,n,k,dtype,efficiency\n" + "x" * 200_000 + ",1,1,bf16,0.5\n")
    assert "a cell longer than" in str(e.value) and "malformed" not in str(e.value)


@pytest.mark.parametrize("reader, header, row", [
    ("gemm", "m,n,k,dtype,time_us", "4096,4096,4096,bf16,{t}"),
    ("attention", "phase,batch,seq_len,heads,kv_heads,d_qk,d_v,causal,time_us", "fwd,1,4096,32,8,128,128,1,{t}"),
    ("grouped_gemm", "groups,m,n,k,time_us", "8,1024,4096,2048,{t}"),
    ("memory", "bytes,time_us", "1073741824,{t}"),
])
def test_a_subnormal_time_is_refused_not_divided_by(reader, header, row):
    """A time of 1e-320 µs times 1e-6 rounds to 0 s: the GEMM, attention and grouped-GEMM readers
    raised ZeroDivisionError (the CLI's "internal error")."""
    from simengine import api

    system = presets.load_preset("systems", "h100-sxm5-80gb")
    with pytest.raises(ConfigError) as e:
        api.calibrate(system, **{reader: f"{header}\n{row.format(t='1e-320')}\n"})
    assert "line 2, column 'time_us': '1e-320' is too small to compute with" in str(e.value)


@pytest.mark.parametrize("t", ["1e-300", "1e300"])
def test_a_copy_time_no_fit_can_weigh_is_refused_without_numpy_warnings(t):
    """A memory sweep's time of 1e-300 µs (or 1e300) made the alpha-beta fit's weights 1/time²
    under- or overflow: numpy's divide-by-zero warnings on stderr, then "time does not grow with
    message size"."""
    import warnings

    from simengine import api

    system = presets.load_preset("systems", "h100-sxm5-80gb")
    sweep = "bytes,time_us\n" + "".join(f"{b},{2 * b / 3e6:.3f}\n" for b in (1 << 20, 1 << 24, 1 << 28))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ConfigError) as e:
            api.calibrate(system, memory=sweep + f"1073741824,{t}\n")
    assert e.value.field == "memory_csv" and f"a time of {float(t):.3g} µs is no measurement" in str(e.value)


def test_an_unclosed_quote_is_named_with_its_line_not_the_file_quoted_back():
    """A quote that never closes takes the rest of the file into one cell: in the header, every
    row went into a 'missing column (header: …the whole file…)' message over many lines."""
    from simengine.calibration.csvutil import read_rows

    text = 'm,n,"k,efficiency\n512,512,512,0.5\n1024,1024,1024,0.6\n'
    with pytest.raises(ConfigError) as e:
        read_rows(text, "gemm")
    msg = str(e.value)
    assert "line 1" in msg and "quote" in msg and "\n" not in msg and "1024" not in msg
    with pytest.raises(ConfigError, match="line 3: a quote"):   # in a data row: from its own line
        read_rows('m,n,k,efficiency\n512,512,512,0.5\n"1024,1024,1024,0.6\n2048,2048,2048,0.7\n', "gemm")
    assert read_rows('m,n,k,efficiency\n"512",512,512,0.5\n', "gemm")[1] == [(2, ["512", "512", "512", "0.5"])]
