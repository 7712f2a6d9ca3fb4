"""The Run and Batch pages' form, filled from a bundled replay scenario (the offline demo)."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from rubric_core.store import Store
from rubric_core.ui.forms import ScenarioForm
from rubric_core.ui.models import DEFAULT_REPLAY_SCENARIO

__all__ = ["fill_run_form", "scenario_loader"]


def scenario_loader(
    scenario_by_name: dict[str, dict], *, key: str, on_use: Callable[[], None]
) -> None:
    """The offline demo's scenario picker and its "Use scenario" button (Run and Batch pages).

    The picker's value is `{key}_scenario_helper`; the button calls `on_use`.
    """
    helper_col, helper_button = st.columns([3, 1], vertical_alignment="bottom")
    names = list(scenario_by_name)
    helper_col.selectbox(
        "Scenario",
        names,
        index=names.index(DEFAULT_REPLAY_SCENARIO) if DEFAULT_REPLAY_SCENARIO in names else 0,
        format_func=lambda n: f"{n} — {scenario_by_name[n]['title']}",
        key=f"{key}_scenario_helper",
    )
    helper_button.button("Use scenario", on_click=on_use, key=f"{key}_use_scenario")


def fill_run_form(store: Store, form: ScenarioForm, *, key: str = "run") -> dict:
    """Save a scenario's rubric and put its fields in a run form; returns the version.

    The fields are the Run page's (`key="run"`) or the Batch page's (`key="batch"`), which
    name their widgets `{key}_...`.

    Call it from a callback or from another page: a widget's value can be set only before
    the widget is drawn in a script run.

    Raises:
        StoreError: The rubric could not be saved.
    """
    version = form.save_rubric(store)
    state = st.session_state
    state[f"{key}_rubric"] = form.rubric_name
    state[f"{key}_version_{form.rubric_name}"] = version["id"]
    state[f"{key}_input"] = form.input
    state[f"{key}_tools"] = list(form.grader_tools)
    state[f"{key}_max_iterations"] = form.max_iterations
    state[f"{key}_agent_kind"] = form.agent_kind
    for role in ("agent", "grader"):
        state[f"{key}_{role}_source"] = "replay"
        state[f"{key}_{role}_scenario"] = form.scenario
        state[f"{key}_{role}_latency"] = form.latency_s
    return version
