"""Sync messages as values, and their one binary form (the grammar is `docs/sync.md`).

The module the protocol is named by: the values live in `sync.messages`, the encoder in
`sync.encoder` and the strict decoder in `sync.decoder`; this module gathers them under one
name. Invariant: `decode(encode(m)) == m` and `encode(decode(b)) == b` for every `b` that decodes.
"""

from __future__ import annotations

from convgraph.sync.decoder import decode
from convgraph.sync.encoder import encode
from convgraph.sync.messages import (
    DEFAULT_LIMITS,
    MAX_BLOCK,
    MAX_GOSSIP,
    MAX_NEEDS,
    MAX_PARENTS,
    SALT_LEN,
    VERSION,
    VERSIONS,
    Base,
    Fate,
    Kind,
    Message,
    Mode,
    Range,
    Reported,
    Section,
    Want,
    WireLimits,
)

__all__ = [
    "DEFAULT_LIMITS", "MAX_BLOCK", "MAX_GOSSIP", "MAX_NEEDS", "MAX_PARENTS", "SALT_LEN", "VERSION",
    "VERSIONS", "Base", "Fate", "Kind", "Message", "Mode", "Range", "Reported", "Section", "Want",
    "WireLimits", "decode", "encode",
]
