"""Model specs, offline replay scenarios and their scripted turns."""

from __future__ import annotations

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from rubric_core import RetryPolicy
from rubric_core.middleware import RubricMiddleware
from rubric_core.providers import (
    ModelSpecError,
    ReplayChatModel,
    ScriptedGraderError,
    api_key_status,
    default_models,
    describe_model,
    last_fenced_block,
    list_scenarios,
    load_scenario,
    resolve_model,
    tool_call_turn,
    verdict_turn,
)
from rubric_core.rubric import parse_criteria
from rubric_core.schema import GraderResponse
from rubric_core.tools import TOOL_NAMES, get_tools

REQUIRED_SCENARIOS = {
    "find_duplicates": "satisfied",
    "haiku": "satisfied",
    "satisfied_first_try": "satisfied",
    "needs_revision_then_satisfied": "satisfied",
    "max_iterations": "max_iterations_reached",
    "rubric_failed": "failed",
    "grader_error": "grader_error",
    "report_sections": "satisfied",
    "release_note_regression": "max_iterations_reached",
}


# --------------------------------------------------------------------------- replay


def test_resolve_model_replay_plays_the_scenarios_agent_and_grader_sides(no_keys):
    agent = resolve_model("replay:haiku", role="agent")
    grader = resolve_model("replay:haiku", role="grader")
    assert isinstance(agent, ReplayChatModel)
    assert agent.model_name == grader.model_name == "replay:haiku"
    assert "replays" in agent.description.lower()
    assert "```text" in agent.invoke("write").content
    assert grader.invoke([HumanMessage("```text\na b\n```")]).tool_calls[0]["name"] == (
        "count_syllables"
    )


def test_resolve_model_replay_returns_a_fresh_model_each_time(no_keys):
    first = resolve_model("replay:needs_revision_then_satisfied")
    first.invoke("go")
    second = resolve_model("replay:needs_revision_then_satisfied")
    assert first is not second
    assert "3 March" not in second.invoke("go").content  # starts at turn one again


def test_resolve_model_replay_unknown_scenario_lists_known_ones(no_keys):
    with pytest.raises(ModelSpecError, match="unknown replay scenario 'nope'") as info:
        resolve_model("replay:nope")
    assert "find_duplicates" in str(info.value)
    with pytest.raises(ModelSpecError, match="names no scenario"):
        resolve_model("replay:")


def test_resolve_model_replay_latency_option(no_keys):
    assert resolve_model("replay:haiku?latency_s=0.25").latency_s == 0.25
    with pytest.raises(ModelSpecError, match="latency_s"):
        resolve_model("replay:haiku?latency_s=fast")
    with pytest.raises(ModelSpecError, match="only option"):
        resolve_model("replay:haiku?speed=1")


def test_fast_forward_skips_answers_or_whole_grader_attempts():
    agent = ReplayChatModel(turns=[AIMessage("one"), AIMessage("two"), AIMessage("three")])
    agent.fast_forward(2, verdicts_only=False)
    assert agent.invoke("go").content == "three"

    def scripted_failure(messages):
        raise ScriptedGraderError("down")

    grader = ReplayChatModel(
        turns=[
            tool_call_turn("text_stats", {"text": "first"}),
            verdict_turn("needs_revision", [("is short", False)]),
            scripted_failure,
            tool_call_turn("text_stats", {"text": "third"}),
            verdict_turn("satisfied", [("is short", True)]),
        ]
    )
    grader.fast_forward(2, verdicts_only=True)
    assert grader.invoke("grade").tool_calls[0]["args"] == {"text": "third"}

    cycling = ReplayChatModel(turns=[AIMessage("a"), AIMessage("b")], cycle=True)
    cycling.fast_forward(3, verdicts_only=False)
    assert cycling.invoke("go").content == "b"
    # a cycling script that never ends an attempt is left where it is, not looped forever
    endless = ReplayChatModel(turns=[AIMessage("a"), AIMessage("b")], cycle=True)
    endless.fast_forward(1, verdicts_only=True)
    assert endless.invoke("go").content == "a"


# --------------------------------------------------------------------------- endpoints


def test_resolve_model_base_url_builds_an_openai_compatible_client(no_keys):
    from langchain_openai import ChatOpenAI

    no_keys.setenv("OPENAI_API_KEY", "sk-real-openai-key")
    model = resolve_model("smollm2", base_url="http://127.0.0.1:8080/v1", timeout_s=30)
    assert isinstance(model, ChatOpenAI)
    assert model.model_name == "smollm2"
    assert model.openai_api_base == "http://127.0.0.1:8080/v1"
    assert model.max_retries == 0
    assert model.request_timeout == 30
    # The OpenAI key is never sent to some other endpoint.
    assert model.openai_api_key.get_secret_value() == "not-needed"


