"""Blocks one format has and another cannot carry: repair drops them per target, so what is
rendered stays valid. Pinned: the two rendering faults an adapter attempt found, a blank or
trailing-whitespace OpenAI Responses refusal and an image-only OpenAI user message, both of
which Anthropic refused (empty / trailing-whitespace final text)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sdk import sdk_errors

from conftest import IN_CI
from convgraph import Replica
from convgraph.core.cid import CID
from convgraph.projections import validity
from convgraph.projections.message import Message
from convgraph.projections.providers import anthropic, gemini, openai_chat, openai_responses
from convgraph.projections.resume import PROVIDERS, to_provider
from convgraph.projections.turn import Role, Turn

PNG = "iVBORw0KGgo="
IMAGES: dict[str, dict[str, Any]] = {
    "responses-data": {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}", "detail": "high"},
    "responses-url": {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "auto"},
    "responses-file": {"type": "input_image", "file_id": "file_1", "detail": "auto"},
    "chat-data": {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
    "anthropic": {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
}


def responses_output(*parts: dict[str, Any]) -> dict[str, Any]:
    item = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": list(parts)}
    return {"id": "resp_1", "model": "gpt-5", "status": "completed", "output": [item]}


def assert_valid_everywhere(replica: Replica, conv: str) -> dict[str, list[dict[str, Any]]]:
    wires = {p: replica.resume(conv, p) for p in PROVIDERS}
    for p, wire in wires.items():
        assert validity.check(p, wire) == [], (p, wire)
        assert sdk_errors(p, wire) == [], (p, wire)
    return wires


@pytest.mark.parametrize("refusal", ["", "   ", "\n", "I can't help with that.  \n"])
def test_a_blank_or_trailing_whitespace_refusal_resumes_validly(refusal: str) -> None:
    r = Replica.in_memory()
    conv = r.create()
    r.say(conv, "user", "do the thing")
    r.record_response(conv, responses_output({"type": "refusal", "refusal": refusal}), provider="openai-responses")
    wires = assert_valid_everywhere(r, conv)
    if refusal.strip():
        assert wires["anthropic"][-1]["content"] == [{"type": "text", "text": refusal.rstrip()}]
    else:
        assert len(wires["anthropic"]) == 1  # nothing was said: the empty answer is dropped


def test_a_blank_refusal_beside_text_leaves_the_text() -> None:
    r = Replica.in_memory()
    conv = r.create()
    r.say(conv, "user", "hi")
    text = {"type": "output_text", "text": "well", "annotations": []}
    r.record_response(conv, responses_output(text, {"type": "refusal", "refusal": "  "}), provider="openai-responses")
    wires = assert_valid_everywhere(r, conv)
    assert wires["anthropic"][-1]["content"] == [{"type": "text", "text": "well"}]


@pytest.mark.parametrize("shape", sorted(IMAGES))
def test_an_image_only_user_message_resumes_validly_and_keeps_its_image(shape: str) -> None:
    r = Replica.in_memory()
    conv = r.create()
    r.say(conv, "user", "look at this")
    r.say(conv, "assistant", "hello ")  # trailing whitespace: invalid if it became final
    r.say(conv, "user", [IMAGES[shape]])
    wires = assert_valid_everywhere(r, conv)
    carried = shape != "responses-file"  # a file id names no bytes another provider can fetch
    assert (wires["anthropic"][-1]["role"] == "user") is carried
    assert (wires["openai"][-1]["role"] == "user") is carried
    if carried:
        assert wires["anthropic"][-1]["content"][0]["type"] == "image"


def test_an_image_of_a_media_type_anthropic_does_not_take_is_dropped_for_it() -> None:
    tiff = {"type": "input_image", "image_url": f"data:image/tiff;base64,{PNG}", "detail": "auto"}
    r = Replica.in_memory()
    conv = r.create()
    r.say(conv, "user", "hi")
    r.say(conv, "assistant", "ok ")
    r.say(conv, "user", [tiff])
    wires = assert_valid_everywhere(r, conv)
    assert wires["anthropic"][-1] == {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}


BLOCKS: list[dict[str, Any]] = [
    *IMAGES.values(),
    {"type": "text", "text": "t"},
    {"type": "refusal", "refusal": "no"},
    {"type": "input_text", "text": "t"},
    {"type": "output_text", "text": "t", "annotations": []},
    {"type": "input_file", "file_id": "file_1"},
    {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
    {"type": "file", "file": {"file_id": "file_1"}},
    {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "q"}},
    {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "d"}},
    {"type": "inline_data", "inline_data": {"mime_type": "image/png", "data": b"\x89PNG"}},
    {"type": "part", "thought_signature": b"sig"},
    {"type": "executable_code", "executable_code": {"code": "1", "language": "PYTHON"}},
]
RENDERERS = [anthropic, openai_chat, openai_responses, gemini]


@pytest.mark.parametrize("fmt", RENDERERS, ids=[f.PROVIDER for f in RENDERERS])
@pytest.mark.parametrize("role", [Role.USER, Role.ASSISTANT])
@pytest.mark.parametrize("owner", [None, "anthropic", "openai", "openai-responses", "gemini"])
def test_renders_says_exactly_what_the_renderer_carries(fmt: Any, role: Role, owner: str | None) -> None:
    """Repair decides by `renders`; the renderer must agree, or emptied messages slip through."""
    for block in BLOCKS:
        wire = fmt.to_wire([Message(role, (block,), provider=owner, ops=(CID.of_record(b"x"),))])
        assert bool(wire) is fmt.renders(block, role, owner), (block, wire)


POOL: list[dict[str, Any]] = [
    *(b for b in BLOCKS if b["type"] != "part"),  # a Gemini part with no data field: see the report

    {"type": "text", "text": "  "}, {"type": "text", "text": "trailing  "}, {"type": "text", "text": ""},
    {"type": "refusal", "refusal": ""}, {"type": "refusal", "refusal": " \n"}, {"type": "refusal", "refusal": "no  "},
    {"type": "input_image", "image_url": f"data:image/tiff;base64,{PNG}", "detail": "auto"},
    {"type": "image_url", "image_url": {"url": "ftp://example.com/a.png"}},
]


@settings(max_examples=400 if IN_CI else 100)
@given(st.lists(st.tuples(st.sampled_from([Role.USER, Role.ASSISTANT]),
                          st.lists(st.sampled_from(POOL), max_size=3),
                          st.sampled_from([None, "anthropic", "openai", "openai-responses", "gemini"])),
                max_size=6))
def test_any_mix_of_foreign_blocks_resumes_validly(steps: list[tuple[Role, list[dict[str, Any]], str | None]]) -> None:
    """Text, refusals and images of every format, blank or padded, in any order: still valid."""
    turns = [Turn(CID.of_record(b"0"), Role.USER, ({"type": "text", "text": "go"},))]
    turns += [Turn(CID.of_record(b"%d" % (i + 1)), role, tuple(blocks), provider=owner)
              for i, (role, blocks, owner) in enumerate(steps)]
    for provider in PROVIDERS:
        wire = to_provider(turns, provider)
        assert wire, provider
        assert validity.check(provider, wire) == [], (provider, wire)
        assert sdk_errors(provider, wire) == [], (provider, wire)
