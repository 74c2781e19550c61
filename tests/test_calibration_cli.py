"""``python -m simengine calibrate`` and the saved user systems store: what is printed, what is
saved (atomically, with provenance), what is refused, and that a bad input never overwrites a
good saved system; ``--system NAME`` finds the saved system."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from simengine import presets
from simengine.calibration import store
from simengine.cli import main
from simengine.errors import ConfigError

DATA = Path(__file__).resolve().parent / "data"
NCCL = DATA / "calibration" / "nccl_logs"
AR8 = NCCL / "oci-bmgpu4.8-nvlink_all_reduce_8gpu.log"
FIVE = NCCL / "xxrjun-c01-n1g8_5coll_8gpu.log"


def _gemm_csv(tmp_path: Path, rows: int = 40, bad: str | None = None) -> Path:
    lines = ["m,n,k,dtype,efficiency"]
    for i in range(rows):
        m = 256 * (1 + i % 8)
        lines.append(f"{m},{4096 >> (i % 3)},{1024 * (1 + i % 5)},bf16,{0.3 + 0.01 * (i % 40)}")
    if bad is not None:
        lines.append(bad)
    p = tmp_path / "gemm.csv"
    p.write_text("\n".join(lines) + "\n")
    return p


def _run(argv, capsys):
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_calibrate_prints_fits_and_saves_with_provenance(tmp_path, capsys):
    gemm = _gemm_csv(tmp_path)
    sysdir = tmp_path / "systems"
    code, out, err = _run(["calibrate", "--gemm", str(gemm), "--nccl", str(AR8), str(FIVE), "--base", "h100-sxm5-80gb",
                           "--name", "my-h100", "--systems-dir", str(sysdir), "--out", str(tmp_path / "sys.json")], capsys)
    assert code == 0, err
    assert "efficiency.gemm_table" in out and "fit error" in out and "RMS error" in out
    assert "used" in out and "all_to_all" in out
    doc = store.load_document(sysdir, "my-h100")
    prov = {p["target"]: p for p in doc["provenance"]}
    assert prov["efficiency.gemm_table"]["sha256"] == hashlib.sha256(gemm.read_bytes()).hexdigest()
    assert prov["efficiency.gemm_table"]["rows_used"] == 40 and prov["efficiency.gemm_table"]["fit_error"] is not None
    coll = [p for t, p in prov.items() if t.startswith("efficiency.collective_table")]
    assert coll and all(p["fit_error"] is not None and p["rows_used"] >= 1 for p in coll)
    saved = store.load_system(sysdir, "my-h100")
    assert saved.name == "my-h100" and len(saved.efficiency.gemm_table) == 40 and saved.efficiency.collective_table
    assert json.loads((tmp_path / "sys.json").read_text()) == saved.model_dump(mode="json")


def test_saved_system_is_found_by_name_after_the_presets(tmp_path, capsys):
    sysdir = tmp_path / "s"
    base = presets.load_spec("systems", "small")
    calibrated = base.model_copy(update={"name": "mine"})
    store.save_system(sysdir, "mine", calibrated)
    code, out, err = _run(["estimate", "--model", "small", "--system", "mine", "--strategy", "small", "--json",
                           "--systems-dir", str(sysdir)], capsys)
    assert code == 0, err
    assert json.loads(out)["step_time_s"] > 0
    # a preset of the same name wins over a saved system
    store.save_system(sysdir, "small", calibrated.model_copy(update={"num_gpus": 1}))
    assert presets.load_spec("systems", "small", user_systems=sysdir) == base
    code, _, err = _run(["estimate", "--model", "small", "--system", "nosuch", "--strategy", "small",
                         "--systems-dir", str(sysdir)], capsys)
    assert code == 2 and "nosuch" in err and err.count("\n") == 1


@pytest.mark.parametrize("name", ["../evil", "a/b", ".hidden", "x" * 65, "", "a..b", "na me", "é"])
def test_names_are_sanitized(tmp_path, name):
    with pytest.raises(ConfigError) as e:
        store.save_system(tmp_path, name, presets.load_spec("systems", "small"))
    assert e.value.field == "name"
    assert list(tmp_path.iterdir()) == []


HOSTILE = {
    "empty": "",
    "binary": "\x00\x01\x02\xff" * 50,
    "wrong columns": "a,b,c\n1,2,3\n",
    "negative": "m,n,k,efficiency\n128,128,128,-0.5\n",
    "nan": "m,n,k,efficiency\n128,128,128,nan\n",
    "zero time": "m,n,k,time_us\n128,128,128,0\n",
    "tiny efficiency": "m,n,k,efficiency\n128,128,128,0.00001\n",
    "huge m": "m,n,k,efficiency\n4294967296,128,128,0.5\n",
    "injection": "m,n,k,efficiency\n=cmd|' /C calc'!A0,128,128,0.5\n",
    "mixed units": "m,n,k,efficiency\n128,128,128,55%\n",
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_gemm_file_is_refused_and_saved_system_intact(tmp_path, capsys, case):
    sysdir = tmp_path / "systems"
    good = _gemm_csv(tmp_path)
    assert _run(["calibrate", "--gemm", str(good), "--base", "small", "--name", "keep", "--systems-dir", str(sysdir)],
                capsys)[0] == 0
    before = (sysdir / "keep.json").read_bytes()
    bad = tmp_path / "bad.csv"
    bad.write_bytes(HOSTILE[case].encode("utf-8", "surrogateescape"))
    code, out, err = _run(["calibrate", "--gemm", str(bad), "--base", "small", "--name", "keep", "--replace",
                           "--systems-dir", str(sysdir)], capsys)   # (allowed to replace: the bad file is what refuses)
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err and "ValidationError" not in err
    assert (sysdir / "keep.json").read_bytes() == before
    assert sorted(p.name for p in sysdir.iterdir()) == ["keep.json"]  # no temp file left behind


def test_row_level_errors_name_the_line(tmp_path, capsys):
    bad = _gemm_csv(tmp_path, rows=5, bad="512,512,512,bf16,-1")
    code, _, err = _run(["calibrate", "--gemm", str(bad), "--base", "small", "--name", "x",
                         "--systems-dir", str(tmp_path / "s")], capsys)
    assert code == 2 and "line 7" in err and "efficiency" in err


def test_row_count_is_bounded(tmp_path, capsys, monkeypatch):
    from simengine.calibration import csvutil

    monkeypatch.setattr(csvutil, "MAX_ROWS", 10)
    big = _gemm_csv(tmp_path, rows=11)
    code, _, err = _run(["calibrate", "--gemm", str(big), "--base", "small", "--name", "x",
                         "--systems-dir", str(tmp_path / "s")], capsys)
    assert code == 2 and "more than 10 data rows" in err


def test_nccl_log_too_slow_for_the_tier_is_refused_not_a_validation_error(tmp_path, capsys):
    # the real 8-GPU NVLink all_reduce, but with every time ×1e5: busbw < 1e-4 × the scale-up bandwidth
    lines = []
    for ln in AR8.read_text().splitlines():
        parts = ln.split()
        if len(parts) >= 12 and parts[0].isdigit():
            size = int(parts[0])
            t = float(parts[5]) * 1e5
            alg = size / (t * 1e3)
            parts[5:8] = [f"{t:.1f}", f"{alg:.6f}", f"{alg * 1.75:.6f}"]
            ln = "  ".join(parts)
        lines.append(ln)
    slow = tmp_path / "slow_all_reduce_8gpu.log"
    slow.write_text("\n".join(lines))
    code, _, err = _run(["calibrate", "--nccl", str(slow), "--base", "h100-sxm5-80gb", "--name", "x",
                         "--systems-dir", str(tmp_path / "s")], capsys)
    assert code == 2 and "ValidationError" not in err and "--nccl" in err and "nccl_log" not in err
    assert not (tmp_path / "s").exists()


def test_log_without_a_result_table_is_refused(tmp_path, capsys):
    p = tmp_path / "all_reduce.log"
    p.write_text("# nThread 1 nGpus 8 minBytes 8 maxBytes 1024\n# Using devices\nNCCL WARN something failed\n")
    code, _, err = _run(["calibrate", "--nccl", str(p), "--base", "small", "--name", "x",
                         "--systems-dir", str(tmp_path / "s")], capsys)
    assert code == 2 and "no nccl-tests result rows" in err


def test_calibrate_needs_an_input_and_a_valid_name(tmp_path, capsys):
    code, _, err = _run(["calibrate", "--base", "small", "--name", "x", "--systems-dir", str(tmp_path)], capsys)
    assert code == 2 and "at least one" in err
    code, _, err = _run(["calibrate", "--nccl", str(AR8), "--base", "small", "--name", "../x",
                         "--systems-dir", str(tmp_path)], capsys)
    assert code == 2 and "name" in err


def test_a_write_that_fails_midway_leaves_the_saved_system_intact(tmp_path, monkeypatch):
    good = presets.load_spec("systems", "small")
    path = store.save_system(tmp_path, "keep", good)
    before = path.read_bytes()

    def broken_fsync(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store.os, "fsync", broken_fsync)
    with pytest.raises(ConfigError) as e:
        store.save_system(tmp_path, "keep", good.model_copy(update={"num_gpus": 4}))
    assert e.value.field == "name" and "No space left" in str(e.value)
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["keep.json"]


def test_store_lists_and_refuses_foreign_files(tmp_path):
    store.save_system(tmp_path, "b-sys", presets.load_spec("systems", "small"))
    store.save_system(tmp_path, "a.sys", presets.load_spec("systems", "small"))
    (tmp_path / "not-ours.json").write_text('{"hello": 1}')
    (tmp_path / "broken.json").write_bytes(b"\xff\xfe{")
    assert store.list_systems(tmp_path) == ["a.sys", "b-sys", "broken", "not-ours"]
    for name in ("not-ours", "broken"):
        with pytest.raises(ConfigError) as e:
            store.load_system(tmp_path, name)
        assert e.value.field == "system"
    assert store.list_systems(tmp_path / "missing") == [] and store.list_systems(None) == []


def test_coverage_command_on_a_saved_system(tmp_path, capsys):
    code, _, err = _run(["calibrate", "--nccl", str(FIVE), "--base", "small", "--name", "cov",
                         "--systems-dir", str(tmp_path)], capsys)
    assert code == 0, err
    code, out, err = _run(["coverage", "--model", "small", "--system", "cov", "--strategy", "small",
                           "--systems-dir", str(tmp_path)], capsys)
    assert code == 0, err
    lines = {ln.split()[0]: ln for ln in out.splitlines() if ln.startswith("  ") and "%" in ln}
    assert "gemm" in lines and "total" in lines and "all_gather" in lines
    assert lines["gemm"].split()[4] == "100.0%"  # no GEMM table: default
    assert lines["all_gather"].split()[4] == "0.0%"  # the measured all_gather fit applies


def test_a_1_gb_file_is_refused_before_it_is_read(tmp_path, capsys):
    big = tmp_path / "huge.csv"
    with Path(big).open("wb") as fh:  # sparse: claims 1 GB, occupies nothing
        fh.write(b"m,n,k,efficiency\n")
        fh.truncate(1 << 30)
    code, _, err = _run(["calibrate", "--gemm", str(big), "--base", "small", "--name", "x",
                         "--systems-dir", str(tmp_path / "s")], capsys)
    assert code == 2 and "more than the" in err and "huge.csv" in err
    assert not (tmp_path / "s").exists()


def test_a_built_in_presets_name_is_refused_before_the_work(tmp_path, capsys):
    """presets resolve first, so a saved system named 'small' could never be picked: the CLI and
    the API refuse the name (store.check_not_preset)."""
    code, _, err = _run(["calibrate", "--nccl", str(AR8), "--base", "small", "--name", "h100-sxm5-80gb",
                         "--systems-dir", str(tmp_path / "s")], capsys)
    assert code == 2 and "built-in system preset" in err and not (tmp_path / "s").exists()
    from simengine import api

    with pytest.raises(ConfigError, match="built-in system preset"):
        api.save_user_system(tmp_path, "small", presets.load_spec("systems", "small"))


def test_a_binary_upload_says_what_is_wrong_in_words():
    """Python's csv text ("new-line character seen in unquoted field - do you need to open the file
    in universal-newline mode?") reached the Calibration page as is."""
    from simengine import api

    with pytest.raises(ConfigError) as e:
        api.calibrate(presets.load_spec("systems", "small"), gemm=b"m,n,k,efficiency\n1,2\r3,4,0.5\n")
    assert "not valid CSV (a stray carriage return or NUL byte" in str(e.value) and "universal-newline" not in str(e.value)


