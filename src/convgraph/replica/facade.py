"""The replica: a store, this device's key and a clock behind one public API.

`Replica.open(path)` gives the embedded default (a directory holding `actor.key` and
`replica.sqlite`, `home`); `Replica.in_memory()` a throwaway one. The facade holds the write
side and delegates each concern to its module of this package: authoring to `writes`, ingest
and adoption to `intake`, the cached folds to `folds`, drafts of turns to `drafts`, artifacts to
`artifacts`, code and its review to `code`, checkpoint claims to `checkpoints`, witnessed history
to `witnessing` and `checkpointing`, forgetting to `forget`; the read side is its base `Views`
(`views`). Invariant: the store only ever holds records that passed every ingest rule.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Collection, Container, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any

from convgraph.core.cid import CID
from convgraph.core.hlc import Clock, Hlc, system_clock
from convgraph.core.keys import SigningKey
from convgraph.core.kinds import NONCE_LEN
from convgraph.core.record import Record
from convgraph.core.rooted import conv_id
from convgraph.core.text import check_text
from convgraph.errors import GenesisError
from convgraph.integrity.checkpoints import CheckResult
from convgraph.integrity.findings import Finding
from convgraph.integrity.statement import Statement
from convgraph.projections import state as state_
from convgraph.projections.turn import Role, ToolCall
from convgraph.replica import artifact_checks, checkpointing, turn_index, witness_policy, witnessing
from convgraph.replica import artifacts as replica_artifacts
from convgraph.replica import code as replica_code
from convgraph.replica import forget as replica_forget
from convgraph.replica import home as replica_home
from convgraph.replica.checkpoints import claim, refuse_unwritten, require_witnessed
from convgraph.replica.config import Config
from convgraph.replica.drafts import Draft, genesis_payload, merge_payload, response_drafts, turn_draft
from convgraph.replica.folds import Folds
from convgraph.replica.home import DB_FILE, KEY_FILE
from convgraph.replica.ingest import IngestReport, Item
from convgraph.replica.intake import Intake
from convgraph.replica.resume_cache import ResumeCache
from convgraph.replica.views import Views
from convgraph.replica.witness_policy import WitnessPolicy
from convgraph.replica.witnessing import SessionVerdict
from convgraph.replica.writes import Writer, refuse_legacy
from convgraph.store.base import Store
from convgraph.store.memory import MemoryStore
from convgraph.store.sqlite import SqliteStore, Synchronous

__all__ = ["DB_FILE", "KEY_FILE", "Config", "Draft", "Replica", "resume"]


class Replica(Views):
    """A local replica of any number of conversations, written by one actor key."""

    def __init__(
        self, store: Store, key: SigningKey | None, *, clock: Clock = system_clock,
        config: Config | None = None,
    ) -> None:
        self.store = store
        self._key = key  # None: opened to read a store whose key is lost (`open(need_key=False)`)
        self.clock = clock
        self.config = config or Config()
        self._folds = Folds(store)
        self._index = turn_index.TurnIndex(store)  # views in O(window) rows (docs/conversation.md §8)
        self._answers = ResumeCache(store, self._window, decoded=self._index.cache)
        self._checkpoints = checkpointing.Watch()
        self._writer = Writer(store, self._folds)
        self._intake = Intake(store, self._folds, self._checkpoints, self._writer, self._entries)
        self.home: Path | None = None  # the directory `open` read, where its configuration lives
        self._local = threading.local()  # `transaction` nesting, per thread

    @classmethod
    def open(
        cls, path: Path | str, *, clock: Clock = system_clock, config: Config | None = None,
        synchronous: Synchronous = "NORMAL", create: bool = True, need_key: bool = True,
    ) -> Replica:
        """Open the replica in directory `path`, creating the directory, key and store if absent
        (with `create` false, `NoReplicaError` instead). A store whose key is gone, or an empty or
        foreign database, is an error that says how to recover, never replaced (`replica_home`);
        with `need_key` false a store whose key is gone opens, to be read: a write raises that error."""
        home = Path(path)
        key, store = replica_home.open_parts(home, lambda db: SqliteStore(db, synchronous=synchronous),
                                             create=create, need_key=need_key)
        replica = cls(store, key, clock=clock, config=config)
        replica.home = home
        return replica

    @classmethod
    def in_memory(
        cls, key: SigningKey | None = None, *, clock: Clock = system_clock, config: Config | None = None
    ) -> Replica:
        """A replica that lives in this process only."""
        return cls(MemoryStore(), key or SigningKey.generate(), clock=clock, config=config)

    @property
    def key(self) -> SigningKey:
        """This device's signing key; `MissingKeyError` when the replica was opened without it."""
        if self._key is None:
            raise replica_home.missing_key(self.home or Path("."))
        return self._key

    @property
    def actor(self) -> bytes:
        """This replica's actor id: its Ed25519 public key."""
        return self.key.public

    def create(
        self, title: str | None = None, *, nonce: bytes | None = None, migrated_from: str | None = None,
        refs: Sequence[CID] = (),
    ) -> str:
        """Root a new conversation owned by this replica's key; returns its id (`conv_id`).

        Writes the genesis (docs/authority.md §2): seq 1, no parents, payload `{nonce, title?,
        migrated_from?}`, the nonce random unless given. Raises `GenesisError` when the id is
        taken already (the same nonce twice): a conversation has one root.
        """
        nonce = os.urandom(NONCE_LEN) if nonce is None else nonce
        conv = conv_id(self.actor, nonce)
        payload = genesis_payload(nonce, title, migrated_from)
        with self.transaction(conv):  # the check and the genesis in one step: no second root
            if self.store.heads(conv):
                raise GenesisError(f"conversation {conv} exists already: pick another nonce")
            self.write(conv, "genesis", payload, refs=refs)
        return conv

    @contextmanager
    def transaction(self, *convs: str) -> Iterator[None]:
        """Hold the store's write lock (naming `convs`, only their writers'): the writes made
        inside land together at exit, or none.

        Nests (an inner one joins the outer). When the outermost commits, what the folds took
        in on trust inside it is confirmed, so later writes stop re-checking it; when it rolls
        back, the writer and the folds notice and rebuild from what the store holds.
        """
        depth = getattr(self._local, "depth", 0)  # this thread's: a store's flag is any thread's
        with self.store.transaction(*convs):
            self._local.depth = depth + 1
            try:
                yield
            finally:
                self._local.depth = depth
        if depth == 0:
            self._folds.confirmed(self._folds.authorities)

    def write(
        self, conv: str, kind: str, payload: dict[str, Any], *, refs: Sequence[CID] = (),
        branch: str | None = None,
    ) -> Record:
        """Author, sign and store one record in `conv`; returns it once it is durable."""
        return self.write_many(conv, [Draft(kind, payload, refs, branch)])[0]

    def write_many(self, conv: str, drafts: Iterable[Draft]) -> list[Record]:
        """Author a run of records in one transaction: each one's parent is the previous.

        Raises `LegacyConversationError` for a legacy `conv` unless `config.legacy_writes`,
        `ForgottenConversationError` for one this replica forgot.
        """
        refuse_legacy(check_text(conv, "conv"), allowed=self.config.legacy_writes)  # before the store
        replica_forget.refuse_forgotten(self.store, conv)
        records = self._writer.write(self.key, conv, drafts, clock=self.clock, limits=self.config.limits)
        artifact_checks.check_records(self.store, records, self.clock())  # our own claims too
        replica_artifacts.admit_written(self.store, records)  # we hold what we named: readers may fetch it
        return records

    def ingest(
        self, items: Iterable[Item], *, conversations: Container[str] | None = None,
        refused: Iterable[CID] = (),
    ) -> IngestReport:
        """Validate and store foreign records; a bad one is reported, never fatal to the rest.

        With `conversations`, records of other conversations are rejected, not stored. A large
        ingest may land in parts, each its own call and commit: `refused` then carries the CIDs
        the earlier parts rejected, so that what names them is rejected as in one call, and
        `IngestReport.merge` joins the parts' reports.
        """
        return self._intake.ingest(items, config=self.config, clock=self.clock, conversations=conversations,
                                   refused=refused)

    def reader(self) -> Replica:
        """Another facade over the same store, key, clock and configuration, with folds of its own.

        Its folds read only what the store commits, never what this facade's ingest is adding
        to its own in place, so a thread may read an authority state through it while another
        ingests through this one (the server's access checks). Not for writing.
        """
        twin = Replica(self.store, self._key, clock=self.clock, config=self.config)
        twin.home = self.home
        return twin

    def adopt(self, checkpoint: bytes, snapshot: bytes, cover: bytes) -> IngestReport:
        """Take a compacted conversation on its checkpoint signer's word (docs/format.md 11.5).

        Stores the cover's headers as compacted records, the checkpoint, and the snapshot as
        the conversation's latest, then places what waited for them; raises `SnapshotError`,
        `CoverError` (or the checkpoint's own intrinsic error) and changes nothing when they
        do not vouch for one another. A checkpoint already held is reported as a duplicate.
        """
        return self._intake.adopt(checkpoint, snapshot, cover, config=self.config, clock=self.clock)

    def release_held(self) -> IngestReport:
        """Place records that were held for our clock (or their parents) and are now due."""
        return self.ingest(())

    # ---------------------------------------------- artifacts (docs/format.md §17; reading them: views.py)

    def put(self, source: replica_artifacts.Source) -> CID:
        """Store bytes, a file by path, or a binary stream as an artifact; returns its CID.

        Streams in constant memory; raises `ArtifactTooLargeError` past
        `config.max_artifact_bytes`, storing nothing.
        """
        return replica_artifacts.put(self.store, source, limit=self.config.max_artifact_bytes)

    # ------------------------------------------------------------ turns (the views: replica/views.py)

    def say(
        self, conv: str, role: Role | str, content: str | list[dict[str, Any]], *,
        tool_calls: Sequence[ToolCall] = (), tool_use_id: str | None = None, is_error: bool = False,
        branch: str | None = None, attachments: Sequence[replica_code.Attachment] = (),
    ) -> Record:
        """Append one turn to `conv` as `role` (user, assistant or tool); each of `attachments`
        (bytes, a path, or a CID) is put as an artifact and named in the turn's `refs`."""
        draft = turn_draft(conv, role, content, tool_calls=tool_calls, tool_use_id=tool_use_id,
                           is_error=is_error, branch=branch)
        if not attachments:
            return self.write_many(conv, [draft])[0]
        with self.transaction():  # the turn and the artifacts it names land together
            refs = replica_code.attach(self, attachments)
            return self.write_many(conv, [replace(draft, refs=refs)])[0]

    # ------------------------------------------------------------ code and its review (replica/code.py)

    def snapshot(
        self, conv: str, paths: Sequence[replica_code.PathText] | replica_code.PathText, *,
        root: replica_code.PathText | None = None,
    ) -> replica_code.Snapshot:
        """Write a `code_snapshot` of the regular files under `paths` (relative to `root`, default
        the working directory), each stored as an artifact; symlinks and unreadable files are
        reported in `.skipped`, never followed."""
        return replica_code.snapshot(self, conv, paths, root=root)

    def patch(self, conv: str, base: CID, diff: str | bytes, *, path: str | None = None) -> Record:
        """Apply unified `diff` to artifact `base`, store the result and write the `patch` record;
        `PatchApplyError` (nothing stored) when it does not apply exactly, and `NotADiffError`
        when it holds no hunk (empty, or not a unified diff): such a diff would change nothing."""
        return replica_code.patch(self, conv, base, diff, path=path)

    def review(
        self, conv: str, target: CID, body: str, *, verdict: str = "comment", line: int | None = None,
    ) -> Record:
        """Write a `review_comment` on the exact snapshot or patch record `target` (needs `review`)."""
        return replica_code.review(self, conv, target, body, verdict=verdict, line=line)

    def ask(
        self, conv: str, question: str, *, subject: CID | None = None, options: Sequence[str] = (),
        reviews: int | None = None, reviewers: Iterable[bytes] = (),
    ) -> Record:
        """Write a `decision_request` about record `subject`, naming the reviews it needs first."""
        return replica_code.ask(self, conv, question, subject=subject, options=options, reviews=reviews,
                                reviewers=reviewers)

    def decide(self, conv: str, request: CID, choice: str, *, rationale: str | None = None) -> Record:
        """Write the `decision` of request `request` (needs `decide`); `ChoiceError` off its options."""
        return replica_code.decide(self, conv, request, choice, rationale=rationale)

    def record_response(
        self, conv: str, response: Any, *, provider: str | None = None, branch: str | None = None
    ) -> list[Record]:
        """Append a provider's response (an SDK object, or its dict with `provider` named)
        as turns, keeping thinking / reasoning blocks and their signatures byte for byte."""
        drafts = response_drafts(conv, response, provider=provider, branch=branch)
        return self.write_many(conv, drafts) if drafts else []

    def branch(self, conv: str, name: str, at: CID, *, purpose: str | None = None) -> Record:
        """Fork `conv` at record `at`: turns written with `branch=name` continue from there."""
        payload: dict[str, Any] = {"name": name, "from": at, **({"purpose": purpose} if purpose else {})}
        return self.write(conv, "branch", payload)

    def merge(
        self, conv: str, branch: str, *, accepted: Iterable[CID] = (), summary: str | None = None,
        content: str | list[dict[str, Any]] | None = None,
    ) -> Record:
        """Join every current head of `conv` on main, saying what of `branch` was accepted."""
        with self.transaction():  # the heads it names are exactly the parents it gets
            payload = merge_payload(branch, self.heads(conv), accepted, summary, content)
            return self.write(conv, "merge", payload)

    def set_system(self, conv: str, text: str, *, meta: dict[str, Any] | None = None) -> Record:
        """Write `text` as `conv`'s system prompt (empty: none from now on); the latest prompt in
        canonical order applies to every later request (docs/conversation.md §9)."""
        return self.write(conv, "system_prompt", {"content": text, **({"meta": meta} if meta else {})})

    def checkpoint(self, conv: str, *, compact: bool = False, policy: WitnessPolicy | None = None) -> Record:
        """Sign a checkpoint of `conv` (heads, count, snapshot CID); with `compact`, drop the
        raw records it covers (not those a finding cites) and keep the snapshot, in one
        transaction. With `compact` under a witness `policy` of k > 0 (default: the one
        configured in this replica's home) nothing is written: `UnwitnessedError`, since
        compaction waits for k cosignatures (docs/integrity.md §7.4; then `compact_behind`)."""
        if compact:
            refuse_unwritten(self._policy(policy))
        # the snapshot holds every surface whole (replay streams included), so compaction
        # trims no history: it only stops keeping the raw records beside their fold
        with self.store.transaction():
            payload, covered, data = claim(self.state(conv), self.heads(conv), self.actor)
            record = self.write(conv, "checkpoint", payload)
            if compact:
                self.store.compact(conv, covered, record.cid, data)
        return record

    def now(self) -> Hlc:
        """The replica's hybrid logical clock as of its last event."""
        return self._writer.hlc

    def repair_index(self) -> list[str]:
        """Rebuild the turn index from the records (docs/conversation.md §8.5); the
        conversations whose index was wrong."""
        changed = turn_index.repair(self.store)
        self._answers.forget()  # rows no record moved: no window may be moved on from before
        return changed

    # ------------------------------------------------------------ witnessed history (replica/witnessing.py)

    def findings(self, conv: str | None = None) -> list[Finding]:
        """The findings this replica holds (about `conv`), oldest first (docs/integrity.md §6);
        the checkpoints not yet settled (§7.2) are checked first."""
        convs = [conv] if conv is not None else self.conversations()
        checkpointing.rescan_each(self.store, self._checkpoints, convs, self._entries, self.clock)
        return witnessing.findings(self.store, conv)

    def checkpoint_status(self, cid: CID) -> CheckResult:
        """§7.2's verdict on checkpoint `cid` over the records held: verified, partly verified,
        unverified, or false with the check that failed (then recorded as a finding)."""
        return checkpointing.status(self.store, self._checkpoints, cid, now_ms=self.clock())

    def compact_behind(self, checkpoint: CID, policy: WitnessPolicy | None = None) -> None:
        """Drop the bytes of the records checkpoint `checkpoint` covers (docs/conversation.md §6),
        keeping what findings cite; `UnwitnessedError` unless k witnesses of `policy` (default:
        the configured one) cosigned it, `IntegrityError` when its snapshot is not their fold."""
        conv = checkpointing.conv_of(self.store, checkpoint)
        policy = self._policy(policy)
        with self.store.transaction():
            require_witnessed(self.store, checkpoint, policy, self._entries)
            checkpointing.compact_behind(self.store, checkpoint, self.state(conv))

    def witnessed(self, cid: CID, policy: WitnessPolicy | None = None) -> bool:
        """Whether checkpoint `cid` holds valid cosignatures by at least k distinct witnesses of
        `policy` (default: the one configured in this replica's home; §7.4)."""
        return witness_policy.witnessed(self.store, cid, self._policy(policy), self._entries)

    def _policy(self, policy: WitnessPolicy | None) -> WitnessPolicy:
        return witness_policy.configured(self.home) if policy is None else policy

    def _entries(self, conv: str) -> Iterable[state_.Entry]:
        return self.state(conv).entries.values()

    def observe_session(
        self, peer: bytes, conv: str, statements: Sequence[Statement], *, started_ms: int, received_ms: int,
        fingerprints_matched: bool,
    ) -> SessionVerdict:
        """Check what `peer` signed about `conv` in one session (`statements`, in order) against
        what it signed before (docs/integrity.md §4). Raises `StaleStatementError` for a stale
        last statement, `ProtocolError` for none or one by another key or about another conv."""
        return witnessing.observe_session(self.store, peer, conv, statements, started_ms=started_ms,
                                          received_ms=received_ms, fingerprints_matched=fingerprints_matched,
                                          now_ms=self.clock())

    def observe_gossip(self, conv: str, statements: Sequence[Statement]) -> list[Finding]:
        """Keep statements gossiped about `conv` and check them pairwise (§5); the new findings."""
        return witnessing.observe_gossip(self.store, self.actor, conv, statements, now_ms=self.clock())

    def gossip_for(self, conv: str, exclude: Collection[bytes]) -> list[Statement]:
        """The statements to gossip about `conv`: each other key's latest, newest first, at most 16."""
        return witnessing.gossip_for(self.store, conv, exclude)

    # ------------------------------------------------------------ forgetting (replica/forget.py)

    def forget(self, conv: str) -> None:
        """Drop `conv` from this replica's store only: its records, every row kept for it and the
        artifact blocks no other conversation names, in one transaction; its id is kept so that
        sync never brings it back (docs/conversation.md §10). Nothing is signed: other replicas
        keep it whole. Raises `UnknownConversationError` when it is not held."""
        replica_forget.forget(self.store, conv)
        self._folds.drop(conv)
        self._answers.forget()
        self._checkpoints.scanned.pop(conv, None)

    def vacuum(self) -> None:
        """Hand the space of deleted data back to the file system: on SQLite a full `VACUUM` (it
        also switches a store made before auto-vacuum to it), on PostgreSQL `VACUUM` of the
        tables; never inside a transaction (`StoreError`)."""
        self.store.vacuum()

    def close(self) -> None:
        """Release the store."""
        self.store.close()

    def __enter__(self) -> Replica:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def resume(
    replica: Replica, conv: str, provider: str = "anthropic", *, last: int | None = None,
    branch: str | None = None,
) -> list[dict[str, Any]]:
    """`replica.resume(…)` as a function: the provider-valid messages to continue `conv`."""
    return replica.resume(conv, provider, last=last, branch=branch)

