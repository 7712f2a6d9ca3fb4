"""Run and pass statuses as a person sees them: a badge, one sentence, an alert level."""

from __future__ import annotations

from rubric_core.schema import RUN_STATUS_DESCRIPTIONS

__all__ = ["status_badge", "status_level", "status_meaning"]

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


def status_badge(status: str | None) -> str:
    """A short label for a run or pass status, e.g. `"✅ satisfied"`.

    Examples:
        >>> status_badge("max_iterations_reached")
        '🔁 max iterations reached'
    """
    name = status or "unknown"
    return f"{_STATUS_ICONS.get(name, '•')} {name.replace('_', ' ')}"


def status_meaning(status: str | None) -> str:
    """What a status means for the person reading it (one sentence).

    Examples:
        >>> status_meaning("bogus")
        "Unknown status 'bogus'."
    """
    return RUN_STATUS_DESCRIPTIONS.get(status or "", f"Unknown status {status!r}.")


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
