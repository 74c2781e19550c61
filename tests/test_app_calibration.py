"""AppTest of the Calibration page: uploads, fits and plots, coverage, apply, save as a named
system (then offered by the System editor's preset picker), and failures that save nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
NCCL = ROOT / "tests" / "data" / "calibration" / "nccl_logs"
TIMEOUT = 90


@pytest.fixture
def systems_dir(tmp_path, monkeypatch):
    d = tmp_path / "systems"
    monkeypatch.setenv("SIMENGINE_SYSTEMS_DIR", str(d))
    return d


def gemm_csv(rows: int = 30) -> bytes:
    lines = ["m,n,k,dtype,efficiency"] + [f"{256 * (1 + i % 6)},{1024 * (1 + i % 4)},{512 * (1 + i % 5)},bf16,"
                                          f"{0.35 + 0.01 * i:.3f}" for i in range(rows)]
    return ("\n".join(lines) + "\n").encode()


def open_cal() -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.run()
    at.switch_page("pages/calibration.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def texts(elements) -> str:
    return "\n".join(str(e.value) for e in elements)


def calibrate(at: AppTest) -> AppTest:
    at.file_uploader(key="cal.gemm").upload("sweep.csv", gemm_csv(), "text/csv")
    logs = [NCCL / "xxrjun-c01-n1g8_5coll_8gpu.log", NCCL / "dstack-a3mega-c0_all_gather_16gpu.log"]
    at.file_uploader(key="cal.nccl").set_value([(p.name, p.read_bytes(), "text/plain") for p in logs])
    at.run()
    at.button(key="cal.run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_upload_calibrate_shows_fits_plots_and_coverage(systems_dir):
    at = calibrate(open_cal())
    assert not at.error, texts(at.error)
    labels = {m.label: m.value for m in at.metric}
    assert labels["GEMM points"] == "30" and labels["Collective fits used"].endswith("of 6")
    charts = at.get("vega_lite_chart")
    assert len(charts) == 2  # GEMM and collectives (no attention file)
    frames = [df.value for df in at.dataframe]
    cov = next(f for f in frames if "op kind" in f.columns)
    gemm = cov[cov["op kind"] == "gemm"].iloc[0]
    assert gemm["default"] == 0 and gemm["measured"] + gemm["interpolated"] + gemm["extrapolated"] == pytest.approx(100)
    prov = next(f for f in frames if "sha256" in f.columns)
    assert "efficiency.gemm_table" in set(prov["field"])
    # every fit names the file it came from (the GEMM sweep's was blank: the engine gets bytes only)
    assert dict(zip(prov["field"], prov["file"]))["efficiency.gemm_table"] == "sweep.csv"
    assert all(prov["file"]), prov
    # the scenario is untouched until "Use in this scenario"
    system = json.loads(at.session_state["cfg.system"])
    assert not system["efficiency"]["gemm_table"]
    at.button(key="cal.apply").click().run()
    system = json.loads(at.session_state["cfg.system"])
    assert len(system["efficiency"]["gemm_table"]) == 30 and system["efficiency"]["collective_table"]
    assert "Calibrated: 30 GEMM point(s)" in texts(at.success)


def test_save_named_system_then_pick_it_on_the_system_page(systems_dir):
    at = calibrate(open_cal())
    at.text_input(key="cal.name").input("lab-h100").run()
    at.button(key="cal.save").click().run()
    assert (systems_dir / "lab-h100.json").is_file(), texts(at.error)
    assert '"sweep.csv"' in (systems_dir / "lab-h100.json").read_text()  # the GEMM fit's file, kept
    assert "Saved as" in texts(at.success)
    at.switch_page("pages/system.py").run()
    pick = at.selectbox(key="pick.system")
    assert "user: lab-h100" in pick.options
    pick.select("user: lab-h100").run()
    at.button(key="load.system").click().run()
    assert not at.exception
    system = json.loads(at.session_state["cfg.system"])
    assert system["name"] == "lab-h100" and len(system["efficiency"]["gemm_table"]) == 30
    at.switch_page("pages/estimate.py").run()
    assert not at.exception and not at.error, texts(at.error)


def test_the_saved_names_command_line_hint_is_literal(systems_dir):
    """A name such as lab_h100_ was put in the code span escaped for Markdown: the hint read
    `--system lab_h100\\_`, which names no saved system when copied."""
    at = calibrate(open_cal())
    at.text_input(key="cal.name").input("_lab_h100_").run()
    at.button(key="cal.save").click().run()
    assert (systems_dir / "_lab_h100_.json").is_file(), texts(at.error)
    # saved outside ~/.simengine/systems ($SIMENGINE_SYSTEMS_DIR), where the CLI finds no name: the file itself
    assert f"`--system {systems_dir / '_lab_h100_.json'}`" in texts(at.success)
    from ui import calibration_run

    assert Path.home() / ".simengine" / "systems" == calibration_run.DEFAULT_SYSTEMS_DIR


@pytest.mark.parametrize("name", ["../escape", "a/b", ".x"])
def test_bad_name_saves_nothing(systems_dir, name):
    at = calibrate(open_cal())
    at.text_input(key="cal.name").input(name).run()
    at.button(key="cal.save").click().run()
    assert not at.exception and "Not saved" in texts(at.error)
    assert not systems_dir.exists() or list(systems_dir.iterdir()) == []


def test_failed_calibration_keeps_the_saved_system(systems_dir):
    at = calibrate(open_cal())
    at.text_input(key="cal.name").input("keep").run()
    at.button(key="cal.save").click().run()
    before = (systems_dir / "keep.json").read_bytes()
    at.file_uploader(key="cal.gemm").set_value(("bad.csv", b"m,n,k,efficiency\n=cmd|' /C calc'!A0,1,1,0.5\n", "text/csv"))
    at.file_uploader(key="cal.nccl").clear()
    at.run()
    at.button(key="cal.run").click().run()
    assert not at.exception and "Calibration failed" in texts(at.error) and "line 2" in texts(at.error)
    assert not [b for b in at.button if b.key in ("cal.apply", "cal.save")]  # a failed result cannot be used or saved
    assert (systems_dir / "keep.json").read_bytes() == before


def test_nothing_uploaded_is_a_message(systems_dir):
    at = open_cal()
    at.button(key="cal.run").click().run()
    assert not at.exception and "Upload at least one file" in texts(at.error)


def test_file_names_in_messages_are_escaped(systems_dir):
    at = open_cal()
    name = "[sign in](https://evil.example) **x**_all_gather.log"
    log = (NCCL / "dstack-a3mega-c0_all_gather_16gpu.log").read_bytes()  # its rank count is inferred: a warning names the file
    at.file_uploader(key="cal.nccl").set_value([(name, log, "text/plain")])
    at.run()
    at.button(key="cal.run").click().run()
    assert not at.exception
    shown = [m.value for m in at.markdown if "evil" in str(m.value)]
    assert shown, "the warning naming the file is shown"
    for text in shown:
        assert "[sign in](https" not in text and "**x**" not in text  # rendered as literal text, not a link / bold


def test_a_saved_system_is_replaced_only_when_the_user_says_so(systems_dir):
    """On a shared server another session may have saved the name: saving over it needs "Replace
    the saved system of that name" ticked; until then the button is disabled and the file kept."""
    at = calibrate(open_cal())
    at.text_input(key="cal.name").input("shared").run()
    at.button(key="cal.save").click().run()
    before = (systems_dir / "shared.json").read_bytes()
    at.run()
    assert at.button(key="cal.save").disabled and at.checkbox(key="cal.replace").value is False
    assert (systems_dir / "shared.json").read_bytes() == before
    at.checkbox(key="cal.replace").check().run()
    assert not at.button(key="cal.save").disabled
    at.button(key="cal.save").click().run()
    assert "Saved as" in texts(at.success) and not at.exception


