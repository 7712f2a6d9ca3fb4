"""The tools tests' fixtures."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from rubric_core.tools.checks import register_check, unregister_check


@pytest.fixture
def custom_check() -> Iterator[Callable[..., None]]:
    """`register_check` for this test only: every check registered through it is
    unregistered after the test."""
    names: list[str] = []

    def register(name: str, fn: Callable[..., Any], **kwargs: Any) -> None:
        register_check(name, fn, **kwargs)
        names.append(name)

    yield register
    for name in names:
        unregister_check(name)
