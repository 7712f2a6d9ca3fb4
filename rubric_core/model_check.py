"""A middleware base that checks something before every model call of an agent.

Checked around the model call (`wrap_model_call`) rather than in a `before_model` or
`before_agent` hook: a hook is a graph node of its own, one more step and one more
checkpoint per call. Subclasses implement `check(request)`, which raises to refuse
the call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain.agents.middleware import AgentMiddleware

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from langchain.agents.middleware.types import ModelRequest, ModelResponse

__all__ = ["CheckBeforeModelCall"]


class CheckBeforeModelCall(AgentMiddleware[Any, Any, Any]):
    """Calls `check(request)` before each model call; the call happens if it returns."""

    def check(self, request: ModelRequest[Any]) -> None:
        """Raise to refuse the model call `request` describes."""
        raise NotImplementedError

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        """Check, then make the call."""
        self.check(request)
        return handler(request)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        """Async twin of `wrap_model_call`."""
        self.check(request)
        return await handler(request)
