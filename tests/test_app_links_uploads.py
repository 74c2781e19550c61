"""The studio's front doors, from browser audits: a link to a page that does not exist, another
section's file uploaded, and a list of problems cut short."""

from __future__ import annotations

import json
from pathlib import Path

from streamlit.testing.v1 import AppTest

from app_walk import ROOT
from test_app_hostile_ui import page, scenario, texts
from ui.share import size_canonical

TIMEOUT = 60


def test_a_link_to_a_page_that_does_not_exist_says_so():
    """?page=nonexistent opened Home without a word."""
    def warnings(slug: str) -> str:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
        at.query_params["page"] = slug
        at.run()
        assert not at.exception
        return " ".join(str(w.value) for w in at.warning)

    said = warnings("nonexistent")
    assert "does not exist" in said and "nonexistent" in said and "estimate" in said
    assert "does not exist" not in warnings("estimate")


def test_another_sections_file_is_named_as_such_in_one_line():
    """A system file uploaded as a model listed each field refused ("model.hidden_size: Field
    required … model.gpu: Extra inputs …"), cut at 12 without a word; on Home a model file gave one
    "unknown section" line per field. Now one line names what the file is and where it opens."""
    full = size_canonical("small")
    at = page("pages/model.py")
    before = scenario(at)
    at.file_uploader(key="upl.model").upload("sys.json", json.dumps(full["system"]).encode(), "application/json").run()
    err = texts(at.error).replace("\\", "")
    assert "sys.json is a system file, not a model; open it on the System page" in err and "Extra inputs" not in err
    assert scenario(at) == before
    home = page("pages/home.py")
    home.file_uploader(key="upl.scenario").upload("m.json", json.dumps(full["model"]).encode(), "application/json").run()
    err = texts(home.error).replace("\\", "")
    assert "m.json is a model file, not a scenario" in err and "unknown section" not in err


def test_a_hugging_face_config_is_pointed_to_its_importer():
    """A Hugging Face config.json uploaded as a model gave ~20 "Extra inputs are not permitted"
    lines and no word of the importer just above."""
    hf = json.loads((Path(__file__).resolve().parent / "data" / "hf" / "llama-3-8b.json").read_text())
    at = page("pages/model.py")
    before = scenario(at)
    at.file_uploader(key="upl.model").upload("config.json", json.dumps(hf).encode(), "application/json").run()
    err = texts(at.error).replace("\\", "")
    assert "config.json is a Hugging Face config.json" in err and "Import a Hugging Face config.json" in err
    assert "Extra inputs" not in err and scenario(at) == before


def test_a_list_of_problems_cut_short_says_how_many_more():
    from ui.layout import issue_lines

    text = issue_lines([(f"model.f{i}", "bad") for i in range(15)], 12)
    assert text.count("\n- ") == 12 and text.endswith("- … and 3 more")
    assert "more" not in issue_lines([("a", "bad")], 12)


def test_a_file_of_fields_every_section_has_names_no_section():
    """{"name": …} uploaded on the System page was called "a model file" (a tie went to model)."""
    from ui.config_io import section_of

    assert section_of({"name": "x"}) is None
    assert section_of(size_canonical("small")["system"]) == "system"
