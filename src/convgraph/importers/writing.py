"""Writing one import into a conversation, once: the step every importer shares.

Each record an import writes carries, in its payload's `meta["imported"]`, the source it came
from, the origin in that source (thread, session, file name) and the source message's key.
Before writing, the conversation's records are read for those stamps and every draft whose
(source, origin, key) is held already is left out, so running an import again writes nothing
and an import of a grown history writes only what is new, after what is there. A record that
was retracted since still counts as imported: a deleted turn does not come back.
Invariant: the conversation (when new), the stamps read and the records written are one
transaction, so two imports racing cannot both write a message.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Final

from convgraph.core import codec
from convgraph.core.kinds import check_payload
from convgraph.errors import ConvgraphError, UnknownConversationError
from convgraph.importers.report import IMPORT_KEY, ImportReport, Unmapped
from convgraph.replica import Draft, Replica

_DIGEST_CHARS: Final = 16  # 64 bits of SHA-256: a collision needs the same place too
Mapped = tuple[str, Draft]
"""A source message's key and the draft of one record it becomes."""
Build = Callable[[str], tuple[list[Mapped], list[Unmapped]]]
"""Maps the source into drafts for the conversation it is given (the drafts name it)."""


def run(
    replica: Replica, build: Build, *, source: str, origin: str, into: str | None, title: str,
    fmt: str | None = None, shown: Callable[[str], str] = str,
) -> ImportReport:
    """Import what `build` maps into conversation `into` (None: a new one titled `title`);
    a draft the record schema refuses is reported under `shown(key)`."""
    with replica.transaction():
        if into is None:
            conv, created = replica.create(title), True
        else:
            conv, created = _existing(replica, into), False
        mapped, unmapped = build(conv)
        held = imported_keys(replica, conv, source, origin)
        fresh: dict[str, Draft] = {}
        already = 0
        for key, draft in mapped:
            if key in held:
                already += 1
                if held[key] not in (None, _digest(draft)):
                    unmapped.append(Unmapped(shown(key), "changed", "changed in the source since it was "
                                             "imported: the conversation keeps what was imported"))
            elif key not in fresh:  # a key twice in one source: the first is the message
                ready = stamped(draft, source, origin, key)
                refused = _refused(ready)
                if refused is None:
                    fresh[key] = ready
                else:
                    unmapped.append(Unmapped(shown(key), draft.kind, refused))
        records = replica.write_many(conv, fresh.values()) if fresh else []
    return ImportReport(source, origin, conv, created, len(records), already, tuple(unmapped), fmt,
                        tuple(str(r.cid) for r in records))


def imported_keys(replica: Replica, conv: str, source: str, origin: str) -> dict[str, str | None]:
    """The keys of the messages of (`source`, `origin`) that `conv` holds records of, each with
    the digest of what was imported (None: not said)."""
    found: dict[str, str | None] = {}
    for record in replica.iter_records(conv):
        stamp = _stamp(record.payload)
        if stamp is not None and stamp.get("from") == source and stamp.get("origin") == origin:
            key, digest = stamp.get("key"), stamp.get("digest")
            if type(key) is str:
                found[key] = digest if type(digest) is str else None
    return found


def stamped(draft: Draft, source: str, origin: str, key: str) -> Draft:
    """`draft` with its payload's `meta` naming where it was imported from."""
    meta = draft.payload.get("meta")
    meta = dict(meta) if type(meta) is dict else {}
    meta[IMPORT_KEY] = {"from": source, "origin": origin, "key": key, "digest": _digest(draft)}
    return Draft(draft.kind, {**draft.payload, "meta": meta}, draft.refs, draft.branch)


def _digest(draft: Draft) -> str | None:
    """A digest of what `draft` says (its kind and payload less `meta`), None when DAG-CBOR
    cannot hold it: an edit of the source message shows as another digest."""
    said = {"kind": draft.kind, **{k: v for k, v in draft.payload.items() if k != "meta"}}
    try:
        return hashlib.sha256(codec.encode(said)).hexdigest()[:_DIGEST_CHARS]
    except (ConvgraphError, TypeError, ValueError, OverflowError):
        return None


def _refused(draft: Draft) -> str | None:
    """Why the record schema or DAG-CBOR cannot hold `draft`'s payload, or None when they can."""
    try:
        check_payload(draft.kind, draft.payload, rooted=True)
        codec.encode(draft.payload)
    except ConvgraphError as exc:
        return f"the {draft.kind} schema refuses it: {exc}"
    except (TypeError, ValueError, OverflowError) as exc:
        return f"DAG-CBOR cannot hold it: {exc}"
    return None


def _stamp(payload: dict[str, Any]) -> dict[str, Any] | None:
    meta = payload.get("meta")
    stamp = meta.get(IMPORT_KEY) if type(meta) is dict else None  # anyone's record: check shapes
    return stamp if type(stamp) is dict else None


def _existing(replica: Replica, conv: str) -> str:
    if replica.heads(conv):
        return conv
    known: Sequence[str] = replica.conversations()
    raise UnknownConversationError(
        f"no conversation {conv[:64]!r} in this replica to import into; leave `into` out to start one",
        conv=conv, known=tuple(known))


def keyed(place: str, item: Any) -> str:
    """The key of the source message at `place` holding `item`: the place and a digest of the
    item's JSON, so two sources that share an origin (two `chat.jsonl`, one session id in two
    databases) never pass for each other, and a re-formatted file is still the same messages."""
    data = json.dumps(item, sort_keys=True, separators=(",", ":")).encode("ascii")
    return f"{place}:{hashlib.sha256(data).hexdigest()[:_DIGEST_CHARS]}"


def place(key: str) -> str:
    """The place part of a key `keyed` made (places hold no colon)."""
    return key.partition(":")[0]


def placed(unmapped: Sequence[Unmapped]) -> list[Unmapped]:
    """`unmapped` reported by place alone (keys less the digest `keyed` added)."""
    return [replace(u, key=place(u.key)) for u in unmapped]


def known(what: str, held: Sequence[str], shown: int = 20) -> str:
    """A clause naming the `what`s a source holds (the first `shown` of them)."""
    if not held:
        return f"it holds no {what}"
    more = f" and {len(held) - shown} more" if len(held) > shown else ""
    return f"the {what}s it holds: {', '.join(repr(h) for h in held[:shown])}{more}"
