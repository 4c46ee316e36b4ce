"""How LangGraph's values map onto convgraph's, for `ConvgraphSaver`: a thread's genesis
nonce, a LangChain message's turn record (and back), a config's thread, namespace and
checkpoint. Pure but for `dump`. Invariant: a message becomes a turn only when the turn holds
it whole: in its fields, or (too large for a record) in its meta as an artifact's tag.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig

from convgraph.core import codec
from convgraph.core.cid import CID
from convgraph.core.hlc import ZERO, Hlc
from convgraph.core.kinds import check_payload
from convgraph.core.tagged import pack
from convgraph.errors import AdapterError, ConvgraphError
from convgraph.integrations._langgraph_thread import MESSAGE_ID
from convgraph.integrations._large import note, refs_of, slim, too_large
from convgraph.projections.turn import Turn, turn_from
from convgraph.replica.drafts import Draft

_NONCE_DOMAIN: Final = b"convgraph/langgraph-thread\x00"
_GENERATION_DOMAIN: Final = b"convgraph/langgraph-thread/generation\x00"  # then the number, NUL, the id
WHOLE: Final = "langchain_whole"  # payload meta: the `langchain` shell is the whole message, content too


def thread_nonce(thread_id: str, generation: int = 0) -> bytes:
    """The genesis nonce of a thread's conversation: the same on every replica. Generation 0 is
    the thread's first conversation; `delete_thread` forgets one, and the thread id used again
    roots the next generation (a forgotten conversation id is never rooted again)."""
    head = _NONCE_DOMAIN if generation == 0 else _GENERATION_DOMAIN + b"%d\x00" % generation
    return hashlib.sha256(head + thread_id.encode("utf-8")).digest()[:16]


def turn_draft(
    conv: str, message: BaseMessage, branch: str | None, dump: Callable[[Any], Any], *, whole: bool = False
) -> Draft | None:
    """The turn record a message becomes, or None when no turn kind can hold it whole. Content
    and call inputs are tagged (`core.tagged`); a payload over `THRESHOLD` becomes a short turn
    holding the whole message in its meta (`dump` stores it as an artifact), unless `whole`."""
    payload: dict[str, Any] = {"conversation_id": conv, "content": pack(message.content)}
    if isinstance(message, HumanMessage):
        kind, payload["role"] = "user_message", "user"
    elif isinstance(message, AIMessage):
        kind, payload["role"] = "agent_message", "assistant"
        if message.tool_calls:
            payload["tool_calls"] = [{"id": c["id"], "name": c["name"], "input": pack(c["args"])}
                                     for c in message.tool_calls]
    elif isinstance(message, ToolMessage):
        kind, payload["role"] = "tool_result", "tool"
        payload["tool_use_id"] = message.tool_call_id
        if message.status == "error":
            payload["is_error"] = True
    else:
        return None  # system and custom-role messages: no turn kind says what they are
    payload["meta"] = {"langchain": dump(message.model_copy(update={"content": ""}))}
    if isinstance(message.id, str):
        payload["meta"][MESSAGE_ID] = message.id  # what an edit or removal names
    try:
        check_payload(kind, payload, rooted=True)
        large = not whole and too_large(payload)
    except (ConvgraphError, TypeError, ValueError, OverflowError):
        return None  # content DAG-CBOR or the turn schema cannot hold: kept inline instead
    if large:
        meta = {**payload["meta"], "langchain": dump(message), WHOLE: True}
        payload = slim(payload, note(meta["langchain"].get("b")), meta)
    return Draft(kind, payload, refs_of(payload), branch=branch)


@dataclass(frozen=True)
class _Drafted:
    """A turn draft standing in for its record, for `turn_from`."""

    cid: CID
    kind: str
    payload: dict[str, Any]
    actor: bytes = b""
    hlc: Hlc = ZERO
    branch: str | None = None


def state_turns(conv: str, entries: list[Any], messages: list[Any]) -> list[Turn]:
    """The turns a checkpoint's messages make, in the state's order: each as its turn record
    would hold it now, content whole (a message no turn kind holds, such as a system message,
    is left out)."""
    turns = []
    for i, (entry, message) in enumerate(zip(entries, messages, strict=True)):
        draft = turn_draft(conv, message, None, lambda _: {}, whole=True)
        if draft is not None:
            op = entry if type(entry) is CID else CID.of_raw(codec.encode([conv, i, draft.payload]))
            turns.append(turn_from(_Drafted(op, draft.kind, draft.payload)))
    return turns


def bare_message(payload: dict[str, Any]) -> BaseMessage:
    content = payload.get("content", payload.get("text", ""))
    role = payload.get("role")
    if role == "tool" or "tool_use_id" in payload:
        return ToolMessage(content=content, tool_call_id=payload["tool_use_id"])
    if role == "assistant":
        calls = [{"id": c["id"], "name": c["name"], "args": c["input"]}
                 for c in payload.get("tool_calls", ())]
        return AIMessage(content=content, tool_calls=calls)
    return HumanMessage(content=content)


def text(value: object, what: str) -> str:
    if type(value) is not str:
        raise AdapterError(f"{what} must be text, not {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise AdapterError(f"{what} {value[:64]!r} is not valid UTF-8 text") from None
    return value


def target(config: RunnableConfig) -> tuple[str, str, str | None]:
    """(thread id, namespace, checkpoint id or None) of a config; `AdapterError` without a thread."""
    conf = config.get("configurable") if isinstance(config, dict) else None
    if not isinstance(conf, dict) or conf.get("thread_id") is None:
        raise AdapterError("a LangGraph config needs config['configurable']['thread_id']")
    thread_id = conf["thread_id"]
    thread_id = str(thread_id) if type(thread_id) is int else thread_id
    checkpoint_id = conf.get("checkpoint_id")
    return (text(thread_id, "thread_id"), text(conf.get("checkpoint_ns", ""), "checkpoint_ns"),
            None if checkpoint_id is None else text(checkpoint_id, "checkpoint_id"))


def config_of(thread_id: str, ns: str, checkpoint_id: str | None) -> RunnableConfig:
    conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}
