"""projections.validity: one accepted and at least one refused history per rule, per provider.

Every accepted history is also accepted by the provider's official SDK request types (strictly:
no unknown keys, every iterable consumed, see `sdk.py`); every refused one breaks exactly the
rule it is named for, and says whether the SDK types alone would have caught it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter
from sdk import sdk_errors

from convgraph.errors import ProjectionError
from convgraph.projections import validity
from convgraph.projections.validity import PROVIDERS, Provider, Violation, check

Wire = list[dict[str, Any]]

# ---- Anthropic Messages API -------------------------------------------------------------


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def use(tool_id: str, name: str = "get_weather", city: str = "Paris") -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": {"city": city}}


def result(tool_id: str, out: Any = "18°C, clear") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": out}


def user(*content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content[0] if len(content) == 1 and isinstance(content[0], str) else list(content)}


def assistant(*content: Any) -> dict[str, Any]:
    return {**user(*content), "role": "assistant"}


THINKING = {"type": "thinking", "thinking": "Two cities, two calls.", "signature": "EqQBCkYIBxgCKkA..."}
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT..."}
ASK = user("What's the weather in Paris and in Oslo?")

ANTHROPIC_VALID: dict[str, Wire] = {
    "plain": [user("Hi"), assistant("Hello! How can I help?")],
    "consecutive_same_role_is_merged_by_the_api": [user("Hi"), user("Still there?"), assistant("Yes.")],
    "parallel_tool_calls_with_thinking": [
        ASK,
        assistant(THINKING, text("Checking both."), use("toolu_1"), use("toolu_2", city="Oslo")),
        user(result("toolu_1"), result("toolu_2", [text("4°C, snow")]), text("Thanks!")),
        assistant("Paris is 18°C and clear; Oslo is 4°C with snow."),
    ],
    "redacted_thinking_replayed": [user("Hi"), assistant(REDACTED, text("Hello."))],
    "final_assistant_may_be_empty_prefill": [user("Write a haiku."), assistant("")],
    "final_assistant_prefill_without_trailing_space": [user("JSON please."), assistant("{")],
    "tool_result_with_error_flag": [
        ASK,
        assistant(use("toolu_1")),
        user({**result("toolu_1", "timeout"), "is_error": True}),
        assistant("The weather service timed out."),
    ],
}

ANTHROPIC_BAD: list[tuple[str, str, Wire, bool, str]] = [
    # (id, rule, wire, accepted by the SDK types, text the message must contain)
    ("system_role_not_portable", "invalid_role", [user("Hi"), {"role": "system", "content": "Be brief."}, assistant("Hi.")], True, "'user' or 'assistant'"),
    ("tool_role_from_openai", "invalid_role", [user("Hi"), {"role": "tool", "content": "x"}], False, "'user' or 'assistant'"),
    ("assistant_first", "first_not_user", [assistant("Hi, how can I help?"), user("Weather?")], True, 'first message must use the "user" role'),
    ("empty_string_content", "empty_content", [user(""), assistant("?")], True, "non-empty content"),
    ("empty_list_content_not_final", "empty_content", [user("Hi"), assistant(), user("Hello?")], True, "optional final assistant"),
    ("empty_text_block", "empty_text_block", [user(text(""), text("Hi")), assistant("Hello.")], True, "must be non-empty"),
    ("empty_text_in_tool_result", "empty_text_block", [ASK, assistant(use("toolu_1")), user(result("toolu_1", [text("")]))], True, "must be non-empty"),
    ("whitespace_text_block", "whitespace_text_block", [user(text("\n\n"), text("Hi")), assistant("Hello.")], True, "non-whitespace"),
    ("whitespace_string_content", "whitespace_text_block", [user("   "), assistant("?")], True, "non-whitespace"),
    ("final_prefill_trailing_space", "final_assistant_trailing_whitespace", [user("JSON please."), assistant("Here it is: ")], True, "trailing whitespace"),
    ("thinking_signature_missing", "thinking_without_signature", [user("Hi"), assistant({"type": "thinking", "thinking": "hm"}, text("Hello."))], False, "signature: Field required"),
    ("thinking_signature_empty", "thinking_without_signature", [user("Hi"), assistant({**THINKING, "signature": ""}, text("Hello."))], True, "Invalid `signature`"),
    ("redacted_thinking_data_missing", "redacted_thinking_without_data", [user("Hi"), assistant({"type": "redacted_thinking"}, text("Hello."))], False, "data: Field required"),
    ("tool_use_id_reused", "duplicate_tool_use_id", [ASK, assistant(use("toolu_1")), user(result("toolu_1")), assistant(use("toolu_1", city="Oslo")), user(result("toolu_1")), assistant("Done.")], True, "must be unique"),
    ("interrupted_call_at_end", "tool_use_without_result", [ASK, assistant(text("Checking."), use("toolu_1"))], True, "immediately after: toolu_1."),
    ("parallel_call_half_answered", "tool_use_without_result", [ASK, assistant(use("toolu_1"), use("toolu_2", city="Oslo")), user(result("toolu_1")), assistant("Paris is 18°C.")], True, "immediately after: toolu_2."),
    ("results_split_over_two_user_messages", "tool_use_without_result", [ASK, assistant(use("toolu_1"), use("toolu_2", city="Oslo")), user(result("toolu_1")), user(text("and Oslo?"))], True, "toolu_2"),
    ("user_interrupted_the_call", "tool_use_without_result", [ASK, assistant(use("toolu_1")), user("Never mind."), assistant("OK.")], True, "toolu_1"),
    ("window_cut_inside_exchange", "unexpected_tool_result", [user(result("toolu_1"), text("And tomorrow?")), assistant("Tomorrow: rain.")], True, "blocks: toolu_1."),
    ("result_for_an_older_call", "unexpected_tool_result", [ASK, assistant(use("toolu_1")), user(result("toolu_1")), assistant("18°C."), user(result("toolu_1"))], True, "previous message"),
    ("text_before_tool_result", "tool_result_not_first", [ASK, assistant(use("toolu_1")), user(text("Here you go:"), result("toolu_1"))], True, "Did not find 1 `tool_result` block(s)"),
    ("empty_history", "empty_list", [], True, "at least one message"),
    ("thinking_after_text", "thinking_not_first", [user("Hi"), assistant(text("Preface."), THINKING, text("Answer."))], True, "but found `text`"),
    ("coalesced_turns_put_thinking_second", "thinking_not_first", [user("Hi"), assistant(text("Preface.")), assistant(THINKING, text("Answer."))], True, "must start with a thinking block"),
]

# Rules that hold only when the request turns extended thinking on: `check(..., thinking=True)`.
ANTHROPIC_THINKING_BAD: list[tuple[str, str, Wire, bool, str]] = [
    ("tool_cycle_lost_its_thinking", "cycle_without_thinking", [ASK, assistant(use("toolu_1")), user(result("toolu_1"))], True, "but found `tool_use`"),
    ("tool_cycle_opened_by_coalesced_text", "cycle_without_thinking", [ASK, assistant(text("Let me look.")), assistant(use("toolu_1")), user(result("toolu_1"))], True, "must start with a thinking block"),
]

# ---- OpenAI Chat Completions ------------------------------------------------------------


def call(call_id: str, name: str = "get_weather", args: Any = '{"city": "Paris"}') -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def calls(*tool_calls: dict[str, Any], content: Any = None) -> dict[str, Any]:
    return {"role": "assistant", "content": content, "tool_calls": list(tool_calls)}


def tool(call_id: str | None, content: Any = "18°C, clear") -> dict[str, Any]:
    msg = {"role": "tool", "content": content}
    return msg if call_id is None else {**msg, "tool_call_id": call_id}


def msg(role: str, content: Any) -> dict[str, Any]:
    return {"role": role, "content": content}


Q = msg("user", "What's the weather in Paris and in Oslo?")

OPENAI_VALID: dict[str, Wire] = {
    "plain_with_system_and_developer": [msg("system", "Be brief."), msg("developer", "Use metric."), Q, msg("assistant", "Which one first?")],
    "parallel_tool_calls": [Q, calls(call("call_1"), call("call_2", args='{"city": "Oslo"}')), tool("call_1"), tool("call_2", "4°C, snow"), msg("assistant", "Paris 18°C, Oslo 4°C.")],
    "content_beside_tool_calls_and_text_parts_result": [Q, calls(call("call_1"), content="Checking."), tool("call_1", [{"type": "text", "text": "18°C"}]), msg("assistant", "18°C.")],
    "user_content_parts": [msg("user", [{"type": "text", "text": "Describe this."}, {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}])],
    "empty_string_tool_result": [Q, calls(call("call_1")), tool("call_1", ""), msg("assistant", "No data.")],
}

OPENAI_BAD: list[tuple[str, str, Wire, bool, str]] = [
    ("gemini_role", "invalid_role", [Q, msg("model", "Hi.")], False, "Invalid value: 'model'"),
    ("empty_user_string", "empty_content", [msg("user", ""), msg("assistant", "?")], True, "messages[0].content"),
    ("empty_system_parts", "empty_content", [msg("system", []), Q], True, "empty array"),
    ("assistant_null_without_calls", "assistant_without_content", [Q, msg("assistant", None), msg("user", "Hello?")], True, "got null"),
    ("arguments_as_object", "arguments_not_string", [Q, calls(call("call_1", args={"city": "Paris"})), tool("call_1"), msg("assistant", "18°C.")], False, "expected a string, but got an object instead"),
    ("interrupted_call_at_end", "tool_call_without_result", [Q, calls(call("call_1"))], True, "did not have response messages: call_1"),
    ("parallel_call_half_answered", "tool_call_without_result", [Q, calls(call("call_1"), call("call_2")), tool("call_1"), msg("assistant", "Paris is 18°C.")], True, "response messages: call_2"),
    ("window_cut_inside_exchange", "tool_without_call", [tool("call_1"), msg("user", "And tomorrow?")], True, "preceeding message with 'tool_calls'"),
    ("tool_after_plain_assistant", "tool_without_call", [Q, msg("assistant", "Sure."), tool("call_1")], True, "must be a response to a preceeding"),
    ("tool_without_id", "missing_tool_call_id", [Q, calls(call("call_1")), tool("call_1"), tool(None)], False, "must have a 'tool_call_id'"),
    ("answer_to_another_call", "unknown_tool_call_id", [Q, calls(call("call_1")), tool("call_1"), tool("call_9")], True, "'call_9' not found in 'tool_calls'"),
    ("tool_content_null", "tool_content_missing", [Q, calls(call("call_1")), tool("call_1", None), msg("assistant", "?")], False, "got null"),
    ("tool_content_image", "tool_content_missing", [Q, calls(call("call_1")), tool("call_1", [{"type": "image_url", "image_url": {"url": "https://x/a.png"}}])], False, "text parts only"),
    ("empty_history", "empty_list", [], True, "Invalid 'messages': empty array"),
]

# ---- OpenAI Responses API ---------------------------------------------------------------


def fc(call_id: str, name: str = "get_weather", city: str = "Paris") -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": f'{{"city": "{city}"}}'}


def fco(call_id: str, output: str = "18°C, clear") -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def reasoning(item_id: str) -> dict[str, Any]:
    return {"type": "reasoning", "id": item_id, "summary": [], "encrypted_content": "gAAAAABo..."}


def said(t: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed", "content": [{"type": "output_text", "text": t, "annotations": []}]}


RQ = {"role": "user", "content": "What's the weather in Paris and in Oslo?"}

RESPONSES_VALID: dict[str, Wire] = {
    "plain_easy_messages": [{"role": "developer", "content": "Be brief."}, RQ, {"role": "assistant", "content": "Which first?"}],
    "input_text_parts": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]}, said("Hello.")],
    "reasoning_then_parallel_calls": [RQ, reasoning("rs_1"), fc("call_1"), fc("call_2", city="Oslo"), fco("call_1"), fco("call_2", "4°C"), reasoning("rs_2"), said("Paris 18°C, Oslo 4°C.")],
}

RESPONSES_BAD: list[tuple[str, str, Wire, bool, str]] = [
    ("window_cut_inside_exchange", "output_without_call", [fco("call_1"), {"role": "user", "content": "And tomorrow?"}], True, "No tool call found for function call output with call_id call_1."),
    ("interrupted_call_at_end", "call_without_output", [RQ, reasoning("rs_1"), fc("call_1")], True, "No tool output found for function call call_1."),
    ("parallel_call_half_answered", "call_without_output", [RQ, reasoning("rs_1"), fc("call_1"), fc("call_2"), fco("call_1"), said("18°C.")], True, "function call call_2."),
    ("reasoning_before_user", "reasoning_without_following", [RQ, reasoning("rs_1"), {"role": "user", "content": "Hello?"}], True, "Item 'rs_1' of type 'reasoning'"),
    ("reasoning_at_end", "reasoning_without_following", [RQ, reasoning("rs_1")], True, "required following item."),
    ("two_reasoning_items", "reasoning_without_following", [RQ, reasoning("rs_1"), reasoning("rs_2"), said("Hi.")], True, "Item 'rs_1'"),
    ("empty_user_string", "empty_content", [{"role": "user", "content": ""}], True, "input[0].content"),
    ("empty_parts", "empty_content", [RQ, {"type": "message", "role": "assistant", "content": []}], True, "empty array"),
    ("empty_input", "empty_list", [], True, "Invalid 'input'"),
]

# ---- Gemini -----------------------------------------------------------------------------


def turn(role: str, *parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": role, "parts": list(parts)}


def gcall(name: str = "get_weather", call_id: str | None = None, camel: bool = True) -> dict[str, Any]:
    body = {"name": name, "args": {"city": "Paris"}, **({"id": call_id} if call_id else {})}
    return {"functionCall" if camel else "function_call": body}


def gresp(name: str = "get_weather", call_id: str | None = None, camel: bool = True) -> dict[str, Any]:
    body = {"name": name, "response": {"output": "18°C"}, **({"id": call_id} if call_id else {})}
    return {"functionResponse" if camel else "function_response": body}


GQ = turn("user", {"text": "What's the weather in Paris and in Oslo?"})

GEMINI_VALID: dict[str, Wire] = {
    "plain": [turn("user", {"text": "Hi"}), turn("model", {"text": "Hello!"})],
    "parallel_calls_camel_case_with_ids": [GQ, turn("model", gcall(call_id="a"), gcall(call_id="b")), turn("user", gresp(call_id="a"), gresp(call_id="b")), turn("model", {"text": "Both mild."})],
    "snake_case_with_thought_signature": [GQ, turn("model", {**gcall(camel=False), "thought_signature": "c2lnbmF0dXJl"}), turn("user", gresp(camel=False)), turn("model", {"text": "18°C."}, {"text": "", "thought_signature": "c2ln"})],
    "sequential_calls": [GQ, turn("model", gcall()), turn("user", gresp()), turn("model", gcall("get_time")), turn("user", gresp("get_time")), turn("model", {"text": "Done."})],
}

GEMINI_BAD: list[tuple[str, str, Wire, bool, str]] = [
    ("assistant_role", "invalid_role", [GQ, turn("assistant", {"text": "Hi."})], True, "valid role: user, model"),
    ("empty_parts", "empty_parts", [GQ, turn("model")], True, "contents[1].parts: contents.parts must not be empty"),
    ("part_without_data", "empty_part", [turn("user", {}, {"text": "Hi"})], True, "oneof field 'data'"),
    ("empty_text", "empty_text", [turn("user", {"text": ""}, {"text": "Hi"})], True, "empty text parameter"),
    ("window_cut_before_call", "call_turn_misplaced", [turn("model", gcall()), turn("user", gresp()), turn("model", {"text": "18°C."})], True, "comes immediately after a user turn"),
    ("two_model_turns_in_a_row", "roles_not_alternating", [GQ, turn("model", {"text": "Let me check."}), turn("model", {"text": "Done."})], True, "alternate between user and model"),
    ("parallel_call_half_answered", "response_count_mismatch", [GQ, turn("model", gcall(), gcall("get_time")), turn("user", gresp()), turn("model", {"text": "?"})], True, "number of function response parts"),
    ("interrupted_call_at_end", "response_count_mismatch", [GQ, turn("model", gcall())], True, "equal to the number of function call parts"),
    ("window_cut_inside_exchange", "response_without_call", [turn("user", gresp()), turn("model", {"text": "18°C."})], True, "response turn comes immediately after a function call turn"),
    ("response_name_answers_nothing", "response_name_mismatch", [GQ, turn("model", gcall()), turn("user", gresp("get_time")), turn("model", {"text": "?"})], True, "name 'get_time'"),
    ("response_id_answers_nothing", "response_name_mismatch", [GQ, turn("model", gcall(call_id="a")), turn("user", gresp(call_id="z")), turn("model", {"text": "?"})], True, "id 'z'"),
    ("empty_history", "empty_list", [], True, "contents is not specified"),
]

VALID = [
    pytest.param(provider, wire, id=f"{provider}-{name}")
    for provider, table in (("anthropic", ANTHROPIC_VALID), ("openai", OPENAI_VALID), ("openai-responses", RESPONSES_VALID), ("gemini", GEMINI_VALID))
    for name, wire in table.items()
]
BAD = [
    pytest.param(provider, rule, wire, sdk_ok, needle, id=f"{provider}-{name}")
    for provider, table in (("anthropic", ANTHROPIC_BAD), ("openai", OPENAI_BAD), ("openai-responses", RESPONSES_BAD), ("gemini", GEMINI_BAD))
    for name, rule, wire, sdk_ok, needle in table
]


@pytest.mark.parametrize(("provider", "wire"), VALID)
def test_valid_history_has_no_violation_and_the_sdk_accepts_it(provider: Provider, wire: Wire) -> None:
    assert check(provider, wire) == []
    assert sdk_errors(provider, wire) == []


@pytest.mark.parametrize(("provider", "rule", "wire", "sdk_ok", "needle"), BAD)
def test_each_detector_fires_alone_on_its_fault(provider: Provider, rule: str, wire: Wire, sdk_ok: bool, needle: str) -> None:
    found = check(provider, wire)
    assert {v.rule for v in found} == {rule}, found
    assert all(v.provider == provider for v in found)
    assert any(needle in v.message for v in found), [v.message for v in found]
    # the SDK types alone miss every structural fault: that is why this module exists
    assert (sdk_errors(provider, wire) == []) is sdk_ok


@pytest.mark.parametrize(("name", "rule", "wire", "sdk_ok", "needle"), ANTHROPIC_THINKING_BAD)
def test_with_thinking_on_the_tool_cycle_must_open_with_thinking(
    name: str, rule: str, wire: Wire, sdk_ok: bool, needle: str
) -> None:
    found = check("anthropic", wire, thinking=True)
    assert {v.rule for v in found} == {rule}, (name, found)
    assert any(needle in v.message for v in found), [v.message for v in found]
    assert check("anthropic", wire) == []  # without thinking the same history is fine
    assert (sdk_errors("anthropic", wire) == []) is sdk_ok
    # thinking at the head of the cycle's (combined) assistant turn: valid either way
    start = len(wire) - 2
    while wire[start - 1]["role"] == "assistant":
        start -= 1
    fixed = [*wire[:start], assistant(THINKING, *wire[start]["content"]), *wire[start + 1 :]]
    assert check("anthropic", fixed, thinking=True) == []


def test_every_rule_in_the_module_has_an_adversarial_case() -> None:
    source = Path(validity.__file__).read_text()
    emitted = set(re.findall(r'\((?:i|-1), "([a-z_]+)"', source))
    tested = {p.values[1] for p in BAD} | {rule for _, rule, *_ in ANTHROPIC_THINKING_BAD}
    assert emitted == tested
    for provider in PROVIDERS:  # and each provider's detectors are exercised for that provider
        assert any(p.values[0] == provider for p in BAD)


def test_check_returns_all_violations_not_the_first() -> None:
    wire = [
        ASK,
        assistant(text("  "), use("toolu_1")),  # a whitespace-only block before the call
        user(result("toolu_1"), result("toolu_9")),  # and an answer to a call never made
        assistant("Paris is 18°C."),
    ]
    assert [(v.index, v.rule) for v in check("anthropic", wire)] == [
        (1, "whitespace_text_block"),
        (2, "unexpected_tool_result"),
    ]
    chat = [Q, calls(call("call_1")), msg("user", "Stop."), tool("call_1"), msg("assistant", "")]
    assert [(v.index, v.rule) for v in check("openai", chat)] == [
        (1, "tool_call_without_result"),
        (3, "tool_without_call"),
        (4, "assistant_without_content"),
    ]


def test_a_whole_list_violation_has_index_minus_one() -> None:
    assert check("gemini", []) == [
        Violation("gemini", -1, "empty_list", "* GenerateContentRequest.contents: contents is not specified")
    ]


def test_messages_are_the_providers_own_texts() -> None:
    [v] = check("anthropic", [ASK, assistant(use("toolu_1"), use("toolu_2"))])
    assert v.message == (
        "`tool_use` ids were found without `tool_result` blocks immediately after: toolu_1, toolu_2. "
        "Each `tool_use` block must have a corresponding `tool_result` block in the next message."
    )
    [v] = check("openai", [tool("call_1")])
    assert v.message == (
        "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."
    )


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    "wire",
    [
        [{}],
        [{"role": "user", "content": None, "parts": None}],
        [{"role": "assistant", "content": [1, "x", None], "tool_calls": "x", "parts": "x"}],
        [{"role": "user", "content": {"a": 1}, "parts": [{"text": None}, 3]}],
        [{"type": "function_call"}, {"type": "reasoning"}, {"type": "function_call_output", "call_id": None}],
        ["not a message", None, 7],
    ],
)
def test_check_is_total_on_malformed_lists(provider: Provider, wire: Any) -> None:
    # shapes the SDK types refuse anyway: check must still answer, not raise
    assert all(isinstance(v, Violation) for v in check(provider, wire))


def test_unknown_provider_is_refused() -> None:
    with pytest.raises(ProjectionError, match="unknown provider 'mistral'") as caught:
        check("mistral", [])  # type: ignore[arg-type]
    assert str(caught.value) == "unknown provider 'mistral'; expected one of anthropic, openai, openai-responses, gemini"


def test_violation_is_frozen() -> None:
    v = Violation("openai", 0, "empty_content", "x")
    with pytest.raises(AttributeError):
        v.rule = "other"  # type: ignore[misc]


# ---- the strict SDK helper itself -------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "wire", "stray"),
    [
        ("anthropic", [{"role": "user", "content": "Hi", "name": "bob"}], "name"),
        ("anthropic", [user({"type": "image", "source": {"type": "url", "url": "https://x/a.png", "alt": "a"}})], "alt"),
        ("openai", [{"role": "user", "content": [{"type": "text", "text": "Hi", "cache_control": {}}]}], "cache_control"),
        ("openai-responses", [{"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "x", "ts": 1}]}], "ts"),
        ("gemini", [{"role": "user", "parts": [{"text": "Hi", "cacheControl": {}}]}], "cacheControl"),
    ],
)
def test_sdk_helper_reports_a_stray_key_at_any_depth(provider: str, wire: Wire, stray: str) -> None:
    errors = sdk_errors(provider, wire)
    assert any(e.split(":")[0].endswith(stray) and "[extra_forbidden]" in e for e in errors), errors


def test_plain_sdk_validation_would_miss_what_the_helper_catches() -> None:
    from anthropic.types import MessageParam

    stray = [user({"type": "image", "source": {"type": "url", "url": "https://x/a.png", "alt": "a"}})]
    lazy = [user(result("toolu_1", [{"type": "text", "text": 42}]))]  # bad block, two iterables deep
    plain = TypeAdapter(list[MessageParam])
    plain.validate_python(stray)  # nested TypedDicts drop the unknown key silently
    validated = plain.validate_python(lazy)  # `content` is a ValidatorIterator: nothing checked yet
    assert type(validated[0]["content"]).__name__ == "ValidatorIterator"
    assert any("[extra_forbidden]" in e for e in sdk_errors("anthropic", stray))
    assert any("content.0.TextBlockParam.text" in e and "[string_type]" in e for e in sdk_errors("anthropic", lazy))


@pytest.mark.parametrize(
    ("provider", "wire", "where"),
    [  # an invalid element inside an `Iterable[...]` field is caught, not deferred
        ("openai", [{"role": "user", "content": [{"type": "text", "text": None}]}], "content.0"),
        ("openai", [calls({"id": "c", "type": "function", "function": {"name": "f"}})], "tool_calls.0"),
        ("openai-responses", [{"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text"}]}], "summary.0"),
    ],
)
def test_sdk_helper_consumes_lazy_iterables(provider: str, wire: Wire, where: str) -> None:
    errors = sdk_errors(provider, wire)
    assert any(where in e for e in errors), errors


# ---- found by mutation testing ----------------------------------------------------------

# every refusal in full: index and the provider's own words (found by mutation testing: the
# needles above left most of each text unread)
EXACT: dict[str, list[tuple[int, str]]] = {
    'anthropic-system_role_not_portable': [(1, "role: Input should be 'user' or 'assistant'")],
    'anthropic-tool_role_from_openai': [(1, "role: Input should be 'user' or 'assistant'")],
    'anthropic-assistant_first': [(0, 'messages: first message must use the "user" role')],
    'anthropic-empty_string_content': [(0, 'all messages must have non-empty content except for the optional final assistant message')],
    'anthropic-empty_list_content_not_final': [(1, 'all messages must have non-empty content except for the optional final assistant message')],
    'anthropic-empty_text_block': [(0, 'messages: text content blocks must be non-empty')],
    'anthropic-empty_text_in_tool_result': [(2, 'messages: text content blocks must be non-empty')],
    'anthropic-whitespace_text_block': [(0, 'messages: text content blocks must contain non-whitespace text')],
    'anthropic-whitespace_string_content': [(0, 'messages: text content blocks must contain non-whitespace text')],
    'anthropic-final_prefill_trailing_space': [(1, 'messages: final assistant content cannot end with trailing whitespace')],
    'anthropic-thinking_signature_missing': [(1, 'thinking.signature: Field required')],
    'anthropic-thinking_signature_empty': [(1, 'Invalid `signature` in `thinking` block')],
    'anthropic-redacted_thinking_data_missing': [(1, 'redacted_thinking.data: Field required')],
    'anthropic-tool_use_id_reused': [(3, '`tool_use` ids must be unique')],
    'anthropic-interrupted_call_at_end': [(1, '`tool_use` ids were found without `tool_result` blocks immediately after: toolu_1. Each `tool_use` block must have a corresponding `tool_result` block in the next message.')],
    'anthropic-parallel_call_half_answered': [(1, '`tool_use` ids were found without `tool_result` blocks immediately after: toolu_2. Each `tool_use` block must have a corresponding `tool_result` block in the next message.')],
    'anthropic-results_split_over_two_user_messages': [(1, '`tool_use` ids were found without `tool_result` blocks immediately after: toolu_2. Each `tool_use` block must have a corresponding `tool_result` block in the next message.')],
    'anthropic-user_interrupted_the_call': [(1, '`tool_use` ids were found without `tool_result` blocks immediately after: toolu_1. Each `tool_use` block must have a corresponding `tool_result` block in the next message.')],
    'anthropic-window_cut_inside_exchange': [(0, 'unexpected `tool_use_id` found in `tool_result` blocks: toolu_1. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.')],
    'anthropic-result_for_an_older_call': [(4, 'unexpected `tool_use_id` found in `tool_result` blocks: toolu_1. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.')],
    'anthropic-text_before_tool_result': [(2, 'Did not find 1 `tool_result` block(s) at the beginning of this message. Messages following `tool_use` blocks must begin with a matching number of `tool_result` blocks.')],
    'anthropic-empty_history': [(-1, 'messages: at least one message is required')],
    'anthropic-thinking_after_text': [(1, 'Expected `thinking` or `redacted_thinking`, but found `text`. When `thinking` is enabled, a final `assistant` message must start with a thinking block')],
    'anthropic-coalesced_turns_put_thinking_second': [(2, 'Expected `thinking` or `redacted_thinking`, but found `text`. When `thinking` is enabled, a final `assistant` message must start with a thinking block')],
    'openai-gemini_role': [(1, "Invalid value: 'model'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.")],
    'openai-empty_user_string': [(0, "Invalid 'messages[0].content': string too short. Expected a string with minimum length 1, but got an empty string instead.")],
    'openai-empty_system_parts': [(0, "Invalid 'messages[0].content': empty array. Expected an array with minimum length 1, but got an empty array instead.")],
    'openai-assistant_null_without_calls': [(1, "Invalid value for 'content': expected a string, got null.")],
    'openai-arguments_as_object': [(1, "Invalid type for 'messages[1].tool_calls[0].function.arguments': expected a string, but got an object instead.")],
    'openai-interrupted_call_at_end': [(1, "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: call_1")],
    'openai-parallel_call_half_answered': [(1, "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: call_2")],
    'openai-window_cut_inside_exchange': [(0, "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.")],
    'openai-tool_after_plain_assistant': [(2, "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.")],
    'openai-tool_without_id': [(3, "Missing parameter 'tool_call_id': messages with role 'tool' must have a 'tool_call_id'.")],
    'openai-answer_to_another_call': [(3, "Invalid parameter: 'tool_call_id' of 'call_9' not found in 'tool_calls' of previous message.")],
    'openai-tool_content_null': [(2, "Invalid value for 'content': expected a string, got null.")],
    'openai-tool_content_image': [(2, 'messages[2].content: a tool message takes a string or text parts only')],
    'openai-empty_history': [(-1, "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.")],
    'openai-responses-window_cut_inside_exchange': [(0, 'No tool call found for function call output with call_id call_1.')],
    'openai-responses-interrupted_call_at_end': [(2, 'No tool output found for function call call_1.')],
    'openai-responses-parallel_call_half_answered': [(3, 'No tool output found for function call call_2.')],
    'openai-responses-reasoning_before_user': [(1, "Item 'rs_1' of type 'reasoning' was provided without its required following item.")],
    'openai-responses-reasoning_at_end': [(1, "Item 'rs_1' of type 'reasoning' was provided without its required following item.")],
    'openai-responses-two_reasoning_items': [(1, "Item 'rs_1' of type 'reasoning' was provided without its required following item.")],
    'openai-responses-empty_user_string': [(0, "Invalid 'input[0].content': string too short. Expected a string with minimum length 1, but got an empty string instead.")],
    'openai-responses-empty_parts': [(1, "Invalid 'input[1].content': empty array. Expected an array with minimum length 1, but got an empty array instead.")],
    'openai-responses-empty_input': [(-1, "Invalid 'input': empty array. Expected an array with minimum length 1, but got an empty array instead.")],
    'gemini-assistant_role': [(1, 'Please use a valid role: user, model.')],
    'gemini-empty_parts': [(1, '* GenerateContentRequest.contents[1].parts: contents.parts must not be empty.')],
    'gemini-part_without_data': [(0, "required oneof field 'data' must have one initialized field")],
    'gemini-empty_text': [(0, 'Unable to submit request because it has an empty text parameter. Add a value to the parameter and try again.')],
    'gemini-window_cut_before_call': [(0, 'Please ensure that function call turn comes immediately after a user turn or after a function response turn.')],
    'gemini-two_model_turns_in_a_row': [(2, 'Please ensure that multiturn requests alternate between user and model.')],
    'gemini-parallel_call_half_answered': [(1, 'Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.')],
    'gemini-interrupted_call_at_end': [(1, 'Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.')],
    'gemini-window_cut_inside_exchange': [(0, 'Please ensure that function response turn comes immediately after a function call turn.')],
    'gemini-response_name_answers_nothing': [(2, "function_response name 'get_time' answers no function_call of the previous turn")],
    'gemini-response_id_answers_nothing': [(2, "function_response id 'z' answers no function_call of the previous turn")],
    'gemini-empty_history': [(-1, '* GenerateContentRequest.contents: contents is not specified')],
    'anthropic-thinking-tool_cycle_lost_its_thinking': [(1, 'Expected `thinking` or `redacted_thinking`, but found `tool_use`. When `thinking` is enabled, a final `assistant` message must start with a thinking block')],
    'anthropic-thinking-tool_cycle_opened_by_coalesced_text': [(1, 'Expected `thinking` or `redacted_thinking`, but found `text`. When `thinking` is enabled, a final `assistant` message must start with a thinking block')],
}


@pytest.mark.parametrize(("provider", "rule", "wire", "sdk_ok", "needle"), BAD)
def test_each_refusal_is_in_the_providers_words_in_full(provider: Provider, rule: str, wire: Wire, sdk_ok: bool, needle: str, request: pytest.FixtureRequest) -> None:
    key = request.node.callspec.id
    assert [(v.index, v.message) for v in check(provider, wire)] == EXACT[key]


@pytest.mark.parametrize(("name", "rule", "wire", "sdk_ok", "needle"), ANTHROPIC_THINKING_BAD)
def test_each_thinking_refusal_is_in_the_providers_words_in_full(name: str, rule: str, wire: Wire, sdk_ok: bool, needle: str) -> None:
    assert [(v.index, v.message) for v in check("anthropic", wire, thinking=True)] == EXACT["anthropic-thinking-" + name]


def test_a_tool_message_looks_for_its_call_only_before_it() -> None:
    # the search back from the first message must not wrap round to the last one
    wire = [tool("call_1"), msg("user", "x"), calls(call("call_1"))]
    assert [(v.index, v.rule) for v in check("openai", wire)] == [(0, "tool_without_call"), (2, "tool_call_without_result")]


@pytest.mark.parametrize(("args", "kind"), [(True, "a boolean"), (0, "a number"), (1.5, "a number"), (["x"], "an array"),
                                            (None, "null"), ({"city": "Paris"}, "an object")])
def test_arguments_not_a_string_says_what_json_they_are(args: Any, kind: str) -> None:
    where = "messages[1].tool_calls[0].function.arguments"
    assert check("openai", [Q, calls(call("call_1", args=args)), tool("call_1")]) == [
        Violation("openai", 1, "arguments_not_string", f"Invalid type for '{where}': expected a string, but got {kind} instead.")
    ]


def test_only_an_assistant_message_can_own_a_tool_message() -> None:
    wire = [{"role": "user", "content": "x", "tool_calls": [call("call_1")]}, tool("call_1")]
    assert [(v.index, v.rule) for v in check("openai", wire)] == [(1, "tool_without_call")]


def test_a_tool_message_with_empty_parts_says_where() -> None:
    assert check("openai", [Q, calls(call("call_1")), tool("call_1", [])]) == [Violation(
        "openai", 2, "tool_content_missing",
        "Invalid 'messages[2].content': empty array. Expected an array with minimum length 1, but got an empty array instead.",
    )]


@pytest.mark.parametrize("key", ["code_execution_result", "codeExecutionResult", "executableCode", "inlineData", "fileData"])
def test_a_part_of_any_data_field_in_either_case_is_not_empty(key: str) -> None:
    assert check("gemini", [turn("user", {key: {"x": 1}}), turn("model", {"text": "ok"})]) == []
    assert [v.rule for v in check("gemini", [turn("user", {key[:-1]: {"x": 1}})])] == ["empty_part"]


def test_no_check_looks_before_the_first_message_by_wrapping_round() -> None:
    # wire[i - 1] of the first message would be the last one: here the one that makes the call
    wire = [user(result("toolu_1")), assistant("x"), user("y"), assistant(use("toolu_1"))]
    assert [(v.index, v.rule) for v in check("anthropic", wire)] == [
        (0, "unexpected_tool_result"), (3, "tool_use_without_result")]
    g = [turn("user", gresp()), turn("model", {"text": "x"}), turn("user", {"text": "y"}), turn("model", gcall())]
    assert [(v.index, v.rule) for v in check("gemini", g)] == [(0, "response_without_call"), (3, "response_count_mismatch")]


# each an edge of one rule, with everything `check` says about it (found by mutation testing)
EDGES: list[tuple[str, Provider, Wire, bool, list[tuple[int, str]]]] = [
    ("developer_message_empty", "openai", [msg("developer", ""), Q], False, [(0, "empty_content")]),
    ("assistant_refusal_needs_no_content", "openai", [Q, {"role": "assistant", "content": None, "refusal": "I cannot."}], False, []),
    ("assistant_audio_needs_no_content", "openai", [Q, {"role": "assistant", "content": None, "audio": {"id": "audio_1"}}], False, []),
    ("tool_content_a_number", "openai", [Q, calls(call("call_1")), tool("call_1", 5)], False, [(2, "tool_content_missing")]),
    ("calls_on_a_user_message_ask_for_no_answer", "openai", [{"role": "user", "content": "x", "tool_calls": [call("call_1")]}], False, []),
    ("item_with_no_type_or_role_is_no_message", "openai-responses", [RQ, {"content": ""}], False, []),
    ("output_right_after_its_call", "openai-responses", [RQ, fc("c1"), fco("c1"), said("x")], False, []),
    ("output_before_its_call", "openai-responses", [RQ, fco("c1"), fc("c1")], False, [(1, "output_without_call"), (2, "call_without_output")]),
    ("user_model_user", "gemini", [turn("user", {"text": "a"}), turn("model", {"text": "b"}), turn("user", {"text": "c"})], False, []),
    ("responses_in_a_model_turn", "gemini", [GQ, turn("model", gcall()), turn("model", gresp())], False,
     [(1, "response_count_mismatch"), (2, "roles_not_alternating")]),
    ("calls_in_a_user_turn", "gemini", [turn("user", gcall()), turn("user", gresp())], False,
     [(0, "call_turn_misplaced"), (1, "roles_not_alternating"), (1, "response_without_call")]),
    ("id_on_the_response_only_matches_by_name", "gemini",
     [GQ, turn("model", gcall()), turn("user", gresp(call_id="a")), turn("model", {"text": "ok"})], False, []),
    ("id_on_the_call_only_matches_by_name", "gemini",
     [GQ, turn("model", gcall(call_id="a")), turn("user", gresp()), turn("model", {"text": "ok"})], False, []),
    ("id_on_one_call_of_two_matches_by_name", "gemini",
     [GQ, turn("model", gcall(call_id="a"), gcall("get_time")), turn("user", gresp(call_id="a"), gresp("get_time", call_id="b")),
      turn("model", {"text": "ok"})], False, []),
    ("answered_in_the_last_turn", "gemini", [GQ, turn("model", gcall()), turn("user", gresp())], False, []),
    ("call_and_response_not_maps", "gemini", [GQ, turn("model", {"functionCall": "x"}), turn("user", {"functionResponse": "y"})], False, []),
    ("final_assistant_only_whitespace", "anthropic", [user("Hi"), assistant("   ")], False, [(1, "whitespace_text_block")]),
    ("non_final_assistant_may_end_in_whitespace", "anthropic", [user("Hi"), assistant("Hi "), user("x")], False, []),
    ("thinking_signature_not_a_string", "anthropic", [user("Hi"), assistant({**THINKING, "signature": 5}, text("x"))], False,
     [(1, "thinking_without_signature")]),
    ("redacted_data_not_a_string", "anthropic", [user("Hi"), assistant({**REDACTED, "data": 5}, text("x"))], False,
     [(1, "redacted_thinking_without_data")]),
    ("redacted_data_empty", "anthropic", [user("Hi"), assistant({**REDACTED, "data": ""}, text("x"))], False,
     [(1, "redacted_thinking_without_data")]),
    ("a_call_in_a_user_message_is_answered_by_nothing", "anthropic", [user(use("toolu_1")), user(result("toolu_1"))], False,
     [(1, "unexpected_tool_result")]),
    ("empty_text_beside_a_tool_result", "anthropic", [ASK, assistant(use("toolu_1")), user(result("toolu_1"), text(""))], False,
     [(2, "empty_text_block")]),
    ("only_a_text_block_ends_the_prefill", "anthropic", [user("Hi"), assistant(text("a"), {**use("toolu_1"), "text": "x "})], False,
     [(1, "tool_use_without_result")]),
    ("thinking_alone", "anthropic", [user("Hi"), assistant(THINKING)], False, []),
    ("a_call_in_a_user_message_asks_no_answer", "anthropic", [user(use("toolu_1")), assistant("x")], False, []),
    ("results_in_an_assistant_message_answer_nothing", "anthropic", [ASK, assistant(use("toolu_1")), assistant(result("toolu_1"))], False,
     [(1, "tool_use_without_result")]),
    ("two_late_thinking_blocks_name_the_first", "anthropic",
     [user("Hi"), assistant(text("a"), THINKING), assistant(REDACTED, text("b"))], False, [(1, "thinking_not_first")]),
    ("a_user_who_also_speaks_ends_the_cycle", "anthropic",
     [ASK, assistant(use("toolu_1")), user(result("toolu_1"), text("thanks"))], True, []),
    ("results_answering_no_call_open_no_cycle", "anthropic", [ASK, assistant(text("x")), user(result("toolu_1"))], True,
     [(2, "unexpected_tool_result")]),
    ("two_calls_one_late_result", "anthropic", [ASK, assistant(use("toolu_1"), use("toolu_2")), user(text("x"), result("toolu_1"))],
     False, [(1, "tool_use_without_result"), (2, "tool_result_not_first")]),
    ("late_results_answering_no_call", "anthropic", [ASK, assistant(text("x")), user(text("y"), result("toolu_1"), result("toolu_2"))],
     False, [(2, "unexpected_tool_result"), (2, "tool_result_not_first")]),
    # found by the complete run of Dec 7, 19:15 UTC
    ("thinking_blocks_in_a_row_lead_together", "anthropic", [user("Hi"), assistant(THINKING, REDACTED, text("x"))], False, []),
    ("a_last_message_of_another_role_answers_no_call", "anthropic",
     [ASK, assistant(use("toolu_1")), {"role": "tool", "content": [result("toolu_1")]}], True,
     [(1, "tool_use_without_result"), (2, "invalid_role")]),
    ("a_cycle_opened_by_the_first_message", "anthropic", [assistant(use("toolu_1")), user(result("toolu_1"))], True,
     [(0, "first_not_user"), (0, "cycle_without_thinking")]),
]


@pytest.mark.parametrize(("name", "provider", "wire", "thinking", "found"), EDGES, ids=[e[0] for e in EDGES])
def test_the_edges_of_each_rule(name: str, provider: Provider, wire: Wire, thinking: bool, found: list[tuple[int, str]]) -> None:
    assert [(v.index, v.rule) for v in check(provider, wire, thinking=thinking)] == found


def test_the_counts_and_values_a_refusal_names() -> None:
    tool_5 = check("openai", [Q, calls(call("call_1")), tool("call_1", 5)])
    assert [v.message for v in tool_5] == ["messages[2].content: a tool message takes a string or text parts only"]
    signature_5 = check("anthropic", [user("Hi"), assistant({**THINKING, "signature": 5}, text("x"))])
    assert [v.message for v in signature_5] == ["thinking.signature: Field required"]
    late = check("anthropic", [ASK, assistant(use("toolu_1"), use("toolu_2")), user(text("x"), result("toolu_1"))])
    assert late[1].message.startswith("Did not find 2 `tool_result` block(s)")  # the calls, not the results
    [late_thinking] = check("anthropic", [user("Hi"), assistant(THINKING, text("a"), REDACTED)])
    assert "but found `text`" in late_thinking.message  # the first block that is not thinking
    orphans = check("anthropic", [ASK, assistant(text("x")), user(text("y"), result("toolu_1"), result("toolu_2"))])
    assert orphans[1].message.startswith("Did not find 2 `tool_result` block(s)")  # no call: the results


@pytest.mark.parametrize(("content", "short"), [
    ("", "string too short. Expected a string with minimum length 1, but got an empty string instead."),
    ([], "empty array. Expected an array with minimum length 1, but got an empty array instead."),
])
def test_an_empty_assistant_message_says_where_and_what_it_holds(content: Any, short: str) -> None:
    assert check("openai", [Q, msg("assistant", content)]) == [
        Violation("openai", 1, "assistant_without_content", f"Invalid 'messages[1].content': {short}")]
