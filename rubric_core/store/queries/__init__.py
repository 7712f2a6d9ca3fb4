"""The store's queries, one module per aggregate, each written once in portable SQL.

`rubrics` (rubrics, their versions and tags), `runs` (a run's row, its transcript, the run
filters, batches), `passes` (grading passes, their verdicts and pass rates), `experiments`
(re-grading experiments), `labels` (human labels and the review queue) and `export` (the
export datasets' streams). Each module is a class of `Store` methods that checks its
arguments and runs its SQL through the backend (`sqlbase.SQLBackend`); a module builds on
the ones it reads (passes on runs, runs on rubrics), and `Store` combines them all.
"""
