"""Hugging Face ``config.json`` import for the Model page: the mapping lives in the engine
(``simengine.api.import_hf_config``, module ``simengine/importers/hf.py``); this module keeps the
names the pages and tests use."""

from __future__ import annotations

import math

from simengine.api import HF_CONFIG_MAX_BYTES, HFImportError, hf_to_model, parse_config_text

# what the upload widget says and refuses in the browser (Streamlit counts MB of 2^20 bytes)
UPLOAD_MB = math.ceil(HF_CONFIG_MAX_BYTES / 2**20)

__all__ = ["HFImportError", "UPLOAD_MB", "hf_to_model", "parse_config_text"]
