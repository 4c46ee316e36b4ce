"""ConvgraphSaver keeps what SqliteSaver keeps: a value of megabytes (a message or another
channel's value, stored as an artifact its record names), message metadata DAG-CBOR cannot
hold, and, under an `EncryptedSerializer`, nothing of the messages in plain text on disk."""

from __future__ import annotations

import hashlib
import itertools
import math
import os
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph

from convgraph import Replica
from convgraph.integrations._large import THRESHOLD
from convgraph.integrations.langgraph import ConvgraphSaver
from convgraph.sync.local import sync_replicas

pytestmark = pytest.mark.usefixtures("product_defaults")
_salt = itertools.count()


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    page: str


def _graph(saver: ConvgraphSaver, page: str | None = None) -> CompiledStateGraph[Any, Any, Any, Any]:
    """A node that answers, echoing what it was told, and puts `page` in its own channel."""
    def reply(state: State) -> dict[str, Any]:
        out: dict[str, Any] = {"messages": [AIMessage(f"re: {str(state['messages'][-1].content)[:20]}")]}
        return out if page is None else {**out, "page": page}
    builder = StateGraph(State)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    return builder.compile(checkpointer=saver)


def _config(thread: str = "t1") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def _salts() -> bytes:
    return next(_salt).to_bytes(8, "big")


@pytest.mark.parametrize("size", [5_000_000, 50_000_000])
def test_a_value_of_megabytes_is_an_artifact_and_the_thread_goes_on(tmp_path: Path, size: int) -> None:
    a = Replica.open(tmp_path / "a")
    saver = ConvgraphSaver(a)
    page = os.urandom(size // 4).hex()  # a message and a channel value: size in all
    graph = _graph(saver, page)
    sent = ToolMessage(page, tool_call_id="c1", id="big")
    call = AIMessage("", tool_calls=[{"name": "scrape", "args": {}, "id": "c1"}])
    graph.invoke({"messages": [HumanMessage("scrape it"), call, sent]}, _config())
    graph.invoke({"messages": [HumanMessage("and then?")]}, _config())  # the thread goes on
    values = graph.get_state(_config()).values
    assert values["messages"][2] == sent and values["page"] == page
    assert [m.content for m in values["messages"]][3:] == ["re: " + page[:20], "and then?", "re: and then?"]
    conv = saver.conversation("t1")
    assert conv is not None
    held = [len(a.store.get(r.cid) or b"") for r in a.iter_records(conv)]
    assert max(held) < THRESHOLD  # every record small: the values are artifacts they name
    assert sum(len(r.refs) for r in a.iter_records(conv)) >= 2
    assert a.verify().ok
    result = saver.resume("t1", "anthropic")[2]["content"][0]
    assert result["content"] == [{"type": "text", "text": page}]  # resume sends it whole
    b = Replica.open(tmp_path / "b")
    a.write(conv, "grant", {"grantee": b.actor, "rights": ["write"]})
    assert sync_replicas(a, b, salts=_salts).converged
    assert b.missing_artifacts(conv) == []
    other = _graph(ConvgraphSaver(b, owners=[a.actor]))
    assert other.get_state(_config()).values == values
    assert b.verify().ok
    a.close()
    b.close()


ODD: dict[str, Any] = {"low": -math.inf, "high": math.inf, "$cg": "float",
                       "nested": [{"$cg": "int", "v": "1"}, {"$$cg": 2}]}


def test_metadata_dag_cbor_cannot_hold_round_trips_and_stays_a_turn() -> None:
    replica = Replica.in_memory()
    saver = ConvgraphSaver(replica)
    graph = _graph(saver)
    sent = HumanMessage([{"type": "text", "text": "hi"}, {"type": "data", "score": -math.inf, "$cg": 1}],
                        additional_kwargs={"odd": ODD}, response_metadata={"n": math.nan}, id="h1")
    graph.invoke({"messages": [sent]}, _config())
    got = graph.get_state(_config()).values["messages"][0]
    assert math.isnan(got.response_metadata.pop("n"))
    assert got.model_copy(update={"response_metadata": {"n": 0}}) == sent.model_copy(
        update={"response_metadata": {"n": 0}})
    conv = saver.conversation("t1")
    assert conv is not None
    assert [t.text for t in replica.transcript(conv)] == ["hi", "re: [{'type': 'text', 't"]  # a turn, not inline
    assert replica.verify().ok


class _Xor:
    """A test cipher (SHA-256 counter keystream): not for real use, enough to hide the text."""

    def __init__(self, key: bytes) -> None:
        self.key = key

    def _stream(self, n: int) -> bytes:
        blocks = (hashlib.sha256(self.key + i.to_bytes(8, "big")).digest() for i in range(n // 32 + 1))
        return b"".join(blocks)[:n]

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        return "xor", bytes(a ^ b for a, b in zip(plaintext, self._stream(len(plaintext)), strict=True))

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        assert ciphername == "xor"
        return self.encrypt(ciphertext)[1]


SECRETS = (b"hunter2-alpha-secret", b"zebra-launch-code-42")


def _hits(home: Path) -> int:
    return sum(f.read_bytes().count(s) for f in home.rglob("*") if f.is_file() for s in SECRETS)


@pytest.mark.parametrize("sealed", [True, False])
def test_an_encrypted_serde_leaves_no_message_text_on_disk(tmp_path: Path, sealed: bool) -> None:
    replica = Replica.open(tmp_path / "home")
    serde = EncryptedSerializer(_Xor(b"k" * 16)) if sealed else None
    saver = ConvgraphSaver(replica, serde=serde)
    graph = _graph(saver, page="zebra-launch-code-42 in a channel")
    graph.invoke({"messages": [HumanMessage("my password is hunter2-alpha-secret")]}, _config())
    graph.invoke({"messages": [HumanMessage("remember zebra-launch-code-42")]}, _config())
    texts = [m.content for m in graph.get_state(_config()).values["messages"]]
    assert texts == ["my password is hunter2-alpha-secret", "re: my password is hunte",
                     "remember zebra-launch-code-42", "re: remember zebra-launc"]
    wire = saver.resume("t1", "openai")
    assert wire[0]["content"] == "my password is hunter2-alpha-secret"  # resume decrypts
    assert replica.verify().ok
    replica.close()
    if sealed:
        assert _hits(tmp_path / "home") == 0
    else:  # the control: without the serde the text is there to find
        assert _hits(tmp_path / "home") > 0
    again = Replica.open(tmp_path / "home")
    assert [m.content for m in _graph(ConvgraphSaver(again, serde=serde)).get_state(
        _config()).values["messages"]] == texts
    again.close()
