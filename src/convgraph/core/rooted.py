"""Rooted conversations: an id derived from the owner's key, and the rules that keep it the root.

A rooted conversation's id is `cg1` + base32 of 160 bits of `sha256(domain ‖ owner ‖ nonce)`,
so nobody but the owner can write the genesis that names it (docs/authority.md §2). Any other
id is legacy and keeps the version-1 rules. Invariant: in a rooted conversation, a record has no
parents if and only if it is a genesis whose own actor and nonce derive the conversation's id;
so, by induction over parents, the owner's genesis is in the causal past of every record.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
from typing import Any, Final

from convgraph.errors import GenesisError, SchemaError

CONV_DOMAIN: Final = b"convgraph/conv/v1\n"
CONV_PREFIX: Final = "cg1"
_DIGEST_BYTES: Final = 20
_ROOTED: Final = re.compile(r"cg1[a-z2-7]{32}")


def conv_id(owner: bytes, nonce: bytes) -> str:
    """The id of the conversation `owner` roots with `nonce` (32-byte key, 16-byte nonce)."""
    if type(owner) is not bytes or len(owner) != 32 or type(nonce) is not bytes or len(nonce) != 16:
        raise SchemaError("a conversation id needs a 32-byte owner key and a 16-byte nonce")
    digest = hashlib.sha256(CONV_DOMAIN + owner + nonce).digest()[:_DIGEST_BYTES]
    return CONV_PREFIX + base64.b32encode(digest).decode("ascii").lower()


@functools.lru_cache(maxsize=4096)  # asked several times per record, of a few conversations
def is_rooted(conv: str) -> bool:
    """True when `conv` has the rooted form (`cg1` and 32 base32 characters), else legacy."""
    return _ROOTED.fullmatch(conv) is not None


def check_root(m: dict[str, Any], cid: object = None) -> None:
    """Raise `GenesisError` unless the record map `m` keeps the root rules of its conversation.

    `m` has passed the structure and payload checks already (docs/format.md §15.2).
    """
    conv, kind = m["conv"], m["kind"]
    if not is_rooted(conv):
        if kind == "genesis":
            raise GenesisError(f"a genesis names a legacy conversation id {conv[:64]!r}", cid=cid)
        return
    if kind != "genesis":
        if not m["parents"]:
            raise GenesisError("a record without parents must be its conversation's genesis", cid=cid)
        return
    if m["parents"] or m["seq"] != 1 or "branch" in m:
        raise GenesisError("a genesis has seq 1, no parents and no branch", cid=cid)
    if conv_id(m["actor"], m["payload"]["nonce"]) != conv:
        raise GenesisError("the genesis's actor and nonce do not derive its conversation id", cid=cid)
