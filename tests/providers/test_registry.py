"""The provider registry: each prefix resolves to its provider, and each provider's quirks."""

from __future__ import annotations

import pytest
from langchain_core.language_models import GenericFakeChatModel

from rubric_core.grader.verdict_schema import verdict_json_schema
from rubric_core.providers import (
    PROVIDERS,
    ModelSpecError,
    Provider,
    ReplayChatModel,
    grader_model,
    parse_model_spec,
    provider_for,
    provider_of,
    resolve_model,
    spec_kind,
)
from rubric_core.providers.anthropic import AnthropicProvider
from rubric_core.providers.human import HumanProvider
from rubric_core.providers.langchain import LangChainProvider
from rubric_core.providers.openai import CompatibleProvider, OpenAIProvider
from rubric_core.providers.registry import payload_message, wants_cache_markers
from rubric_core.providers.replay import ReplayProvider
from rubric_core.providers.replay.fit import scenario_of


@pytest.mark.parametrize(
    ("spec", "kind", "name"),
    [
        ("replay:haiku", ReplayProvider, "replay"),
        ("openai-compatible:qwen2.5:7b", CompatibleProvider, "openai-compatible"),
        ("human:ana", HumanProvider, "human"),
        ("openai:gpt-4.1-mini", OpenAIProvider, "openai"),
        ("anthropic:claude-haiku-4-5", AnthropicProvider, "anthropic"),
        ("google_genai:gemini-2.5-flash", LangChainProvider, "google_genai"),
        ("gemini:gemini-2.5-flash", LangChainProvider, "google_genai"),
        ("Mistral:mistral-large", LangChainProvider, "mistralai"),
        ("ollama:qwen2.5:7b", LangChainProvider, "ollama"),
    ],
)
def test_each_prefix_resolves_to_its_provider(spec, kind, name):
    provider = provider_for(spec)
    assert isinstance(provider, kind)
    assert provider.name == name
    assert PROVIDERS[name] is provider


def test_an_unknown_prefix_is_a_clear_error_naming_it():
    with pytest.raises(ModelSpecError, match="unknown model provider 'acme'") as raised:
        provider_for("acme:super-model")
    assert "openai" in str(raised.value) and "replay:<scenario>" in str(raised.value)


def test_every_registered_provider_is_a_provider_under_its_own_name():
    assert {"replay", "openai-compatible", "human", "openai", "anthropic"} <= set(PROVIDERS)
    for name, provider in PROVIDERS.items():
        assert isinstance(provider, Provider) and provider.name == name


def test_a_human_spec_is_a_person_not_a_model():
    with pytest.raises(ModelSpecError, match="names a person"):
        resolve_model("human:ana")


def test_models_are_matched_to_their_provider():
    from langchain_anthropic import ChatAnthropic
    from langchain_openai import ChatOpenAI

    assert provider_of(ReplayChatModel(turns=[])) is PROVIDERS["replay"]
    assert provider_of(ChatOpenAI(model="m", api_key="x")) is PROVIDERS["openai"]
    assert provider_of(ChatAnthropic(model="claude-x", api_key="x")) is PROVIDERS["anthropic"]
    other = provider_of(GenericFakeChatModel(messages=iter([])))
    assert other.name == "" and not other.cache_markers


def test_the_anthropic_provider_owns_the_cache_markers():
    assert wants_cache_markers("anthropic:claude-sonnet-4-5")
    assert wants_cache_markers("claude-sonnet-4-5")
    assert not wants_cache_markers("openai:gpt-4.1")
    blocks = payload_message(["head ", "step", " tail"], cache_markers=True).content
    assert [b["cache_control"] for b in blocks if "cache_control" in b] == [
        {"type": "ephemeral"}
    ] * 2
    assert (
        payload_message(["head ", "step", " tail"], cache_markers=False).content == "head step tail"
    )


def test_the_verdict_schema_dialect_is_the_providers():
    plain = verdict_json_schema(["a", "b"], dialect=PROVIDERS["openai"])
    assert "items" not in plain["properties"]["criteria"]
    google = verdict_json_schema(["a", "b"], dialect=PROVIDERS["google_genai"])
    criteria = google["properties"]["criteria"]
    assert len(criteria["items"]["anyOf"]) == 4 and len(criteria["prefixItems"]) == 2


