"""Streamlit-free presentation for the dashboard: labels, tables, filters, model choices, figures.

The pages in `app_pages/` (and `studio_ui.py`) hold widgets and layout; everything they
compute comes from here, as plain functions tested without Streamlit. Nothing else in
`rubric_core` imports this package: it sits on top of the library, next to the CLI.

Modules: `status` (badges and meanings), `format` (timestamps, one-line text, paging),
`filters` (the run filters), `models` (model pickers), `rubrics` (templates, versions),
`runs` (tables, labels, transcripts), `passes` (per-pass analysis), `review` (the
review queue), `agreement` (agreement and comparison tables), `export`
(preview and download), `charts` (Plotly figures), `errors` (store faults).
"""

from __future__ import annotations

from rubric_core.errors import InputError
from rubric_core.ui.agreement import (
    change_mark,
    comparison_delta_rows,
    comparison_matrix_rows,
    confusion_rows,
    criterion_agreement_rows,
    disagreement_label,
    format_delta,
    format_kappa,
    format_rate,
    verdict_mark,
)
from rubric_core.ui.charts import (
    heatmap_figure,
    iterations_histogram,
    pass_rate_figure,
    plain,
    short_label,
    timeline_figure,
)
from rubric_core.ui.errors import store_error_message
from rubric_core.ui.export import export_bytes, export_file_name, preview_rows
from rubric_core.ui.filters import ANY, known_models, parse_run_filters
from rubric_core.ui.format import (
    DEFAULT_PAGE_SIZE,
    expand_counts,
    format_timestamp,
    md_escape,
    one_line,
    page_caption,
    page_count,
    page_window,
    progress,
)
from rubric_core.ui.models import (
    MODEL_SOURCES,
    combine_models,
    model_choice,
    models_mode,
    replay_scenario_mismatch,
    spec_error_hint,
)
from rubric_core.ui.passes import (
    criterion_matrix,
    draft_diff,
    final_criteria,
    final_verdict_rows,
    find_regressions,
    flipped_criteria,
    pass_details,
    pass_label,
)
from rubric_core.ui.review import (
    HUMAN_CHOICES,
    REVIEW_SHORTCUTS,
    choice_for,
    chosen_labels,
    is_fully_labelled,
    next_unlabelled,
    parse_id_param,
    review_caption,
    review_rows,
    step,
    verdict_word,
)
from rubric_core.ui.rubrics import (
    RUBRIC_TEMPLATES,
    criteria_changes,
    parse_tags,
    scenario_templates,
    version_diff,
    version_label,
)
from rubric_core.ui.runs import (
    compare_runs_rows,
    data_version,
    rubric_label,
    run_label,
    run_seconds,
    run_spec_rows,
    runs_table,
    transcript_items,
)
from rubric_core.ui.status import status_badge, status_level, status_meaning

__all__ = [
    "ANY",
    "DEFAULT_PAGE_SIZE",
    "HUMAN_CHOICES",
    "MODEL_SOURCES",
    "REVIEW_SHORTCUTS",
    "RUBRIC_TEMPLATES",
    "InputError",
    "change_mark",
    "choice_for",
    "chosen_labels",
    "combine_models",
    "compare_runs_rows",
    "comparison_delta_rows",
    "comparison_matrix_rows",
    "confusion_rows",
    "criteria_changes",
    "criterion_agreement_rows",
    "criterion_matrix",
    "data_version",
    "disagreement_label",
    "draft_diff",
    "expand_counts",
    "export_bytes",
    "export_file_name",
    "final_criteria",
    "final_verdict_rows",
    "find_regressions",
    "flipped_criteria",
    "format_delta",
    "format_kappa",
    "format_rate",
    "format_timestamp",
    "heatmap_figure",
    "is_fully_labelled",
    "iterations_histogram",
    "known_models",
    "md_escape",
    "model_choice",
    "models_mode",
    "next_unlabelled",
    "one_line",
    "page_caption",
    "page_count",
    "page_window",
    "parse_id_param",
    "parse_run_filters",
    "parse_tags",
    "pass_details",
    "pass_label",
    "pass_rate_figure",
    "plain",
    "preview_rows",
    "progress",
    "replay_scenario_mismatch",
    "review_caption",
    "review_rows",
    "rubric_label",
    "run_label",
    "run_seconds",
    "run_spec_rows",
    "runs_table",
    "scenario_templates",
    "short_label",
    "spec_error_hint",
    "status_badge",
    "status_level",
    "status_meaning",
    "step",
    "store_error_message",
    "timeline_figure",
    "transcript_items",
    "verdict_mark",
    "verdict_word",
    "version_diff",
    "version_label",
]