def test_gemm_fit_error_is_the_held_out_time_error_without_grid_aliasing():
    """OpenXLA's H100 table (b × m × n × k on a doubling grid): an evenly spaced hold-out took its
    whole k = 256 plane (stride 5, five k values), which the index could only extrapolate, and the
    studio showed a 65.8 % fit error for a table that predicts its unmeasured shapes' time to ~7 %."""
    from simengine.calibration.gemm import load_gemm_csv
    from simengine.calibration.provenance import GEMM_FIT_WARN, gemm_holdout_error
    from simengine.presets import load_spec

    text = (Path(__file__).parent / "data" / "calibration" / "gemm_sweeps" / "xla_sm90_h100_matmul_perf_table.csv").read_text()
    points = load_gemm_csv(text, peak_tflops=load_spec("systems", "h100-sxm5-80gb").gpu.peak_tflops, dtypes=("bf16",)).points
    err = gemm_holdout_error(points)
    assert err is not None and 0.01 < err < 0.10 and err < GEMM_FIT_WARN
    assert gemm_holdout_error(points) == err   # deterministic


def test_the_gemm_charts_held_out_points_are_interpolated_not_one_edge_plane():
    """The chart's held-out crosses (curves.gemm_curve) were every 5th point: on OpenXLA's table
    (five k values per (b, m, n)) all at k = 256, the grid's edge, so the "interpolation" it drew
    was a clamped extrapolation, 1.66x above the measured points on average. They are now drawn as
    the fit error's (provenance.holdout): from every k plane, and close to what was measured."""
    import statistics

    from simengine.calibration.curves import gemm_curve
    from simengine.calibration.gemm import load_gemm_csv
    from simengine.presets import load_spec

    text = (Path(__file__).parent / "data" / "calibration" / "gemm_sweeps" / "xla_sm90_h100_matmul_perf_table.csv").read_text()
    points = load_gemm_csv(text, peak_tflops=load_spec("systems", "h100-sxm5-80gb").gpu.peak_tflops, dtypes=("bf16",)).points
    rows = gemm_curve(points)
    held = [r for r in rows if r["held_out_prediction"] is not None]
    assert len(held) >= len(rows) // 6
    assert len({r["shape"].split("x")[2].split(" ")[0] for r in held}) >= 4   # k values: not one plane
    ratio = statistics.median(r["held_out_prediction"] / r["efficiency"] for r in held)
    assert 0.8 < ratio < 1.25
    assert gemm_curve(points) == rows   # deterministic


