"""Knowing when the judge is right: labels, agreement, panels, consistency, comparison.

Pure functions over plain dicts and lists (no store, no Streamlit, no LangChain): the
store, runners, CLI and pages feed them verdicts and show what they return, and
`json.dumps` takes every result as it is. A verdict is `True` (pass), `False` (fail)
or `None` (insufficient evidence: the grader could not verify it), which is never a
pass and is always counted apart from a judged failure.

Examples:
    >>> from rubric_core.evaluate import agreement_report, pair_up
    >>> judge = {1: {"has a title": True}, 2: {"has a title": True}}
    >>> human = {1: {"has a title": True}, 2: {"has a title": False}}
    >>> agreement_report(pair_up(judge, human))["criteria"][0]["false_pass"]
    1
"""

from __future__ import annotations

from rubric_core.evaluate._errors import EvaluationError, LabelError
from rubric_core.evaluate._verdicts import ItemId, Value, Verdict, verdict_value
from rubric_core.evaluate.agreement import (
    AgreementReport,
    CriterionAgreement,
    Disagreement,
    OverallAgreement,
    Pair,
    agreement_report,
    pair_up,
)
from rubric_core.evaluate.compare import (
    Comparison,
    CriterionComparison,
    MatrixRow,
    compare_experiments,
)
from rubric_core.evaluate.consistency import (
    ConsistencyReport,
    CriterionConsistency,
    consistency_report,
    flip_rate,
)
from rubric_core.evaluate.labels import (
    FAIL_WORDS,
    LABEL_COLUMNS,
    PASS_WORDS,
    LabelRow,
    check_label_criteria,
    decode_labels,
    parse_dataset_labels,
    parse_human_passed,
    parse_labels_csv,
)
from rubric_core.evaluate.panel import JudgeVote, PanelCriterion, PanelResult, combine_panel

__all__ = [
    "FAIL_WORDS",
    "LABEL_COLUMNS",
    "PASS_WORDS",
    "AgreementReport",
    "Comparison",
    "ConsistencyReport",
    "CriterionAgreement",
    "CriterionComparison",
    "CriterionConsistency",
    "Disagreement",
    "EvaluationError",
    "ItemId",
    "JudgeVote",
    "LabelError",
    "LabelRow",
    "MatrixRow",
    "OverallAgreement",
    "Pair",
    "PanelCriterion",
    "PanelResult",
    "Value",
    "Verdict",
    "agreement_report",
    "check_label_criteria",
    "combine_panel",
    "compare_experiments",
    "consistency_report",
    "decode_labels",
    "flip_rate",
    "pair_up",
    "parse_dataset_labels",
    "parse_human_passed",
    "parse_labels_csv",
    "verdict_value",
]
