"""Hugging Face ``config.json`` import for the Model page: the mapping lives in the engine
(``simengine.api.import_hf_config``, module ``simengine/importers/hf.py``); this module keeps the
names the pages and tests use."""

from __future__ import annotations

from simengine.api import HFImportError, hf_to_model, parse_config_text

__all__ = ["HFImportError", "hf_to_model", "parse_config_text"]
