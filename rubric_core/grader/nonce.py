"""The payload's nonce: one per grading run, unguessable, and never shown to the agent.

The grader's blocks are tagged with a nonce the transcript cannot know in advance. A
fresh nonce per pass would make every pass's payload differ from its first line on, so a
provider's prompt cache could reuse nothing past the system prompt; one nonce per grading
run keeps the passes' payloads alike up to what changed. It is a keyed hash of the grading
run's id under a key drawn when the process starts: stable across the passes of a run in
this process, unknowable from the id alone. A resumed run in another process gets another
nonce (its first pass there misses the cache, nothing else changes).

Because the nonce now lives for a whole grading run, anything the grader wrote that goes
back to the agent (the explanation and gaps of the revision message, the stored record)
is scrubbed of it first: an agent that learnt the nonce could forge the blocks' tags.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rubric_core.schema import CriterionVerdict, JudgeRecord

__all__ = ["grading_nonce", "scrub", "scrub_judges", "scrub_verdicts"]

_KEY = secrets.token_bytes(32)
_NONCE_HEX_CHARS = 12
_SCRUBBED_FIELDS = ("name", "gap", "evidence")


@functools.lru_cache(maxsize=4096)  # asked for three times a pass; an HMAC each time
def grading_nonce(grading_run_id: str) -> str:
    """The nonce of a grading run's payloads: 12 hex digits, the same for every pass.

    Examples:
        >>> grading_nonce("run-1") == grading_nonce("run-1") != grading_nonce("run-2")
        True
        >>> len(grading_nonce("run-1"))
        12
    """
    digest = hmac.new(_KEY, grading_run_id.encode(), hashlib.sha256).hexdigest()
    return digest[:_NONCE_HEX_CHARS]


def scrub(text: str, nonce: str | None) -> str:
    """`text` without the nonce: `<transcript-n>` reads `<transcript>`.

    Examples:
        >>> scrub("see </rubric-ab12> and ab12", "ab12")
        'see </rubric> and …'
    """
    if not nonce or not text or nonce not in text:
        return text
    return text.replace(f"-{nonce}", "").replace(nonce, "…")


def scrub_verdicts(verdicts: list[CriterionVerdict], nonce: str | None) -> list[CriterionVerdict]:
    """Copies of `verdicts` whose texts are scrubbed of the nonce (unchanged ones reused)."""
    if not nonce:
        return verdicts
    out: list[CriterionVerdict] = []
    for verdict in verdicts:
        if any(nonce in str(verdict.get(key) or "") for key in _SCRUBBED_FIELDS):
            copy: dict[str, Any] = dict(verdict)
            for key in _SCRUBBED_FIELDS:
                if isinstance(copy.get(key), str):
                    copy[key] = scrub(copy[key], nonce)
            verdict = copy  # type: ignore[assignment]
        out.append(verdict)
    return out


def scrub_judges(judges: list[JudgeRecord], nonce: str | None) -> list[JudgeRecord]:
    """A panel's judge records, scrubbed as `scrub_verdicts` scrubs criteria."""
    if not nonce:
        return judges
    return [
        {
            **judge,
            "explanation": scrub(judge["explanation"], nonce),
            "criteria": scrub_verdicts(judge["criteria"], nonce),
        }
        for judge in judges
    ]
