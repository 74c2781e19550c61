"""The real nccl-tests logs in tests/data/calibration/nccl_logs (SOURCES.md), and the variants users paste, made
from them: no rank count anywhere (inferred from busbw/algbw and said so), MPI --tag-output
prefixes, warnings between rows, a table cut off mid-run, a file with no result table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from simengine import presets
from simengine.calibration import calibrate_with_summary, parse_nccl_log
from simengine.collectives import bus_factor
from simengine.errors import ConfigError

NCCL = Path(__file__).resolve().parent / "data" / "calibration" / "nccl_logs"
LOGS = sorted(NCCL.glob("*.log"))
AR16 = NCCL / "nccltests309-xe9680_all_reduce_16gpu.log"


def _rows(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if re.match(r"^\s*\d+\s+\d+\s+\w+", ln)]


def _anonymous(text: str) -> str:
    """Only the column header and rows: no command, no device list, no nThread line."""
    head = [ln for ln in text.splitlines() if re.match(r"^#\s+size\s+count", ln)]
    return "\n".join(head + _rows(text))


def test_every_real_log_parses_with_consistent_rows():
    assert len(LOGS) == 7 and (NCCL / "SOURCES.md").is_file()
    for path in LOGS:
        log = parse_nccl_log(path)
        assert log.tables, path.name
        for t in log.tables:
            assert t.n_ranks and t.rows
            for r in t.rows:
                assert r.algbw_gbs == pytest.approx(r.size_bytes / (r.time_us * 1e3), abs=0.006, rel=0.011)


def test_rank_count_inferred_from_busbw_over_algbw_and_said():
    text = _anonymous(AR16.read_text())
    t = parse_nccl_log(text, collective="all_reduce").tables[0]
    assert t.n_ranks == 16 and t.rank_source == "data"
    assert any("inferred from the busbw/algbw" in w for w in t.warnings)
    big = [r for r in t.rows if r.algbw_gbs >= 1]
    assert all(r.busbw_gbs / r.algbw_gbs == pytest.approx(bus_factor("all_reduce", 16), abs=0.01) for r in big)


def test_all_gather_ranks_from_count_column():
    t = parse_nccl_log(NCCL / "dstack-a3mega-c0_all_gather_16gpu.log").tables[0]
    assert t.n_ranks == 16 and t.rank_source == "data" and any("size/count" in w for w in t.warnings)


def test_tagged_mpi_output_and_interleaved_warnings():
    plain = parse_nccl_log(AR16).tables[0]
    lines = AR16.read_text().splitlines()
    tagged = []
    for i, ln in enumerate(lines):
        tagged.append(f"[1,0]<stdout>:{ln}")
        if i % 7 == 0:
            tagged.append("[1,3]<stderr>:NCCL WARN NET/IB : Got async event : port error")
    t = parse_nccl_log("\n".join(tagged)).tables[0]
    assert (t.collective, t.n_ranks) == (plain.collective, plain.n_ranks) and t.rows == plain.rows


def test_truncated_table_keeps_the_complete_rows():
    text = AR16.read_text()
    rows = _rows(text)
    cut = text[: text.index(rows[20])] + rows[20][: len(rows[20]) // 2]  # the 21st row cut in the middle
    t = parse_nccl_log(cut).tables[0]
    assert len(t.rows) == 20 and t.n_ranks == 16


def test_a_log_with_no_result_table_is_refused_clearly():
    head = "\n".join(ln for ln in AR16.read_text().splitlines() if not re.match(r"^\s*\d+\s+\d+\s+\w+", ln))
    with pytest.raises(ConfigError) as e:
        parse_nccl_log(head, name="all_reduce_16gpu.log")
    assert e.value.field == "nccl_log" and "no nccl-tests result rows" in str(e.value)


def test_all_seven_logs_at_once_calibrate():
    system = presets.load_spec("systems", "h100-sxm5-80gb")
    new, summary = calibrate_with_summary(system, None, LOGS)
    assert {f.source for f in summary.collective_fits} == {p.name for p in LOGS}
    kinds = {(p.kind, p.tier) for p in new.efficiency.collective_table}
    assert ("all_reduce", "scale_up") in kinds and ("all_gather", "scale_out") in kinds
