"""Warm the dashboard's server process: import what the pages need before they are visited.

A page's first visit in a fresh server process paid for its imports (plotly's figure
classes and validators, pandas, scikit-learn, the runner and the batch executors): seconds
on a loaded machine, on the page a person opened. `warm_up()` does that work once per
process on a daemon thread after the first page has been drawn, so later first visits find
it done. It touches no Streamlit API (background work never does) and a module that fails
to import is left to fail again, visibly, where a page imports it.
"""

from __future__ import annotations

import importlib
import logging
import threading

__all__ = ["WARM_MODULES", "warm_up"]

logger = logging.getLogger(__name__)

WARM_MODULES: tuple[str, ...] = (
    "pandas",
    "plotly.graph_objects",
    "plotly.io",
    "rubric_core.ui.charts",
    "rubric_core.runs",
    "rubric_core.batch",
    "rubric_core.workbench",
    "rubric_core.workbench.agreement",
    "rubric_core.export",
    "sklearn.metrics",
)
"""Imported in this order; the figure classes' validators are warmed after them."""

_started = threading.Event()
done = threading.Event()
"""Set when the warm-up thread has finished (tests and benchmarks wait on it)."""


def _warm() -> None:
    try:
        for name in WARM_MODULES:
            try:
                importlib.import_module(name)
            except Exception:  # the page that needs it reports the failure itself
                logger.debug("warm-up could not import %s", name, exc_info=True)
        try:
            from rubric_core.ui.charts import heatmap_figure, progress_figure

            # A first figure builds plotly's validators and template (a few hundred ms).
            progress_figure([], finished=True).to_json()
            heatmap_figure([], [], finished=True).to_json()
        except Exception:  # a figure the pages draw reports its own failure
            logger.debug("warm-up could not build a figure", exc_info=True)
    finally:
        done.set()


def warm_up() -> bool:
    """Start the warm-up thread once per process; True when this call started it."""
    if _started.is_set():
        return False
    _started.set()
    threading.Thread(target=_warm, name="rubric-studio-warm-up", daemon=True).start()
    return True