def test_a_table_too_sparse_to_interpolate_is_warned_about():
    from simengine.api import calibrate
    from simengine.presets import load_spec

    # efficiencies that jump between neighbouring shapes: no interpolation predicts the held-out ones
    import random

    rng = random.Random(1)
    rows = ["m,n,k,efficiency"] + [f"{m},{n},{k},{rng.choice((0.1, 0.9))}"
                                    for m in (256, 512, 1024, 2048, 4096) for n in (256, 1024, 4096) for k in (512, 2048, 8192)]
    _, summary = calibrate(load_spec("systems", "h100-sxm5-80gb"), gemm="\n".join(rows) + "\n")
    assert any("too sparse or too noisy" in w for w in summary.warnings), summary.warnings


def test_a_log_without_results_is_named_once():
    from simengine.api import calibrate
    from simengine.presets import load_spec

    with pytest.raises(ConfigError) as e:
        calibrate(load_spec("systems", "h100-sxm5-80gb"), nccl=[("garbage.log", "not a log\n")])
    msg = e.value.issues[0][1]
    assert msg.startswith("garbage.log: ") and msg.count("garbage.log") == 1, msg


def test_a_saved_system_is_replaced_only_with_replace(tmp_path, capsys):
    """The CLI replaced a saved system of the same name silently (the studio asks first)."""
    sysdir, good = tmp_path / "systems", _gemm_csv(tmp_path)
    args = ["calibrate", "--gemm", str(good), "--base", "small", "--name", "mine", "--systems-dir", str(sysdir)]
    assert _run(args, capsys)[0] == 0
    code, out, err = _run(args, capsys)
    assert code == 2 and not out and "already saved" in err and "--replace" in err and err.count("\n") == 1
    assert _run(args + ["--replace"], capsys)[0] == 0


