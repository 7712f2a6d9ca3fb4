"""A batch's summary: computed in `rubric_core.summary`, the one home of every figure.

Re-exported here for the batch executors and their callers (`run_batch` returns it).
"""

from __future__ import annotations

from rubric_core.summary import PASS_RATE_RULE, BatchSummary, format_rate, summary_for_batch

__all__ = ["PASS_RATE_RULE", "BatchSummary", "format_rate", "summary_for_batch"]