def test_a_built_in_presets_name_is_refused(systems_dir):
    """A saved system named like a system preset could never be picked by that name (presets
    resolve first), and the success message's --system hint was false."""
    at = calibrate(open_cal())
    at.text_input(key="cal.name").input("small").run()
    at.button(key="cal.save").click().run()
    assert "built-in system preset" in texts(at.error) and not (systems_dir / "small.json").exists()


def test_the_page_says_what_the_calibration_changes_in_the_scenario(systems_dir):
    """It said only "Calibrated: 30 GEMM point(s) …"; the estimate moved (18.7 → 20.9 s on medium)
    and only the Estimate page showed it. Now: the step, tokens/s and MFU with the current and the
    calibrated system (the Estimate page's numbers), and the fields the calibration sets."""
    from simengine import api

    at = calibrate(open_cal())
    effect = next(df.value for df in at.dataframe if "calibrated" in df.value.columns)
    row = dict(zip(effect[""], zip(effect["current system"], effect["calibrated"], effect["change [%]"])))
    scenario = {s: json.loads(at.session_state[f"cfg.{s}"]) for s in ("model", "system", "strategy")}
    now = api.estimate(scenario)
    assert row["step time [s]"][0] == f"{now.step_time_s:,.4f}"
    cal_step = float(row["step time [s]"][1].replace(",", ""))
    assert row["step time [s]"][2] == pytest.approx((cal_step / now.step_time_s - 1) * 100, abs=0.01)
    assert cal_step != pytest.approx(now.step_time_s, rel=1e-3)   # the sweep's efficiencies move it
    said = texts(at.caption)
    assert "System fields it sets:" in said and "efficiency.gemm_table" in said
    at.button(key="cal.apply").click().run()   # in use: nothing left to change
    effect = next(df.value for df in at.dataframe if "calibrated" in df.value.columns)
    assert list(effect["current system"]) == list(effect["calibrated"])
    assert "nothing changes (already in use)" in texts(at.caption)


