"""Search page: the smallest changes that make the current scenario fit (cached on its JSON)."""

from __future__ import annotations

import json
from typing import Any

import streamlit as st

from . import state
from .heavy import heavy, is_heavy
from .text import md
from .units import fmt_count


@st.cache_data(max_entries=32, show_spinner=False)
def fit_changes_json(scenario_json: str) -> dict[str, Any]:
    """A light scenario's fit changes, inline (``worker_tasks.fit``: a few dozen estimates of ~1 ms)."""
    from .worker_tasks import fit

    return fit(scenario_json)


def fit_list(scenario_json: str) -> None:
    # a heavy scenario's estimates take seconds each: in a worker (ui/heavy.py), never on this thread
    out = heavy("fit", scenario_json) if is_heavy(scenario_json) else fit_changes_json(scenario_json)
    if not out["ok"]:
        st.caption("The current scenario cannot be estimated: " + md("; ".join(m for _, m in out["issues"])))
        return
    if out["fits"]:
        st.caption("The current scenario fits in memory; nothing to change.")
        return
    if not out["changes"]:
        st.warning("No single change (or pair of changes) tried makes the current scenario fit.")
        return
    for i, ch in enumerate(out["changes"]):
        c = st.columns([5, 2, 2, 1])
        c[0].markdown(md(ch["change"]))
        c[1].markdown(f"{fmt_count(ch['tokens_per_s'])} tok/s on {ch['num_gpus']:,} GPUs")
        c[2].markdown(lost_words(ch["throughput_lost"]))
        if c[3].button("Use", key=f"search.fit.{i}"):
            sc = json.loads(scenario_json)
            issues = state.load_section("system", dict(sc["system"], num_gpus=ch["num_gpus"]), "fit change")
            issues += state.load_section("strategy", ch["strategy"], "fit change")
            if not issues:
                st.switch_page("pages/strategy.py", query_params=state.page_address())


def lost_words(share: float) -> str:
    """"+3.2 % per GPU lost vs. unfitting"; a loss that rounds to nothing reads +0.0, not -0.0."""
    return f"{round(share * 100, 1) + 0.0:+.1f} % per GPU lost vs. unfitting"
