"""Importers of model descriptions from other tools' files: Hugging Face ``config.json`` (``hf``)."""

from .hf import HFImport, hf_to_model, import_hf_config
from .hf_values import FIELD_MAP, MAX_BYTES, HFImportError, parse_config_text

__all__ = ["FIELD_MAP", "MAX_BYTES", "HFImport", "HFImportError", "hf_to_model", "import_hf_config", "parse_config_text"]