def test_an_uploads_error_is_said_under_it_naming_its_file(systems_dir):
    """Every error was one box under the Calibrate button naming the engine's fields (gemm_csv,
    memory_csv): now each is under its upload, naming the file."""
    at = open_cal()
    at.file_uploader(key="cal.gemm").set_value(("bad.csv", b"m,n,k,efficiency\n99999999999999999999999,1,1,0.5\n", "text/csv"))
    at.file_uploader(key="cal.memory").set_value(("bw.csv", b"# empty\n", "text/csv"))
    at.run()
    at.button(key="cal.run").click().run()
    assert not at.exception
    left = texts(at.columns[0].error).replace("\\", "")   # the GEMM and attention uploads' column (escaped Markdown)
    assert "bad.csv: line 2, column 'm'" in left and "too large" in left and "gemm_csv" not in left
    assert "see the message under the upload" in texts(at.error)
    at.file_uploader(key="cal.gemm").clear()   # (the first bad input stops the calibration)
    at.run()
    at.button(key="cal.run").click().run()
    said = texts(at.error).replace("\\", "")
    assert "bw.csv: no header row (expected e.g. 'bytes,time_us')" in said and "memory_csv" not in said
    assert "bad.csv" not in said


def test_an_uploads_error_leaves_with_its_file(systems_dir):
    """A refused file removed and a good one uploaded: "wrongcols.csv: missing column …" stayed
    under the GEMM box until Calibrate was clicked again."""
    at = open_cal()
    at.file_uploader(key="cal.gemm").set_value(("wrongcols.csv", b"a,b,c\n1,2,3\n", "text/csv"))
    at.run()
    at.button(key="cal.run").click().run()
    assert "wrongcols.csv" in texts(at.columns[0].error)
    at.file_uploader(key="cal.gemm").set_value(("sweep.csv", gemm_csv(), "text/csv"))
    at.run()
    assert "wrongcols.csv" not in texts(at.columns[0].error)


def test_spaces_around_a_saved_name_are_not_part_of_it(systems_dir):
    at = calibrate(open_cal())
    at.text_input(key="cal.name").input("  lab-b  ").run()
    at.button(key="cal.save").click().run()
    assert (systems_dir / "lab-b.json").is_file(), texts(at.error)


def test_a_change_that_rests_on_extrapolation_says_so(systems_dir):
    """A sweep up to m = 1,536 priced every GEMM of the 8,192-token scenario from its edge, and the
    page showed the change (MFU 55 → 61 %) with no word that it was extrapolated. Now a warning
    under the change gives the share; a sweep that covers the shapes gets none."""
    from ui.calibration_run import extrapolation_note

    at = calibrate(open_cal())
    warned = texts(at.warning)
    assert "beyond the measured shapes" in warned and "gemm" in warned
    cov = next(df.value for df in at.dataframe if "op kind" in df.value.columns)
    total = float(cov.loc[cov["op kind"] == "total", "extrapolated"].iloc[0])
    assert f"{total:.0f} % of this scenario's op time" in warned and total >= 25
    covered = [{"op kind": "gemm", "extrapolated": 0.0}, {"op kind": "total", "extrapolated": 10.0}]
    assert extrapolation_note(covered) == "" and extrapolation_note("no scenario") == ""


