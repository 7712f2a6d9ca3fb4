"""Results that leave the studio: a self-contained HTML report and the CI gate.

`figures` reads what a batch, an experiment or a run came to (the library's summary and
agreement functions, once), `gate` holds it to thresholds and writes JUnit XML and a
Markdown summary, `html` renders the report (plotly.js inlined, every string escaped).
`html` needs the `dashboard` extra (plotly, Jinja2); it is imported from
`rubric_core.report.html` so that the gate runs on the core install.
"""

from __future__ import annotations

from rubric_core.report.figures import Figures, Item, figures_for

__all__ = ["Figures", "Item", "figures_for"]