def test_resolve_model_openai_compatible_prefix(no_keys):
    with pytest.raises(ModelSpecError, match="needs a base URL"):
        resolve_model("openai-compatible:llama")
    no_keys.setenv("RUBRIC_STUDIO_LLM_BASE_URL", "http://localhost:11434/v1")
    model = resolve_model("openai-compatible:qwen2.5:7b", api_key="local-key")
    assert model.model_name == "qwen2.5:7b"
    assert model.openai_api_key.get_secret_value() == "local-key"
    with pytest.raises(ModelSpecError, match="needs a model name"):
        resolve_model("openai-compatible:", base_url="http://localhost:1/v1")


def test_resolve_model_rejects_a_bad_base_url(no_keys):
    with pytest.raises(ModelSpecError, match="base_url must be an http"):
        resolve_model("m", base_url="localhost:8080")


# --------------------------------------------------------------------------- providers


@pytest.mark.parametrize(
    ("spec", "env_var", "class_name"),
    [
        ("openai:gpt-4.1-mini", "OPENAI_API_KEY", "ChatOpenAI"),
        ("anthropic:claude-haiku-4-5", "ANTHROPIC_API_KEY", "ChatAnthropic"),
        ("google_genai:gemini-2.5-flash", "GOOGLE_API_KEY", "ChatGoogleGenerativeAI"),
    ],
)
def test_resolve_model_provider_spec_with_key(no_keys, spec, env_var, class_name):
    no_keys.setenv(env_var, "test-key-not-real")
    model = resolve_model(spec, role="grader")
    assert type(model).__name__ == class_name
    assert getattr(model, "max_retries", 0) == 0  # the middleware retries graders


@pytest.mark.parametrize(
    ("spec", "env_var"),
    [
        ("openai:gpt-4.1-mini", "OPENAI_API_KEY"),
        ("anthropic:claude-haiku-4-5", "ANTHROPIC_API_KEY"),
        ("google_genai:gemini-2.5-flash", "GOOGLE_API_KEY"),
        ("google:gemini-2.5-flash", "GOOGLE_API_KEY"),
    ],
)
def test_resolve_model_missing_api_key_names_the_variable(no_keys, spec, env_var):
    with pytest.raises(ModelSpecError, match=env_var):
        resolve_model(spec)


def test_resolve_model_explicit_api_key_needs_no_environment(no_keys):
    model = resolve_model("openai:gpt-4.1-mini", api_key="sk-explicit")
    assert model.openai_api_key.get_secret_value() == "sk-explicit"


def test_resolve_model_unknown_provider_is_named(no_keys):
    with pytest.raises(ModelSpecError, match="unknown model provider 'acme'") as info:
        resolve_model("acme:super-model")
    assert "openai" in str(info.value)


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("gpt-4o", "no provider"),
        ("openai:", "malformed"),
        (":gpt-4o", "malformed"),
        ("", "empty"),
        ("   ", "empty"),
    ],
)
def test_resolve_model_malformed_specs(no_keys, spec, problem):
    with pytest.raises(ModelSpecError, match=problem):
        resolve_model(spec)


def test_resolve_model_rejects_a_bad_role_and_timeout(no_keys):
    with pytest.raises(ModelSpecError, match="role must be"):
        resolve_model("replay:haiku", role="judge")
    with pytest.raises(ModelSpecError, match="timeout_s"):
        resolve_model("replay:haiku", timeout_s=0)


def test_default_models_use_replay_without_keys(no_keys):
    agent, grader = default_models()
    assert agent.startswith("replay:")
    assert grader.startswith("replay:")
    resolve_model(agent)
    no_keys.setenv("ANTHROPIC_API_KEY", "k")
    assert default_models()[0].startswith("anthropic:")
    no_keys.setenv("RUBRIC_STUDIO_GRADER_MODEL", "replay:haiku")
    assert default_models()[1] == "replay:haiku"


def test_api_key_status_reports_presence_not_values(no_keys):
    no_keys.setenv("GEMINI_API_KEY", "secret-value")
    status = {row["provider"]: row for row in api_key_status()}
    assert status["google_genai"] == {
        "provider": "google_genai",
        "env_var": "GEMINI_API_KEY",
        "configured": True,
    }
    assert status["openai"]["configured"] is False
    assert "secret-value" not in repr(api_key_status())


def test_describe_model_says_replay_is_not_a_model():
    assert "not a language model" in describe_model("replay:haiku")


# --------------------------------------------------------------------------- scenarios


def test_list_scenarios_has_every_required_scenario():
    scenarios = {s["name"]: s for s in list_scenarios()}
    for name, status in REQUIRED_SCENARIOS.items():
        assert scenarios[name]["expected_status"] == status
    for scenario in scenarios.values():
        assert {"title", "description", "rubric", "input", "grader_tools", "agent_kind"} <= set(
            scenario
        )
        assert "replays scripted" in scenario["description"]
        assert scenario["agent_kind"] in ("basic", "deep")
        assert set(scenario["grader_tools"]) <= set(TOOL_NAMES)


