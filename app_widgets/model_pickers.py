"""Choosing the models of a run or a grading: replay scenario, provider model or base URL."""

from __future__ import annotations

import streamlit as st

from app_widgets.session import PERSIST
from rubric_core.errors import InputError
from rubric_core.ui import MODEL_SOURCES, matching_scenario, model_choice
from rubric_core.ui.forms import replay_mismatch_problem
from rubric_core.ui.models import CHECKS_SOURCE, base_url_presets, grader_sources

__all__ = ["agent_and_grader_pickers", "grader_picker", "model_picker", "replay_mismatch_warning"]


def model_picker(
    role: str,
    *,
    key: str,
    scenarios: list[dict],
    default_scenario: str,
    version: dict | None = None,
) -> tuple[str, str | None]:
    """The Run/Batch pages' model chooser for one role; returns `(spec, base_url)`.

    The grader's offers "No grader: checks only" (first) when every criterion of
    `version` has a code check.

    Raises:
        InputError: A field is missing or malformed (shown by the caller in place).
    """
    labels = grader_sources(version) if role == "grader" and version else dict(MODEL_SOURCES)
    sources = list(labels)
    state = f"{key}_{role}_source"
    if st.session_state.get(state) not in (None, *sources):
        st.session_state.pop(state)  # "checks only" kept from a rubric that needs a grader
    source = st.radio(
        f"{role.capitalize()} model",
        sources,
        format_func=labels.get,
        key=state,
        horizontal=True,
        persist_state=PERSIST,
    )
    if source == CHECKS_SOURCE:
        st.caption(
            "No grader model: every criterion of this rubric has a code check, which "
            "decides it on each pass. The runs record their grader as `checks`."
        )
        return model_choice(CHECKS_SOURCE)
    if source == "replay":
        names = [s["name"] for s in scenarios]
        if st.session_state.get(f"{key}_{role}_scenario") not in names and names:
            st.session_state[f"{key}_{role}_scenario"] = (
                default_scenario if default_scenario in names else names[0]
            )
        scenario_col, latency_col = st.columns([3, 2], vertical_alignment="bottom")
        scenario = scenario_col.selectbox(
            "Replay scenario",
            names,
            format_func=lambda n: next(
                (f"{n} — {s['title']}" for s in scenarios if s["name"] == n), n
            ),
            key=f"{key}_{role}_scenario",
            persist_state=PERSIST,
        )
        # No bounds on the widget: a bounded input keeps sending its last valid value while
        # it shows an out-of-range one; model_choice names the problem instead.
        latency = latency_col.number_input(
            "Delay (s)", value=0.0, step=0.5, format="%.1f",
            key=f"{key}_{role}_latency", persist_state=PERSIST,
            help="Replay models answer at once; a delay per call (0 to 60 s) lets you "
            "watch each pass arrive and try Stop.",
        )  # fmt: skip
        return model_choice("replay", scenario=scenario or "", latency_s=float(latency))
    if source == "provider":
        text = st.text_input(
            "Model (provider:model-id)",
            key=f"{key}_{role}_provider",
            placeholder="openai:gpt-4.1-mini",
            persist_state=PERSIST,
        )
        return model_choice("provider", provider_string=text)
    # The presets go in `value=`: a default kept only in session state is not the widget's
    # own, and the browser falls back to the widget's own ("") when it remounts the field.
    preset_url, preset_model = base_url_presets()
    url = st.text_input(
        "Base URL",
        value=preset_url,
        key=f"{key}_{role}_base_url",
        placeholder="http://127.0.0.1:8080/v1",
        persist_state=PERSIST,
    )
    name = st.text_input(
        "Model name on that server",
        value=preset_model,
        key=f"{key}_{role}_base_url_model",
        placeholder="smollm2-135m",
        persist_state=PERSIST,
    )
    return model_choice("base_url", base_url=url, base_url_model=name)


def agent_and_grader_pickers(
    *, key: str, scenarios: list[dict], default_scenario: str, version: dict | None = None
) -> tuple[tuple[str, str | None] | None, tuple[str, str | None] | None, list[str]]:
    """Agent and grader model choosers side by side, as the Run and Batch pages show them.

    Returns `(agent_choice, grader_choice, errors)`; a choice is `None` when its fields are
    malformed, and `errors` says why, for the page to show in place.
    """
    choices: list[tuple[str, str | None] | None] = []
    errors: list[str] = []
    for role, column in zip(("agent", "grader"), st.columns(2, gap="large"), strict=True):
        with column:
            try:
                choices.append(
                    model_picker(
                        role,
                        key=key,
                        scenarios=scenarios,
                        default_scenario=default_scenario,
                        version=version,
                    )
                )
            except InputError as exc:
                choices.append(None)
                errors.append(f"{role.capitalize()} model: {exc}")
    return choices[0], choices[1], errors


def replay_mismatch_warning(grader_spec: str, scenarios: list[dict], version: dict) -> None:
    """Say when a replay grader scripts verdicts for another rubric than `version`'s (the
    library's one check, `replay_grader_problem`; grading is refused with the same words)."""
    mismatch = replay_mismatch_problem({"grader": grader_spec}, scenarios, version)
    if mismatch:
        st.error(mismatch, icon=":material/replay:")


def grader_picker(scenarios: list[dict], version: dict, *, key: str) -> tuple[str, str | None]:
    """The grade-only forms' grader chooser for `version`; returns `(spec, base_url)`.

    A replay scenario scripted for `version`'s criteria comes first. A malformed choice is
    said in place and comes back as `("", None)`; a replay grader scripted for another
    rubric is warned about (`replay_mismatch_warning`).
    """
    try:
        grader_spec, base_url = model_picker(
            "grader",
            key=key,
            scenarios=scenarios,
            default_scenario=matching_scenario(scenarios, version["criteria"]),
            version=version,
        )
    except InputError as exc:
        grader_spec, base_url = "", None
        st.error(f"Grader model: {exc}")
    replay_mismatch_warning(grader_spec, scenarios, version)
    return grader_spec, base_url
