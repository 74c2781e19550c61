"""Streamlit helpers for the simengine studio (``app.py`` + ``pages/``).

Pure modules (no Streamlit import, unit-tested directly): ``config_io``, ``share``,
``hf_import``, ``schema``, ``units``, ``derived``, ``charts``, ``timeline_data``, ``theme``.
Streamlit modules: ``state`` (session + share link), ``engine`` (cached engine calls), ``form``
(widgets generated from the pydantic specs), ``layout`` (page boot, sidebar), ``tables``.
"""
