"""The verdict's JSON schema built per rubric, so constrained decoding yields a valid verdict.

`GraderResponse`'s own schema leaves the number of criteria open and the gap optional, so
a server that constrains decoding to it (llama.cpp, vLLM, Ollama) can emit an incomplete
list or a failing criterion without a gap, which validation then rejects. The schema the
grader is shown instead has exactly one entry per checklist item, in order
(`prefixItems`, `minItems` = `maxItems`), each name fixed (a one-value `enum`), and each
entry one of two shapes: a pass (`passed: true`) or a failure (`passed: false` with a
non-empty `gap` required). A verdict decoded under it is complete and names every failing
criterion's gap by construction.

`items` is left out: llama.cpp's grammar converter reads `items` before `prefixItems`, so
with both it would lose the order. A provider whose converter reads the schema otherwise
gives its dialect (`Provider.verdict_schema`: LangChain's Google converters, which drop
`prefixItems`, get the entries repeated under `items`).

What comes back is still validated as a `GraderResponse` (strict booleans, a gap on each
failure, the result derived from the criteria) and aligned by name, so an unconstrained model that answers
partially gets the same corrections as before.
"""

from __future__ import annotations

import copy
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from rubric_core.schema import GraderResponse

if TYPE_CHECKING:
    from collections.abc import Sequence

    from rubric_core.providers.base import Provider

_CACHED_RUBRICS = 32


def _entry(name: str) -> dict[str, Any]:
    fields = GraderResponse.model_json_schema()["$defs"]["Criterion"]["properties"]
    base = {
        "name": {"type": "string", "enum": [name], "description": fields["name"]["description"]},
        "evidence": {"type": "string", "description": fields["evidence"]["description"]},
    }
    passing = {
        "type": "object",
        "properties": {**base, "passed": {"type": "boolean", "enum": [True]}},
        "required": ["name", "evidence", "passed"],
        "additionalProperties": False,
    }
    failing = {
        "type": "object",
        "properties": {
            **base,
            "passed": {"type": "boolean", "enum": [False]},
            "gap": {"type": "string", "minLength": 1, "description": fields["gap"]["description"]},
            "insufficient": {
                "type": "boolean",
                "description": fields["insufficient"]["description"],
            },
        },
        "required": ["name", "evidence", "passed", "gap"],
        "additionalProperties": False,
    }
    return {"anyOf": [passing, failing]}


def verdict_json_schema(
    criteria: Sequence[str], *, dialect: Provider | None = None
) -> dict[str, Any]:
    """The JSON schema of a verdict on exactly these checklist items, in this order, in
    the `dialect` of the grader's provider (`providers.provider_of(model)`).

    Examples:
        >>> schema = verdict_json_schema(["has a title", "cites a source"])
        >>> items = schema["properties"]["criteria"]
        >>> items["minItems"], items["maxItems"]
        (2, 2)
        >>> [entry["anyOf"][1]["required"] for entry in items["prefixItems"]][0]
        ['name', 'evidence', 'passed', 'gap']
        >>> from rubric_core.providers import PROVIDERS
        >>> google = verdict_json_schema(["a"], dialect=PROVIDERS["google_genai"])
        >>> "items" in items, "items" in google["properties"]["criteria"]
        (False, True)
    """
    own = GraderResponse.model_json_schema()
    entries = [_entry(name) for name in criteria]
    props = own["properties"]
    array: dict[str, Any] = {
        "type": "array",
        "description": props["criteria"]["description"],
        "prefixItems": entries,
        "minItems": len(entries),
        "maxItems": len(entries),
    }
    schema: dict[str, Any] = {
        "title": "GraderResponse",
        "description": own.get("description", ""),
        "type": "object",
        "properties": {
            "criteria": array,
            "explanation": {"type": "string", "description": props["explanation"]["description"]},
            "result": {
                "type": "string",
                "enum": ["satisfied", "needs_revision", "failed"],
                "description": props["result"]["description"],
            },
        },
        "required": ["criteria", "explanation", "result"],
        "additionalProperties": False,
    }
    return schema if dialect is None else dialect.verdict_schema(schema)


@lru_cache(maxsize=_CACHED_RUBRICS)
def verdict_model(
    criteria: tuple[str, ...], *, dialect: Provider | None = None
) -> type[GraderResponse]:
    """`GraderResponse` as the grader sees it for this checklist: same name, same
    validation, the schema of `verdict_json_schema`.

    Examples:
        >>> model = verdict_model(("has a title",))
        >>> model.__name__, issubclass(model, GraderResponse)
        ('GraderResponse', True)
        >>> model.model_json_schema()["properties"]["criteria"]["maxItems"]
        1
    """
    schema = verdict_json_schema(criteria, dialect=dialect)

    def model_json_schema(cls: type[GraderResponse], *args: Any, **kwargs: Any) -> dict[str, Any]:
        return copy.deepcopy(schema)

    namespace = {
        "__doc__": GraderResponse.__doc__,
        "__module__": __name__,
        "model_json_schema": classmethod(model_json_schema),
    }
    return type("GraderResponse", (GraderResponse,), namespace)