def test_an_out_path_it_cannot_write_fails_before_anything_is_saved(tmp_path, capsys):
    """--out /dev/full printed "saved: …", then failed, leaving the system saved."""
    sysdir, good = tmp_path / "systems", _gemm_csv(tmp_path)
    code, out, err = _run(["calibrate", "--gemm", str(good), "--base", "small", "--name", "mine", "--systems-dir",
                           str(sysdir), "--out", str(tmp_path)], capsys)   # a folder: not writable as a file
    assert code == 2 and err.startswith("error: --out:") and "saved:" not in out
    assert not (sysdir / "mine.json").exists()


def test_out_never_replaces_a_measured_file_nor_makes_folders(tmp_path, capsys):
    """``--out sweep.csv`` replaced the measured sweep with the JSON, and ``--out /no/such/dir/x.json``
    made the folders: both are refused before any work, the sweep and the systems folder untouched."""
    sysdir, good = tmp_path / "systems", _gemm_csv(tmp_path)
    before = good.read_bytes()
    base = ["calibrate", "--gemm", str(good), "--base", "small", "--name", "mine", "--systems-dir", str(sysdir)]
    for out, said in ((str(good), "a measured file this command reads"),
                      (str(tmp_path / "." / good.name), "a measured file this command reads"),
                      (str(tmp_path / "no" / "such" / "x.json"), "create it first")):
        code, printed, err = _run(base + ["--out", out], capsys)
        assert code == 2 and said in err and err.count("\n") == 1 and not printed
    assert good.read_bytes() == before and not (tmp_path / "no").exists() and not sysdir.exists()
    assert _run(base + ["--out", str(tmp_path / "sys.json")], capsys)[0] == 0


