"""A run's status and model output, drawn: the alert of a status, monospaced plain text."""

from __future__ import annotations

import streamlit as st

from rubric_core.ui import status_icon, status_level, status_sentence, status_words

__all__ = ["show_plain", "show_status"]


def show_status(
    status: str | None, *, error: str | None = None, agent_kind: str | None = None
) -> None:
    """A run's status as an alert: its badge, what it means (for a grade-only run, the
    sentence without an agent) and, if any, the error text."""
    alert = {"success": st.success, "info": st.info, "warning": st.warning, "error": st.error}[
        status_level(status)
    ]
    alert(
        f"**{status_words(status)}** — {status_sentence(status, agent_kind)}",
        icon=status_icon(status),
    )
    if error:
        st.text(f"Error: {error}")


def show_plain(text: str | None, *, empty: str = "(empty)", height: int | None = None) -> None:
    """Model output as monospaced text: never Markdown, never HTML."""
    body = text if text else empty
    if height is None:
        st.code(body, language=None, wrap_lines=True)
    else:
        st.code(body, language=None, wrap_lines=True, height=height)
