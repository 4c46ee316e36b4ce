"""The replica's read side: the folded state of a conversation and the views over it
(transcript, resume window, system prompt, request, routing), its records as stored, and its
artifacts read back.

`Views` is a base of `Replica`: it reads through the replica's store, folds, turn index and
resume cache, and writes no record. The views answer from the turn index in O(window) rows
(docs/conversation.md §8) and fall back to `visible` when the index cannot. Invariant: a record
the authority projection hides (docs/authority.md §6.2) is in no view, by either path.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from convgraph.core.cid import CID
from convgraph.core.hlc import Clock
from convgraph.core.record import Record, load_trusted
from convgraph.core.text import check_text
from convgraph.errors import NotFoundError, ProjectionError
from convgraph.projections import state as state_
from convgraph.projections.authority import Authority
from convgraph.projections.request import to_request
from convgraph.projections.retention import LastN
from convgraph.projections.state import ConvState
from convgraph.projections.surfaces import RouteStats, Surface, routing_stats
from convgraph.projections.system import fold_prompts, system_of
from convgraph.projections.transcript import FoldLines, Window, resume_window, transcript
from convgraph.projections.turn import Turn
from convgraph.replica import artifacts as replica_artifacts
from convgraph.replica import reads as replica_reads
from convgraph.replica.config import Config
from convgraph.replica.folds import Folds
from convgraph.replica.resume_cache import ResumeCache
from convgraph.replica.turn_index import TurnIndex
from convgraph.replica.verify import VerifyReport, stored_record, verify_store
from convgraph.store.base import Store


class Views:
    """What a replica reads: the folds of its conversations, the views over them, what it stores."""

    store: Store
    clock: Clock
    config: Config
    _folds: Folds
    _index: TurnIndex  # views in O(window) rows (docs/conversation.md §8)
    _answers: ResumeCache

    def state(self, conv: str) -> ConvState:
        """The folded state of `conv`, brought up to date incrementally from the store."""
        return self._folds.state(check_text(conv, "conv"))

    def visible(self, conv: str) -> ConvState:
        """The folded state the views read: in a rooted conversation, without the records its
        authority projection excludes (docs/authority.md §6.2), and with admin retractions."""
        folded = self.state(conv)
        if self._folds.authority(conv) is None:
            return folded
        folded.any_retractor = True
        hidden = self.authority(conv).hidden() if self.heads(conv) else frozenset()
        if not hidden:
            return folded
        return self._folds.without(conv, folded, hidden)

    def authority(self, conv: str, *, at_ms: int | None = None) -> Authority:
        """The authority projection of rooted conversation `conv` (docs/authority.md §7)."""
        state = self._folds.authority(conv)
        if state is None:
            raise ProjectionError(f"conversation {conv[:64]!r} is legacy: it has no authority projection")
        if state.genesis is None:
            raise NotFoundError(f"no genesis of conversation {conv[:64]!r} is held here")
        return Authority(conv, state, tuple(self.heads(conv)), self.clock() if at_ms is None else at_ms)

    def transcript(self, conv: str, *, branch: str | None = None, last: int | None = None) -> list[Turn]:
        """The visible turns of `conv` (of `branch`), in canonical order; `last` keeps the final n."""
        found = self._index.transcript(check_text(conv, "conv"), branch=branch, last=last)
        return transcript(self.visible(conv), branch=branch, last=last) if found is None else found

    def resume(
        self, conv: str, provider: str = "anthropic", *, last: int | None = None, branch: str | None = None
    ) -> list[dict[str, Any]]:
        """The provider-valid message list to continue `conv` with: at least the final `last`
        turns, widened back to the nearest user turn with text (never empty)."""
        return self._answers.resume(check_text(conv, "conv"), provider, branch=branch, last=last)

    def resume_window(self, conv: str, *, last: int | None = None, branch: str | None = None) -> Window:
        """The turns `resume` renders, and how far the window was widened to open on a user turn."""
        return self._answers.window(check_text(conv, "conv"), branch=branch, last=last)

    def _window(self, conv: str, branch: str | None, last: int | None) -> Window:
        found = self._index.resume_window(conv, branch=branch, last=last)
        return resume_window(self.visible(conv), branch=branch, last=last) if found is None else found

    def system(self, conv: str) -> str | None:
        """The system prompt that applies to `conv` now (None: none), read in O(1) index rows."""
        found = self._index.system(check_text(conv, "conv"))
        if found is not None:
            return found[0]
        folded = self.visible(conv)
        return system_of(FoldLines(folded), fold_prompts(folded))

    def request(
        self, conv: str, provider: str = "anthropic", *, last: int | None = None, branch: str | None = None
    ) -> dict[str, Any]:
        """The SDK call's kwargs to continue `conv`: the `resume` history and the system prompt,
        each where `provider` wants it (`projections.request.to_request`); add model and call."""
        return to_request(provider, self.resume(conv, provider, last=last, branch=branch), self.system(conv))

    def routing(self, conv: str, *, retention: LastN | None = None) -> dict[str, RouteStats]:
        """Per-model routing EMAs of `conv`'s observations; any `retention` is refused."""
        folded = self.visible(conv)
        observations = [folded.entries[c].payload for _, c in folded.replay]
        if retention is not None:
            observations = retention.keep(observations, Surface.REPLAY)
        return routing_stats(observations)

    def heads(self, conv: str) -> list[CID]:
        """The conversation's current heads, sorted by binary CID."""
        return self.store.heads(check_text(conv, "conv"))

    def records(self, conv: str, *, last: int | None = None) -> list[Record]:
        """The conversation's records in canonical order (only the final `last` if given)."""
        return [load_trusted(d, c) for c, d in self.store.records(check_text(conv, "conv"), last)]

    def entries(self, conv: str, cids: Iterable[CID]) -> dict[CID, state_.Entry]:
        """The entry (header fields and payload) of each of `cids`: from its bytes when held (in
        any conversation), from `conv`'s fold (its snapshot) when compacted; a CID neither holds
        is left out."""
        wanted = list(dict.fromkeys(cids))
        found = {c: state_.entry_from_bytes(c, d) for c, d in self.store.get_many(wanted).items()}
        if len(found) < len(wanted):
            folded = self.state(check_text(conv, "conv")).entries
            found.update({c: folded[c] for c in wanted if c not in found and c in folded})
        return found

    def arrived(self, conv: str, mark: replica_reads.Mark | None = None) -> replica_reads.Arrived:
        """The entries of `conv` that arrived after `mark` (None: all), compacted ones included,
        and the mark to pass next (`replica_reads.arrived`)."""
        return replica_reads.arrived(self.store, check_text(conv, "conv"), mark)

    def first(self, conv: str) -> state_.Entry | None:
        """The entry of `conv`'s first record in canonical order, compacted or not."""
        return replica_reads.first(self.store, check_text(conv, "conv"))

    def conversations(self) -> list[str]:
        """Every conversation this replica holds a record of."""
        return self.store.conversations()

    def iter_records(self, conv: str | None = None, *, page: int = 500) -> Iterator[Record]:
        """Every stored record in arrival order or, given `conv`, that conversation's records in
        canonical order, read `page` at a time: memory is bounded by the page, not the history
        (records landing meanwhile may or may not show)."""
        if conv is None:
            for cid, data in self.store.iter_all():
                yield load_trusted(data, cid)
            return
        check_text(conv, "conv")
        after = None
        while rows := self.store.records_after(conv, after, page):
            records = [load_trusted(d, c) for c, d in rows]
            yield from records
            after = records[-1].order_key

    # ------------------------------------------------------------ records and artifacts as stored

    def get(self, cid: CID) -> Record:
        """The stored record named `cid`."""
        return stored_record(self.store, cid)

    def get_artifact(self, cid: CID) -> bytes:
        """An artifact's bytes, checked against `cid`: `ArtifactMissingError` when a block is
        not held, `ArtifactCorruptError` when one hashes differently."""
        return replica_artifacts.get(self.store, cid)

    def open_artifact(self, cid: CID) -> Iterator[bytes]:
        """An artifact's bytes block by block, each checked as it is read (constant memory)."""
        return replica_artifacts.open_artifact(self.store, cid)

    def missing_artifacts(self, conv: str) -> list[CID]:
        """Artifacts named by `conv`'s records and not held whole here (sync may bring them)."""
        return replica_artifacts.missing(self.store, check_text(conv, "conv"))

    def forgotten(self, conv: str) -> bool:
        """Whether this replica forgot `conv` (`forget`): it refuses the conversation's records."""
        return bool(self.store.forgotten([check_text(conv, "conv")]))

    def verify(self) -> VerifyReport:
        """Re-hash, re-verify and re-check the causal rules of every stored record, streaming."""
        return verify_store(self.store, self.config.limits)
