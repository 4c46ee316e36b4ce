"""The answers the authority projection gives, each citing the CIDs it rests on (§7)."""

from __future__ import annotations

from dataclasses import dataclass

from convgraph.core.cid import CID


@dataclass(frozen=True)
class Answer:
    """Whether `actor` holds `capability`, and the CIDs that say so (or what it lacks).

    `chain` runs from the genesis to the grant that gives the capability, one grant per
    delegation step. `until` is the wall-clock ms the capability expires at (None: never).
    """

    allowed: bool
    actor: bytes
    capability: str
    chain: tuple[CID, ...] = ()
    blocked_by: tuple[CID, ...] = ()
    reason: str = ""
    until: int | None = None

@dataclass(frozen=True)
class Exclusion:
    """A stored record that has no effect on any view, why, and the records that cause it."""

    cid: CID
    reason: str  # revoked_concurrently | grant_excluded | revoker_revoked
    causes: tuple[CID, ...]

@dataclass(frozen=True)
class Finding:
    """A decision that lacks the reviews its request asked for (`omitted_review`, §8.4), or
    whose subject changed before it without a review (`stale`, §8.7: `newer` the patches)."""

    kind: str  # omitted_review | stale
    cid: CID
    evidence: tuple[CID, ...]
    missing: tuple[bytes, ...] = ()
    detail: str = ""
    newer: tuple[CID, ...] = ()

    def to_json(self) -> dict[str, object]:
        """As `convgraph show` / `decide --json` give it: kind, the sentence, newer patches."""
        return {"kind": self.kind, "sentence": self.sentence(), "newer": [str(c) for c in self.newer]}

    def sentence(self) -> str:
        """One line for people: what is wrong with the decision, and what shows it."""
        if self.kind == "stale":
            return ("stale: the code changed after its reviews; unreviewed newer patch "
                    + ", ".join(map(str, self.newer)))
        return f"{self.kind.replace('_', ' ')}: {self.detail}" if self.detail else self.kind
