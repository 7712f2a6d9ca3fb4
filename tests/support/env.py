"""The process environment a test starts from: no provider key, base URL or model override."""

from __future__ import annotations

import pytest

PROVIDER_ENV = (
    "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY",
    "GROQ_API_KEY", "MISTRAL_API_KEY", "DEEPSEEK_API_KEY", "XAI_API_KEY",
    "FIREWORKS_API_KEY", "TOGETHER_API_KEY", "COHERE_API_KEY", "PPLX_API_KEY",
    "PERPLEXITY_API_KEY", "OPENROUTER_API_KEY", "UPSTAGE_API_KEY", "NVIDIA_API_KEY",
    "AZURE_OPENAI_API_KEY", "OPENAI_COMPATIBLE_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE",
    "RUBRIC_STUDIO_LLM_BASE_URL", "RUBRIC_STUDIO_AGENT_MODEL", "RUBRIC_STUDIO_GRADER_MODEL",
)  # fmt: skip
"""Every variable through which the developer's shell could hand a test a real model."""


def clear_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset every `PROVIDER_ENV` variable for the test (restored after it)."""
    for var in PROVIDER_ENV:
        monkeypatch.delenv(var, raising=False)
