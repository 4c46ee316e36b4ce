"""What an import did: the conversation, how many records it wrote, and what it could not map.

Every importer returns an `ImportReport`; the CLI prints it (and `--json` its `to_json`).
Invariant: each record the source maps to is counted once, as written now (`imported`) or
found written before (`already`); each source message no record holds as it was is listed in
`unmapped`, marked `kept` when it was written all the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

IMPORT_KEY: Final = "imported"
"""The payload `meta` key of an imported record: `{"from": source, "origin": …, "key": …,
"digest": …}` (`importers/writing.py`)."""


@dataclass(frozen=True)
class Unmapped:
    """One source message no turn could hold as it was.

    `key` names it in the source (a message id, a row id, a line or index); `what` says what it
    is (`system_message`, `invalid_json`, `unknown_role`, …); `reason` why it was not mapped.
    `kept`: written all the same (whole, in the record's `meta`) but not a turn resume renders."""

    key: str
    what: str
    reason: str
    kept: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "what": self.what, "reason": self.reason, "kept": self.kept}


@dataclass(frozen=True)
class ImportReport:
    """One import run: `source` (`langgraph`, `openai-agents`, `jsonl`), `origin` (the thread,
    session or file), `format` (the file format read, for jsonl), into conversation `conv`."""

    source: str
    origin: str
    conv: str
    created: bool
    imported: int
    already: int
    unmapped: tuple[Unmapped, ...] = ()
    format: str | None = None
    records: tuple[str, ...] = field(default=(), repr=False)  # CIDs written now, in order

    @property
    def changed(self) -> bool:
        """Whether this run wrote anything (a second run of the same import writes nothing)."""
        return self.created or self.imported > 0

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "source": self.source, "origin": self.origin, "conv": self.conv, "created": self.created,
            "imported": self.imported, "already": self.already,
            "unmapped": [u.to_json() for u in self.unmapped], "records": list(self.records),
        }
        if self.format is not None:
            body["format"] = self.format
        return body
