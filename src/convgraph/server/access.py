"""Who may read or write which legacy conversation on a sync server, from its configuration.

The configuration is JSON: `{"conversations": {"<conv>" | "*": {"write": [actor | "*", ...],
"read": [actor | "*", ...]}}}`, where `*` stands for every conversation, or for every key, and a
writer may also read (`--allow '*=team'` admits any key to `team`). Because `*` means every
conversation here, no conversation called `*` is ever admitted. For a rooted conversation it
decides only who may create it here (push it while the server holds no genesis of it); once
held, its grant records decide (`gate.py`). Invariant: an actor has no access to a legacy
conversation unless a line of the configuration names it (or names every key).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from convgraph.core import suggestions
from convgraph.core.keys import actor_text, parse_actor
from convgraph.errors import AccessConfigError, ForbiddenError, KeyFileError

ANY = "*"
ANY_KEY = b""  # a `*` actor: every key (no real actor id is empty)
RESERVED = f"{ANY!r} is not a conversation name: in the access configuration it stands for every conversation"


@dataclass(frozen=True)
class Access:
    """Per-conversation sets of actor keys that may write, and that may only read."""

    writers: Mapping[str, frozenset[bytes]] = field(default_factory=dict)
    readers: Mapping[str, frozenset[bytes]] = field(default_factory=dict)

    def can_write(self, actor: bytes, conv: str) -> bool:
        return conv != ANY and any(_admits(self.writers.get(c, ()), actor) for c in (conv, ANY))

    def can_read(self, actor: bytes, conv: str) -> bool:
        return self.can_write(actor, conv) or (
            conv != ANY and any(_admits(self.readers.get(c, ()), actor) for c in (conv, ANY)))

    @cached_property
    def _named(self) -> frozenset[bytes]:
        return frozenset().union(*self.writers.values(), *self.readers.values())

    def names(self, actor: bytes) -> bool:
        """Whether some line of the configuration names `actor` (or every key)."""
        return _admits(self._named, actor)

    def check_named(self, actor: bytes) -> None:
        """Raise `ForbiddenError` when no line of the configuration names `actor` at all."""
        if not self.names(actor):
            why = f"key {actor_text(actor)} is admitted to no conversation"
            raise ForbiddenError("no access", reason=why, hint=allow_hint(actor))

    def check_read(self, actor: bytes, convs: Iterable[str]) -> None:
        """Raise `ForbiddenError` naming every conversation `actor` may not read."""
        if ANY in convs:
            raise ForbiddenError("no access", reason=RESERVED)
        denied = sorted(c for c in set(convs) if not self.can_read(actor, c))
        if denied:
            raise ForbiddenError(
                "no access",
                reason=f"key {actor_text(actor)} may not read conversation(s) {', '.join(denied)}",
                hint=allow_hint(actor, denied, read=True),
            )

    def writable(self, actor: bytes, convs: Iterable[str]) -> set[str]:
        return {c for c in convs if self.can_write(actor, c)}

    @classmethod
    def load(cls, path: Path) -> Access:
        """The configuration in the JSON file `path`; `AccessConfigError` naming the file and the fault."""
        try:
            raw = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise AccessConfigError(f"cannot read access configuration {path}: {exc}") from exc
        return cls.from_json(raw, source=str(path))

    @classmethod
    def from_json(cls, raw: object, *, source: str = "configuration") -> Access:
        """The configuration `raw` (parsed JSON); `AccessConfigError` naming `source` and the fault."""
        convs = raw.get("conversations") if isinstance(raw, dict) else None
        if not isinstance(convs, dict):
            raise AccessConfigError(f"{source}: expected an object with a 'conversations' object")
        writers: dict[str, set[bytes]] = {}
        readers: dict[str, set[bytes]] = {}
        for conv, grant in convs.items():
            if not isinstance(grant, dict) or not set(grant) <= {"read", "write"}:
                raise AccessConfigError(
                    f"{source}: conversation {conv!r} needs {{'read': [...], 'write': [...]}}"
                )
            for mode, table in (("write", writers), ("read", readers)):
                actors = grant.get(mode, [])
                if not isinstance(actors, list) or not all(isinstance(a, str) for a in actors):
                    raise AccessConfigError(f"{source}: {conv!r}.{mode} must be a list of actor ids")
                try:
                    table.setdefault(conv, set()).update(_actor(a) for a in actors)
                except KeyFileError as exc:  # parse_actor's type is about key files: say where instead
                    raise AccessConfigError(f"{source}: {conv!r}.{mode}: {exc.message}") from exc
        return cls(
            {c: frozenset(v) for c, v in writers.items()}, {c: frozenset(v) for c, v in readers.items()}
        )

    @classmethod
    def from_rules(cls, rules: Iterable[str]) -> Access:
        """From `ACTOR=CONV` (write) and `ACTOR=CONV:read` lines; CONV may be `*`.
        `AccessConfigError` names the first rule that is not one."""
        grants: dict[str, dict[str, list[str]]] = {}
        for rule in rules:
            actor, sep, target = rule.partition("=")
            if not sep or not target:
                raise AccessConfigError(f"access rule {rule!r}: expected ACTOR=CONV or ACTOR=CONV:read")
            try:
                _actor(actor)  # here, so the message names the rule
            except KeyFileError as exc:
                raise AccessConfigError(f"access rule {rule!r}: {exc.message} (or * for every key)") from exc
            conv, _, mode = target.rpartition(":") if target.endswith(":read") else (target, "", "write")
            grants.setdefault(conv, {}).setdefault(mode, []).append(actor)
        return cls.from_json({"conversations": grants}, source="--allow")

    def merged(self, other: Access) -> Access:
        def union(
            a: Mapping[str, frozenset[bytes]], b: Mapping[str, frozenset[bytes]]
        ) -> dict[str, frozenset[bytes]]:
            return {c: a.get(c, frozenset()) | b.get(c, frozenset()) for c in {*a, *b}}

        return Access(union(self.writers, other.writers), union(self.readers, other.readers))


def allow_hint(actor: bytes, convs: Iterable[str] = (), *, read: bool = False) -> str:
    """The `serve --allow` rules that would admit `actor` to each of `convs` (to read only, with
    `read`), as a hint a refused client can pass on; with no conversation, the rule's shape."""
    who = actor_text(actor)
    rules = [f"{who}={c}" + (":read" if read else "") for c in convs]
    if not rules:
        return (f"a server admits this key with `{suggestions.SERVE_ALLOW_ANY(actor=who)}` "
                "(CONVERSATION: a conversation's id, or * for all)")
    more = "".join(f" --allow {shlex.quote(r)}" for r in rules[1:])
    command = suggestions.SERVE_ALLOW(rule=rules[0]) + more
    return f"the server would admit this key with `{command}`" + (
        " (without :read, to write too)" if read else "")


def _actor(text: str) -> bytes:
    """An actor id of the configuration: `*` (every key) or a 52-character actor id."""
    return ANY_KEY if text == ANY else parse_actor(text)


def _admits(keys: Collection[bytes], actor: bytes) -> bool:
    return actor in keys or ANY_KEY in keys