def test_a_name_with_a_final_newline_is_refused(tmp_path, capsys):
    """'$' matched before a final newline: a file 'evil\\n.json' was saved and 'saved: evil' printed a line break."""
    code, _, err = _run(["calibrate", "--gemm", str(_gemm_csv(tmp_path)), "--base", "small", "--name", "evil\n",
                         "--systems-dir", str(tmp_path / "s")], capsys)
    assert code == 2 and "not a valid system name" in err and not (tmp_path / "s").exists()


def test_a_system_too_large_to_load_is_never_saved(tmp_path, monkeypatch):
    """A 39.9 MB system was saved that nothing could load (the loader's limit is 32 MiB), over a good one."""
    from simengine import presets
    from simengine.calibration import store
    from simengine.errors import ConfigError

    system = presets.load_spec("systems", "small")
    store.save_system(tmp_path, "good", system)
    before = (tmp_path / "good.json").read_bytes()
    monkeypatch.setattr(store, "MAX_FILE_BYTES", len(before) - 1)
    with pytest.raises(ConfigError, match="not saved"):
        store.save_system(tmp_path, "good", system)
    assert (tmp_path / "good.json").read_bytes() == before


def test_a_saved_system_is_found_by_name_beyond_the_listing_limit(tmp_path, monkeypatch):
    """With more than 1,000 saved systems a new one could not be used by its name."""
    from simengine import presets
    from simengine.calibration import store

    system = presets.load_spec("systems", "small")
    for name in ("a", "b", "zz"):
        store.save_system(tmp_path, name, system)
    monkeypatch.setattr(store, "MAX_SYSTEMS", 2)
    assert store.list_systems(tmp_path) == ["a", "b"]
    assert presets.load_spec("systems", "zz", user_systems=tmp_path).name == system.name