def test_load_scenario_unknown_names_known_ones():
    with pytest.raises(ModelSpecError, match=r"known scenarios: .*haiku"):
        load_scenario("limerick")


def test_load_scenario_returns_a_copy():
    load_scenario("haiku")["grader_turns"].clear()
    assert load_scenario("replay:haiku")["grader_turns"]


@pytest.mark.parametrize("name", sorted(REQUIRED_SCENARIOS))
def test_scenario_verdicts_validate_and_cover_the_rubric(name):
    scenario = load_scenario(name)
    # the judge is asked about the criteria no code check decides
    criteria = [c.name for c in parse_criteria(scenario["rubric"]) if c.check is None]
    for turn in scenario["grader_turns"]:
        if "verdict" in turn:
            verdict = GraderResponse.model_validate(turn["verdict"])
            assert [c.name for c in verdict.criteria] == criteria
        if "verdict_from_tool" in turn:
            names = [c["name"] for c in turn["verdict_from_tool"]["criteria"]]
            assert names == criteria


def test_last_fenced_block_ignores_inline_fences_and_takes_the_latest():
    messages = [
        HumanMessage("Reply in one ```python block.\n```python\nold = 1\n```\n"),
        HumanMessage("text\n```python\nnew = 2\n```\n```text\npoem\n```"),
    ]
    assert last_fenced_block(messages) == "new = 2\n"
    assert last_fenced_block(messages, "text") == "poem\n"
    assert last_fenced_block(messages, "any") == "poem\n"
    assert last_fenced_block([HumanMessage("no code")]) == ""


def test_scripted_grader_really_grades_the_tool_result():
    """A correct first draft is satisfied at once: the verdict follows the tests."""
    scenario = load_scenario("find_duplicates")
    fixed_draft = scenario["agent_turns"][1]["content"]
    grader = resolve_model("replay:find_duplicates", role="grader")
    payload = [HumanMessage(f"<final_answer>\n{fixed_draft}\n</final_answer>")]
    call = grader.invoke(payload).tool_calls[0]
    assert "seen_other" in call["args"]["code"]
    result = get_tools(["run_test_suite"])[0].invoke(call["args"])
    assert result.startswith("PASSED")
    tool_message = ToolMessage(result, tool_call_id=call["id"], name="run_test_suite")
    verdict = grader.invoke([*payload, AIMessage("", tool_calls=[call]), tool_message])
    response = GraderResponse.model_validate(verdict.tool_calls[0]["args"])
    assert response.result == "satisfied"


def test_raise_turn_raises_the_scripted_error():
    grader = resolve_model("replay:grader_error", role="grader")
    with pytest.raises(RuntimeError, match="scripted grader failure"):
        grader.invoke("grade this")
    assert issubclass(ScriptedGraderError, RuntimeError)


def _run_scenario(name: str) -> tuple[dict, list[dict]]:
    summary = next(s for s in list_scenarios() if s["name"] == name)
    evaluations: list[dict] = []
    middleware = RubricMiddleware(
        model=resolve_model(summary["model"], role="grader"),
        tools=get_tools(summary["grader_tools"]),
        max_iterations=summary["max_iterations"],
        on_evaluation=evaluations.append,
        retry=RetryPolicy(initial_delay_s=0.01, max_delay_s=0.02),
    )
    agent_model = resolve_model(summary["model"], role="agent")
    if summary["agent_kind"] == "deep":
        from deepagents import create_deep_agent

        agent = create_deep_agent(
            model=agent_model, middleware=[middleware], checkpointer=InMemorySaver()
        )
    else:
        agent = create_agent(agent_model, middleware=[middleware], checkpointer=InMemorySaver())
    state = agent.invoke(
        {"messages": [HumanMessage(summary["input"])], "rubric": summary["rubric"]},
        {"configurable": {"thread_id": f"scenario-{name}"}},
    )
    return state, evaluations


@pytest.mark.parametrize("name", sorted(REQUIRED_SCENARIOS))
def test_scenario_ends_in_its_expected_status(name):
    state, evaluations = _run_scenario(name)
    assert state["_rubric_status"] == REQUIRED_SCENARIOS[name]
    assert evaluations[-1]["status"] == REQUIRED_SCENARIOS[name]


def test_find_duplicates_scenario_feeds_back_the_real_type_error():
    _, evaluations = _run_scenario("find_duplicates")
    first, last = evaluations[0], evaluations[-1]
    assert first["result"] == "needs_revision"
    gaps = " ".join(c.get("gap", "") for c in first["criteria"])
    assert "test_unhashable" in gaps
    assert "TypeError: unhashable type: 'list'" in gaps
    assert last["result"] == "satisfied"


def test_haiku_scenario_feeds_back_the_syllable_counts():
    _, evaluations = _run_scenario("haiku")
    gaps = " ".join(c.get("gap", "") for c in evaluations[0]["criteria"])
    assert "pattern: 5/8/5" in gaps
    assert evaluations[1]["result"] == "satisfied"
