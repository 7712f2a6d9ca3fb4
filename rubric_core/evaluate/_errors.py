"""The errors of `rubric_core.evaluate`: what was wrong with the verdicts or labels given."""

from __future__ import annotations

from rubric_core.errors import InputError


class EvaluationError(InputError):
    """Verdicts, labels or experiments that cannot be evaluated; the message says why.

    Examples:
        >>> from rubric_core.errors import InputError
        >>> issubclass(EvaluationError, InputError) and issubclass(EvaluationError, ValueError)
        True
    """


class LabelError(EvaluationError):
    """A human-labels file or a dataset `labels` cell that cannot be read.

    `row` is the row number as a spreadsheet shows it (the header is row 1) and
    `column` the column (or, in a `labels` cell, the criterion) at fault, when known.

    Examples:
        >>> error = LabelError("labels.csv: row 3, column 'human_passed': empty", row=3,
        ...                    column="human_passed")
        >>> (error.row, error.column)
        (3, 'human_passed')
    """

    def __init__(self, message: str, *, row: int | None = None, column: str | None = None):
        super().__init__(message)
        self.row = row
        self.column = column