def test_a_system_too_large_to_save_writes_no_out_file(tmp_path, capsys, monkeypatch):
    """The size was checked when saving, after --out was written: "wrote: …", then the error."""
    from simengine.calibration import store

    monkeypatch.setattr(store, "MAX_FILE_BYTES", 1000)
    out = tmp_path / "sys.json"
    code, printed, err = _run(["calibrate", "--gemm", str(_gemm_csv(tmp_path)), "--base", "small", "--name", "big",
                               "--systems-dir", str(tmp_path / "s"), "--out", str(out)], capsys)
    assert code == 2 and "not saved" in err and "wrote:" not in printed
    assert not out.exists() and not (tmp_path / "s" / "big.json").exists()


def test_search_finds_a_saved_system(tmp_path, capsys):
    """``search --system NAME`` said "unknown system preset": the one command without the saved
    systems (README: they resolve after the presets) and without --systems-dir."""
    sysdir = tmp_path / "systems"
    assert _run(["calibrate", "--nccl", str(AR8), "--base", "small", "--name", "mine", "--systems-dir", str(sysdir)], capsys)[0] == 0
    code, out, err = _run(["search", "--model", "small", "--system", "mine", "--systems-dir", str(sysdir), "--seq-len", "8192",
                           "--global-batch", "64", "--top", "2", "--space", "strategy.tp=1,2", "--space", "strategy.pp=1", "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["candidates"]
    code, _, err = _run(["search", "--model", "small", "--system", "mine", "--seq-len", "8192", "--global-batch", "64",
                         "--systems-dir", str(tmp_path / "elsewhere")], capsys)
    assert code == 2 and "mine" in err


def test_an_unknown_system_says_where_saved_systems_were_looked_for(tmp_path, capsys):
    code, _, err = _run(["estimate", "--model", "small", "--strategy", "small", "--system", "nosuch",
                         "--systems-dir", str(tmp_path)], capsys)
    assert code == 2 and "unknown system preset 'nosuch'" in err and f"no saved system of that name in {tmp_path}" in err


def test_a_systems_dir_that_is_no_folder_is_said_as_such(tmp_path, capsys):
    """--systems-dir /dev/null said "cannot save 'mine': File exists"."""
    afile = tmp_path / "f"
    afile.write_text("x")
    for where in ("/dev/null", str(afile)):
        code, _, err = _run(["calibrate", "--nccl", str(AR8), "--base", "small", "--name", "mine", "--systems-dir", where], capsys)
        assert code == 2 and "is not a folder" in err and err.count("\n") == 1


def test_every_bad_measured_input_is_said_at_once():
    """A bad GEMM sweep beside bad nccl-tests logs said only the sweep's problem; the logs' came
    after the sweep was put right."""
    import pytest

    from simengine import api, presets
    from simengine.errors import ConfigError

    system = presets.load_preset("systems", "h100-sxm5-80gb")
    with pytest.raises(ConfigError) as e:
        api.calibrate(system, gemm="m,n,k\n1,2\n", nccl={"a.log": "nothing to read here\n"})
    fields = {f for f, _ in e.value.issues}
    assert any(f.startswith("gemm") for f in fields) and any(f.startswith("nccl") for f in fields), e.value.issues


def test_a_path_over_the_file_system_name_limit_is_one_line_not_an_internal_error(tmp_path, capsys):
    """--out DIR/x.json and --systems-dir DIR with a 300-character DIR: Path.is_dir / exists raise
    OSError(ENAMETOOLONG) rather than say False, and the CLI printed "internal error: OSError"."""
    long = str(tmp_path / ("a" * 300))
    code, _, err = _run(["calibrate", "--nccl", str(AR8), "--base", "small", "--name", "mine", "--out", long + "/x.json",
                         "--systems-dir", str(tmp_path)], capsys)
    assert code == 2 and err.startswith("error: --out: ") and "File name too long" in err and err.count("\n") == 1
    code, _, err = _run(["calibrate", "--nccl", str(AR8), "--base", "small", "--name", "mine", "--systems-dir", long], capsys)
    assert code == 2 and err.startswith("error: systems_dir: ") and "File name too long" in err and err.count("\n") == 1
