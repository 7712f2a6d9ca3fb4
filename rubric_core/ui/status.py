"""Run and pass statuses as a person sees them: a badge, an icon, an alert level; the one
sentence of each is `wording.status_sentence`, re-exported here for the pages."""

from __future__ import annotations

from rubric_core.wording import status_sentence

__all__ = ["status_badge", "status_icon", "status_level", "status_sentence", "status_words"]

_STATUS_ICONS: dict[str, str] = {
    "running": "⏳",
    "satisfied": "✅",
    "needs_revision": "✏️",
    "failed": "⛔",
    "grader_error": "⚠️",
    "max_iterations_reached": "🔁",
    "interrupted": "⏸️",
    "error": "❌",
}

# Where Streamlit renders Markdown (alerts, expander and widget labels) a status shows a
# Material icon, which needs no emoji font; table cells and select options stay plain text,
# so they keep the emoji of `status_badge`.
_MATERIAL_ICONS: dict[str, str] = {
    "running": ":material/hourglass_top:",
    "satisfied": ":material/check_circle:",
    "needs_revision": ":material/edit_note:",
    "failed": ":material/block:",
    "grader_error": ":material/report:",
    "max_iterations_reached": ":material/repeat:",
    "interrupted": ":material/pause_circle:",
    "error": ":material/error:",
}


def status_words(status: str | None) -> str:
    """A status in words: `"max iterations reached"`.

    Examples:
        >>> status_words("grader_error"), status_words(None)
        ('grader error', 'unknown')
    """
    return (status or "unknown").replace("_", " ")


def status_icon(status: str | None) -> str:
    """The Material icon of a status, as Streamlit spells it in Markdown and `icon=`.

    Examples:
        >>> status_icon("satisfied"), status_icon("bogus")
        (':material/check_circle:', ':material/help:')
    """
    return _MATERIAL_ICONS.get(status or "", ":material/help:")


def status_badge(status: str | None) -> str:
    """A short label for a run or pass status in plain text (tables, pickers), e.g. `"✅ satisfied"`.

    Where Markdown is drawn, pages use `status_icon` and `status_words` instead.

    Examples:
        >>> status_badge("max_iterations_reached")
        '🔁 max iterations reached'
    """
    return f"{_STATUS_ICONS.get(status or 'unknown', '•')} {status_words(status)}"


def status_level(status: str | None) -> str:
    """Which alert fits a status: `success`, `info`, `warning` or `error`.

    Examples:
        >>> status_level("satisfied"), status_level("interrupted")
        ('success', 'warning')
    """
    if status == "satisfied":
        return "success"
    if status in {"running", "needs_revision"}:
        return "info"
    if status in {"max_iterations_reached", "interrupted"}:
        return "warning"
    return "error"
