"""The Batch page's rate-limit fields: requests and tokens per minute, or learned."""

from __future__ import annotations

import streamlit as st

from rubric_core.errors import InputError
from rubric_core.workbench import RateLimit, rate_limit_from_env

__all__ = ["rate_limit_fields"]


def rate_limit_fields(*, key: str) -> RateLimit | None:
    """An expander with `--rpm`, `--tpm` and `--learn-rate-limits` as fields; the limit
    asked for (`None`: unlimited). Defaults come from `RUBRIC_STUDIO_RATE_LIMIT_*`."""
    try:
        default = rate_limit_from_env()
    except InputError as exc:  # a bad variable: shown, and the fields start empty
        st.warning(f"Rate limit from the environment ignored: {exc}")
        default = RateLimit()
    with st.expander("Rate limit", expanded=default.active):
        rpm_col, tpm_col = st.columns(2)
        rpm = rpm_col.number_input(
            "Requests per minute",
            min_value=0,
            step=60,
            value=default.rpm or 0,
            key=f"{key}_rpm",
            help="Per model endpoint, shared by every run of the batch (threads, processes "
            "or Ray); 0: no limit.",
        )
        tpm = tpm_col.number_input(
            "Tokens per minute",
            min_value=0,
            step=1000,
            value=default.tpm or 0,
            key=f"{key}_tpm",
            help="Per model endpoint, from each request's size and its reported usage; 0: no limit.",
        )
        learn = st.checkbox(
            "Learn the limits from the provider's x-ratelimit-* headers",
            value=default.learn,
            key=f"{key}_learn_rate_limits",
            help="They only lower the numbers above; a 429's Retry-After pauses every run.",
        )
    try:
        limit = RateLimit(rpm=int(rpm) or None, tpm=int(tpm) or None, learn=bool(learn))
    except InputError as exc:
        st.error(str(exc))
        return None
    return limit if limit.active else None
