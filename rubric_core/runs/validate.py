"""`validate_spec`: a run spec checked against the store and the model and tool registries.

Apart from `spec` (whose `RunSpec` the agent builders import) because it asks the shared
agents whether this process built a spec's models already: `spec` -> `agents` ->
`shared` -> `validate`, with no way back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from rubric_core.grader.checked import checks_only_problem
from rubric_core.providers import ModelSpecError, replay_grader_problem, resolve_model
from rubric_core.rubric import RubricError, parse_criteria, validate_rubric
from rubric_core.runs.shared import models_built
from rubric_core.runs.spec import RunSpec, SpecError, check_static
from rubric_core.schema import is_checks_only_grader
from rubric_core.store.errors import StoreError
from rubric_core.tools import UnknownToolError, get_tools

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from rubric_core.store import Store

__all__ = ["grader_problem", "validate_spec"]


def grader_problem(
    grader_model: str, version: Mapping[str, Any], criteria: Sequence[str] | None = None
) -> str | None:
    """Why `grader_model` cannot grade rubric `version`, or `None`: the one check of a
    grader against a rubric that every front door makes (the CLI's `run`, `batch`,
    `grade` and `regrade`, the Run and Batch pages and their grade-only forms).
    `validate_spec` makes the first half itself; a replay grader's fit is left to the
    front doors, so a library caller may still script a replay grader for any rubric.

    No grader (`checks`/`none`) needs a code check on every criterion
    (`checks_only_problem`); a replay grader must be scripted for this rubric
    (`replay_grader_problem`).
    """
    where = f"{version.get('name')} v{version.get('version')}"
    if is_checks_only_grader(grader_model):
        return checks_only_problem(parse_criteria(str(version["text"])), rubric=where)
    if criteria is None:
        criteria = list(version.get("criteria") or [])
    return replay_grader_problem(grader_model, criteria, rubric=where)


def validate_spec(spec: RunSpec, store: Store) -> None:
    """Check a run spec completely before anything starts.

    Models are constructed (never called), so a missing API key or an unknown
    provider is reported here rather than half-way through a run.

    Raises:
        SpecError: Naming the field that is wrong and why.
        TypeError: `spec` is not a `RunSpec`.

    Examples:
        >>> validate_spec(RunSpec(1, "", "replay:haiku", "replay:haiku"), store)  # doctest: +SKIP
        Traceback (most recent call last):
        SpecError: input: is empty; give the agent something to do
    """
    if not isinstance(spec, RunSpec):
        msg = f"expected a RunSpec, got {type(spec).__name__}"
        raise TypeError(msg)
    check_static(spec)
    try:
        version = store.rubrics.version(spec.rubric_version_id)
    except StoreError as exc:
        raise SpecError(
            "rubric_version_id", f"no rubric version with id {spec.rubric_version_id} ({exc})"
        ) from exc
    try:
        criteria = validate_rubric(version["text"])
    except RubricError as exc:
        raise SpecError("rubric_version_id", str(exc)) from exc
    if is_checks_only_grader(spec.grader_model):
        problem = grader_problem(spec.grader_model, version, criteria)
        if problem is not None:
            raise SpecError("grader_model", problem)
    try:
        get_tools(list(spec.grader_tools))
    except UnknownToolError as exc:
        raise SpecError("grader_tools", str(exc)) from exc
    if models_built(spec):  # this process built these very models for an earlier run
        return
    roles: tuple[tuple[str, Literal["agent", "grader"]], ...] = (
        ("agent_model", "agent"),
        ("grader_model", "grader"),
    )
    for name, role in roles:
        if role == "grader" and is_checks_only_grader(spec.grader_model):
            continue
        try:
            resolve_model(
                getattr(spec, name), role=role, base_url=spec.base_url, api_key=spec.api_key
            )
        except ModelSpecError as exc:
            raise SpecError(name, str(exc)) from exc