def test_a_result_kept_after_another_page_names_the_files_it_came_from(systems_dir):
    """Back on the page the result was still shown while every upload box was empty, and
    'Calibrate' then said "Upload at least one file": the page says which files it came from."""
    at = calibrate(open_cal())
    assert "uploaded earlier" not in texts(at.caption)   # the files are still in their boxes
    at.switch_page("pages/estimate.py").run()
    at.switch_page("pages/calibration.py").run()
    assert not at.exception, [e.value for e in at.exception]
    said = texts(at.caption)
    assert "sweep.csv" in said and "uploaded earlier" in said and "upload the files again" in said


def test_use_keeps_the_edits_made_to_the_system_since_calibrating(systems_dir):
    """"Use in this scenario" set the whole system calibrated earlier: a GPU count changed since
    went back to 8, and the effect table blamed the calibration for +100 % step time. Now it sets
    the fitted fields alone on the system as it is; the effect and the fields it lists are theirs."""
    at = calibrate(open_cal())
    system = json.loads(at.session_state["cfg.system"])
    at.session_state["cfg.system"] = json.dumps({**system, "num_gpus": 16})   # an edit on the System page
    at.run()
    said = texts(at.caption)
    assert "System fields it sets:" in said and "num_gpus" not in said
    at.button(key="cal.apply").click().run()
    system = json.loads(at.session_state["cfg.system"])
    assert system["num_gpus"] == 16 and len(system["efficiency"]["gemm_table"]) == 30
    assert system["efficiency"]["collective_table"]


def test_a_calibration_of_another_gpu_cannot_be_used(systems_dir):
    """Measured on the scenario's H100, then the System switched to another GPU: its tables are
    not that GPU's, so "Use" is disabled and the page says why (it used to put the old system back)."""
    from simengine import presets

    at = calibrate(open_cal())
    b200 = presets.load_spec("systems", "b200-sxm-180gb").model_dump(mode="json")
    at.session_state["cfg.system"] = json.dumps({**b200, "num_gpus": 8})
    at.run()
    assert at.button(key="cal.apply").disabled
    assert "calibration measured NVIDIA H100" in texts(at.warning)


def test_the_replace_tick_does_not_carry_over_to_another_name(systems_dir):
    """Ticked for one saved name, then another saved name typed: the tick stayed and one click
    overwrote a system the user never confirmed."""
    at = calibrate(open_cal())
    for name in ("one", "two"):
        at.text_input(key="cal.name").input(name).run()
        at.button(key="cal.save").click().run()
    at.text_input(key="cal.name").input("one").run()
    at.checkbox(key="cal.replace").check().run()
    assert not at.button(key="cal.save").disabled
    at.text_input(key="cal.name").input("two").run()
    assert at.checkbox(key="cal.replace").value is False and at.button(key="cal.save").disabled


def test_a_saved_system_keeps_every_measured_gemm_point(systems_dir):
    """The scenario keeps an evenly spaced sample of a large sweep (its link stays short); the
    saved system kept the sample too, while its provenance said every row was used."""
    from ui.tables import MAX_GEMM_POINTS

    at = open_cal()
    rows = ["m,n,k,dtype,efficiency"] + [f"{128 * (1 + i % 50)},{256 * (1 + (i // 50) % 10)},{512 * (1 + i // 500)},bf16,"
                                         f"{0.3 + 0.1 * (i % 5):.2f}" for i in range(MAX_GEMM_POINTS + 500)]
    at.file_uploader(key="cal.gemm").upload("big.csv", ("\n".join(rows) + "\n").encode(), "text/csv")
    at.run()
    at.button(key="cal.run").click().run()
    at.text_input(key="cal.name").input("big").run()
    at.button(key="cal.save").click().run()
    saved = json.loads((systems_dir / "big.json").read_text())
    system = saved.get("system", saved)
    assert len(system["efficiency"]["gemm_table"]) == MAX_GEMM_POINTS + 500
    at.button(key="cal.apply").click().run()
    assert len(json.loads(at.session_state["cfg.system"])["efficiency"]["gemm_table"]) == MAX_GEMM_POINTS