def test_an_anthropic_grader_is_rebuilt_through_its_public_fields():
    from langchain_anthropic import ChatAnthropic

    given = ChatAnthropic(model="claude-x", api_key="sk-test", base_url="http://127.0.0.1:9")
    built = grader_model(given, timeout_s=33.0)
    assert built is not given and type(built) is ChatAnthropic
    assert (built.max_retries, built.default_request_timeout) == (0, 33.0)
    assert (built.model, built.anthropic_api_url) == ("claude-x", "http://127.0.0.1:9")
    assert given.max_retries == 2
    assert grader_model(built, timeout_s=5.0) is built, "already without retries, with a timeout"


def test_an_openai_grader_copy_gets_clients_without_retries():
    from langchain_openai import ChatOpenAI

    given = ChatOpenAI(model="m", api_key="sk-test", base_url="http://127.0.0.1:9/v1")
    built = grader_model(given, timeout_s=12.0)
    assert (built.max_retries, built.request_timeout) == (0, 12.0)
    assert built.root_client.max_retries == 0 and given.root_client.max_retries == 2


def test_other_models_are_used_as_they_are():
    model = GenericFakeChatModel(messages=iter([]))
    assert grader_model(model, timeout_s=1.0) is model


def test_our_own_prefixes_match_only_as_written():
    assert provider_for("OpenAI:gpt-4.1").name == "openai"
    for spec in ("Replay:haiku", "HUMAN:ana"):
        with pytest.raises(ModelSpecError, match="unknown model provider"):
            provider_for(spec)


# ---------------------------------------------------------------- one spec parser


@pytest.mark.parametrize(
    ("text", "kind", "provider", "model", "options"),
    [
        (" replay:haiku?latency_s=1 ", "replay", "replay", "haiku", {"latency_s": "1"}),
        ("openai-compatible:qwen2.5:7b", "compatible", "openai-compatible", "qwen2.5:7b", {}),
        ("human:ana", "human", "human", "ana", {}),
        ("Gemini:gemini-2.5-flash", "provider", "google_genai", "gemini-2.5-flash", {}),
        ("ollama:qwen2.5:7b", "provider", "ollama", "qwen2.5:7b", {}),
        ("None", "checks", "checks", "", {}),
        ("gpt-4.1", "bare", "", "gpt-4.1", {}),
    ],
)
def test_one_parser_reads_every_form_of_spec(text, kind, provider, model, options):
    spec = parse_model_spec(text)
    assert (spec.kind, spec.provider, spec.model, dict(spec.options)) == (
        kind,
        provider,
        model,
        options,
    )
    assert str(spec) == text.strip()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "empty"),
        ("openai:", "malformed"),
        (":gpt-4o", "malformed"),
        ("replay:?latency_s=1", "names no scenario"),
        ("replay:haiku?latency_s", "key=value"),
        ("replay:haiku?a=1&a=2", "given twice"),
        ("human:", "names no reviewer"),
        (42, "int 42"),
    ],
)
def test_a_bad_spec_is_an_error_quoting_it(text, problem):
    with pytest.raises(ModelSpecError, match=problem) as raised:
        parse_model_spec(text)
    if isinstance(text, str) and text:
        assert repr(text) in str(raised.value)


def test_the_grader_resolves_specs_through_the_runs_resolver(monkeypatch):
    """Guards issue 30: the grader had its own entry point (`model_from_spec`, straight to
    LangChain), so `RubricMiddleware(model="replay:haiku")` and
    `openai-compatible:<model>` failed as graders while a run took them. Now a grader's
    string goes through `parse_model_spec` and the registry like a run's."""
    from langchain_openai import ChatOpenAI

    monkeypatch.setenv("RUBRIC_STUDIO_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    built = grader_model("replay:haiku", timeout_s=5.0)
    assert built.model_name == "replay:haiku"
    compatible = grader_model("openai-compatible:m", timeout_s=5.0)
    assert isinstance(compatible, ChatOpenAI) and compatible.max_retries == 0
    with pytest.raises(ModelSpecError, match=r"panel\[1\]='checks' .* names no model"):
        grader_model("checks", timeout_s=5.0, parameter="panel[1]")


def test_the_spec_checks_of_pages_and_cli_use_the_parser():
    """`ui.models` and the replay fit read specs through `spec_kind`, so a spec with
    blanks or a checks-only grader is classified the same everywhere."""
    assert scenario_of(" replay:haiku?latency_s=1") == "haiku"
    assert scenario_of("openai:gpt-4.1") is None and scenario_of(None) is None
    assert spec_kind("none") == "checks" and spec_kind(":x") is None
