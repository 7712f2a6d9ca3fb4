"""Streamlit widgets the dashboard's pages share, one concept per module.

`store` (the session's store, its faults shown in place), `session` (values kept across
pages, this process's runs and re-grade jobs), `display` (a status, plain text), `pickers`
(a rubric version, run filters), `model_pickers` (the models of a run or grading),
`run_form` (the Run and Batch form filled from a scenario), `rate_limit` (the Batch forms' requests and tokens per minute), `run_detail` (one run drawn:
overview, passes, transcript), `review` (reviewer and review scope), and `graded_batch`:
the Batch page's grade-only form, beside that page because the page would pass its 450
lines with it (the Run page's grade-only form is in the Run page).

Like the pages, these modules import from `rubric_core.ui` (everything computed, plain
functions), the store's public names and `rubric_core.errors`; `tests/test_layering.py`
holds them to that and to 300 lines each.
"""