def test_warnings_about_many_tables_are_said_once_with_their_count():
    """7,368 warnings, the first 50 all "duplicate of an earlier table": the GPU mismatch was the
    last and never shown. The same warning is listed once with its count, the rarest first."""
    from ui.calibration_run import warning_lines

    dup = [f"big.log: table {i}: duplicate of an earlier table; dropped" for i in range(2, 7300)]
    lines = warning_lines([*dup, "a100.log: measured on NVIDIA A100-SXM4-40GB, but the system's GPU is NVIDIA H100"])
    assert lines[0].startswith("a100.log: measured on NVIDIA A100")
    assert lines[1] == "big.log: duplicate of an earlier table; dropped (7,298 tables)" and len(lines) == 2
    many = warning_lines([f"w{i}" for i in range(80)])
    assert len(many) == 50 and many[-1] == "… and 31 more kinds of warning"


def test_every_page_says_the_system_is_calibrated(systems_dir):
    """After "Use in this scenario" the sidebar and the Estimate page read "8 × NVIDIA H100" as
    before: nothing said the numbers now come from measured tables."""
    at = calibrate(open_cal())
    at.button(key="cal.apply").click().run()
    at.switch_page("pages/estimate.py").run()
    said = "\n".join(str(m.value) for m in at.sidebar.markdown)
    assert "calibrated: 30 GEMM shapes, 6 collective fits" in said, said


LOGS = ROOT / "tests" / "data" / "logs"


def test_a_training_log_is_compared_and_its_refit_used(systems_dir):
    """The studio had no training-log check (the CLI's check-run only): upload a torchtitan log
    of the scenario, read measured beside predicted, refit the compute efficiency and use it."""
    from simengine import api
    from simengine.presets import load_spec

    at = open_cal()
    cfg = {"model": load_spec("models", "llama3-8b").model_dump(mode="json"),
           "system": {**load_spec("systems", "h100-sxm5-80gb").model_dump(mode="json"), "num_gpus": 8},
           "strategy": load_spec("strategies", "llama3-8b-fsdp").model_dump(mode="json")}
    for s in ("model", "system", "strategy"):
        at.session_state[f"cfg.{s}"] = json.dumps(cfg[s])
    at.run()
    log = LOGS / "torchtitan_llama3_8b_8xh100.log"
    at.file_uploader(key="cal.log").upload(log.name, log.read_bytes(), "text/plain")
    at.checkbox(key="cal.log.refit").check()
    at.run()
    at.button(key="cal.log.run").click().run()
    assert not at.exception and not at.error, texts(at.error)
    want = api.check_run(cfg, log.read_bytes(), refit=True)
    table = next(df.value for df in at.dataframe if "measured" in df.value.columns)
    assert table.iloc[0]["measured"] == f"{want['measured_step_s']:,.4f}"
    assert table.iloc[0]["predicted"] == f"{want['predicted_step_s']:,.4f}"
    assert f"× {want['refit']['value']:.3f}" in texts(at.markdown)
    at.button(key="cal.log.use").click().run()
    system = json.loads(at.session_state["cfg.system"])
    assert system["efficiency"]["gemm"] == pytest.approx(want["refit"]["system"]["efficiency"]["gemm"])
    assert system["efficiency"]["gemm"] != cfg["system"]["efficiency"]["gemm"]
    got = api.estimate({**cfg, "system": system}).step_time_s
    assert got == pytest.approx(api.estimate({**cfg, "system": want["refit"]["system"]}).step_time_s, rel=1e-9)
    assert "Compute efficiencies scaled by" in texts(at.success)


def test_a_refit_of_a_log_the_scenario_contradicts_cannot_be_used(systems_dir):
    """The Mixtral log states 16 GPUs at tp 4; on the small preset (8 GPUs, tp 2) its refit would
    fold that difference into the compute efficiency: it is shown, not offered for use."""
    at = open_cal()
    log = LOGS / "megatron_mixtral8x7b_16xh100.log"
    at.file_uploader(key="cal.log").upload(log.name, log.read_bytes(), "text/plain")
    at.checkbox(key="cal.log.refit").check()
    at.run()
    at.button(key="cal.log.run").click().run()
    assert not at.exception
    assert "The log states world_size = 16" in texts(at.warning)
    assert at.button(key="cal.log.use").disabled and "The log contradicts the scenario" in texts(at.caption)


def test_a_bad_training_log_is_said_with_its_name(systems_dir):
    at = open_cal()
    at.file_uploader(key="cal.log").upload("<b>x</b>.log", b"no iterations here\n", "text/plain")
    at.run()
    at.button(key="cal.log.run").click().run()
    assert not at.exception
    err = texts(at.error)
    assert "no training iterations" in err and "<b>" not in err
