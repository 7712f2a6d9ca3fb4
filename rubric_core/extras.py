"""Optional dependencies: a feature whose extra is not installed says which one to install.

The core install (`pip install rubric-studio`) carries what `RubricMiddleware`, the store on
SQLite, the runner and the CLI need. Everything else is an extra of the distribution
(`pyproject.toml`); `require` imports a module of one and turns its absence into a
`MissingExtra` that names the extra and the command.

    >>> require("json", "dashboard").__name__
    'json'
    >>> try:
    ...     require("no_such_module_here", "ray", feature="batches on a Ray cluster")
    ... except MissingExtra as exc:
    ...     print(exc)
    no_such_module_here is not installed, and batches on a Ray cluster need it: pip install 'rubric-studio[ray]'
"""

from __future__ import annotations

import importlib
from types import ModuleType

from rubric_core.errors import RubricStudioError

# The extras `pyproject.toml` declares, each with the features it turns on.
EXTRAS: dict[str, str] = {
    "dashboard": "the Streamlit dashboard, its plotly figures and the HTML report",
    "workbench": "agreement statistics (Cohen's kappa)",
    "postgres": "the PostgreSQL store and checkpointer",
    "ray": "batches on a Ray cluster",
    "sandbox": "run_test_suite and pytest-suite checks",
    "openai": "OpenAI and OpenAI-compatible models",
    "anthropic": "Anthropic models",
    "deepagents": "deep agents (agent kind 'deep')",
    "parquet": "Parquet training exports",
    "all": "every optional feature",
}


class MissingExtra(RubricStudioError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""

    def __init__(self, module: str, extra: str, feature: str | None = None) -> None:
        self.module = module
        self.extra = extra
        what = feature or EXTRAS.get(extra, extra)
        super().__init__(
            f"{module} is not installed, and {what} need it: pip install 'rubric-studio[{extra}]'"
        )


def require(module: str, extra: str, *, feature: str | None = None) -> ModuleType:
    """Import `module`, or raise `MissingExtra` naming `extra` when it is not installed."""
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}; known: {', '.join(EXTRAS)}")
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        top = module.split(".")[0]
        if exc.name and exc.name.split(".")[0] != top:
            raise  # the extra is installed, something it imports is broken: show that
        raise MissingExtra(module, extra, feature) from exc
