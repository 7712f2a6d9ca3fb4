"""The store's queries, one module per aggregate, each written once in portable SQL.

`rubrics` (rubrics, their versions and tags), `runs` (a run's row, its transcript, the run
filters, batches), `passes` (grading passes, their verdicts and pass rates), `experiments`
(re-grading experiments), `labels` (human labels and the review queue) and `export` (the
export datasets' streams). Each module is one aggregate object whose verbs check their
arguments and run their SQL through the backend (`sqlbase.SQLBackend`); an aggregate is
given the ones it reads (passes the runs and rubrics), and `Store` holds each as an
attribute (`store.runs`, `store.passes`, ...).
"""
