"""The one error tree of convgraph: every failure a caller can see is a `ConvgraphError`.

    ConvgraphError
    ├── DecodeError                 bytes that are not a well-formed record
    │   ├── NonCanonicalError       decodes, but re-encoding gives other bytes
    │   └── SizeLimitError          larger than the configured limit
    ├── SchemaError                 a field or payload that breaks its kind's schema
    │   ├── UnknownKindError
    │   ├── InvalidTextError        text that cannot be UTF-8 (a lone surrogate)
    │   └── GenesisError            a rooted conversation's root rules broken (docs/authority.md §2)
    ├── VerificationError           well-formed but not authentic
    │   ├── CidMismatchError        the claimed CID is not the hash of the bytes
    │   ├── SignatureError          the signature does not verify under `actor`
    │   ├── CoverError              a checkpoint's cover that does not vouch for what it names
    │   │   └── CoverConflictError  … or that contradicts what the replica holds
    │   └── UntrustedCheckpointError a checkpoint a sync peer sent, by a key we adopt none from
    ├── CausalityError              authentic, but it contradicts the history it names
    │   ├── ParentConversationError a parent from another conversation
    │   ├── HlcOrderError           hlc not after every parent's
    │   ├── SeqChainError           seq is not previous own seq + 1 with that record a parent
    │   ├── ParentRejectedError     a parent was itself rejected, so this can never be placed
    │   ├── AuthorityError          the author lacks a capability at the record's causal position
    │   ├── ForgedMergeError        a merge naming a branch, heads or records not in its past
    │   ├── FloatingDecisionError   a decision whose request is not in its past
    │   ├── BranchOriginError       a branch forking from a record not in its past
    │   └── RetractionTargetError   a retraction or supersession of a record not in its past
    ├── IntegrityError              witnessed history (docs/integrity.md)
    │   ├── StatementError          a signed statement that is malformed or not authentic
    │   ├── EvidenceError           bytes that are not an evidence bundle at all
    │   ├── NoteError               a C2SP signed note that is malformed or does not verify
    │   ├── WitnessRefusedError     a witness would not cosign a checkpoint (its §7.4 reason)
    │   ├── UnwitnessedError        compaction refused: the checkpoint lacks its k cosignatures
    │   └── WitnessConfigError      a witness configuration (name, key, URL, k) that cannot be used
    ├── PatchApplyError             a unified diff that does not apply exactly to its base
    │   └── NotADiffError           input with no hunk: empty, not a unified diff, or headers alone
    ├── WorkingTreeError            snapshot paths that are missing, outside the root, or hold no file
    ├── WrongTargetError            a review, request or decision naming a record it cannot be about
    ├── ChoiceError                 a decision's choice that is not among its request's options
    ├── KeyFileError                a key file that is missing, unreadable or malformed
    │   └── MissingKeyError         a replica's store is there, its actor key is not
    ├── StoreError                  the storage layer failed (translated at the boundary)
    │   ├── StoreBusyError          another process holds the write lock too long
    │   │   └── LockOrderError      a conversation's lock needed out of order was taken: restart
    │   ├── StoreCorruptError       the database file is damaged or not ours
    │   │   ├── TurnIndexError      the turn index disagrees with the records it caches
    │   │   └── UnusableStoreError  a replica database that is empty or not SQLite at all
    │   └── StoreSchemaError        the database was written by an unknown schema version
    ├── NotFoundError               a CID or conversation the replica does not hold
    │   ├── UnknownConversationError  a conversation asked for by name that holds no record
    │   ├── AmbiguousCidError       a short CID that more than one stored CID matches
    │   ├── AmbiguousActorError     a short actor id that more than one known key matches
    │   └── AmbiguousConversationError  a short conversation id that more than one held id matches
    ├── NoReplicaError              a directory with no replica where one was expected
    ├── ForgottenConversationError  a record or write of a conversation this replica forgot
    ├── LegacyConversationError     a write into a conversation that has no root of trust
    ├── MigrationError              a conversation `migrate` cannot copy (it is rooted already)
    ├── AliasError                  a malformed local alias, or an alias file that cannot be read
    ├── BindError                   the sync server cannot listen on the address asked for
    ├── AccessConfigError           a sync server's access configuration that cannot be used
    ├── ProjectionError             a view cannot be built as asked
    │   ├── RetentionRefusedError   a retention rule on a surface that must never be trimmed
    │   ├── CompactedError          the raw records asked for were compacted away
    │   ├── NoUserTurnError         nothing to resume: no visible user turn carries text
    │   └── SnapshotError           snapshot bytes that do not restore to a folded state
    └── SyncError                   a sync exchange that cannot go on
        ├── ProtocolError           a message that breaks the sync grammar or its bounds
        │   └── RoundTripLimitError   a sync still unfinished after its round-trip budget
        ├── CarError                a CAR file that is malformed or lies about a block
        ├── TransportError          the peer is unreachable or answered outside the protocol
        │   └── SlowTransferError   an answer that arrived slower than the minimum rate
        ├── SyncTimeoutError        the sync did not finish by its overall deadline
        ├── PeerMisbehavedError     a well-formed answer that is false (a record not the one
        │                           named or not valid, a head that is not a head)
        └── AuthError               the server refused the request
            ├── UnauthenticatedError  no valid signature, or a replay (HTTP 401)
            ├── ForbiddenError      a valid key without access to what it asked (HTTP 403)
            └── ServerBusyError     a bound the server keeps is full; retry later (HTTP 503)
                └── NonceLogFullError  the replay window holds as many nonces as it may

Every leaf that concerns one record carries its `cid` (text form) when it is known, so a
report can say which record broke which rule.
"""

from __future__ import annotations


class ConvgraphError(Exception):
    """Root of every error convgraph raises on purpose."""

    def __init__(self, message: str, *, cid: object = None) -> None:
        # `cid` may be a CID object: its text form is made only if the error is shown,
        # which keeps rejecting a flood of bad records cheap.
        super().__init__(message)
        self.message = message
        self._cid = cid

    @property
    def cid(self) -> str | None:
        """The text form of the CID of the record concerned, when known."""
        return None if self._cid is None else str(self._cid)

    def __str__(self) -> str:
        return self.message if self._cid is None else f"{self.message} (record {self._cid})"

    @property
    def rule(self) -> str:
        """Stable machine-readable name of the broken rule, e.g. `signature`."""
        return _RULES.get(type(self), type(self).__name__)


class DecodeError(ConvgraphError):
    """The bytes are not a well-formed DAG-CBOR record."""


class NonCanonicalError(DecodeError):
    """The bytes decode, but they are not the one canonical encoding of what they hold."""


class SizeLimitError(DecodeError):
    """The record (or a part of it) exceeds a configured bound."""

    def __init__(self, message: str, *, limit: int, got: int, cid: object = None) -> None:
        super().__init__(f"{message}: {got} > {limit}", cid=cid)
        self.limit = limit
        self.got = got


class SchemaError(ConvgraphError):
    """A field of the record or of its payload breaks the schema of its kind."""


class UnknownKindError(SchemaError):
    """The record's kind is not one this version knows."""


class InvalidTextError(SchemaError):
    """Text that cannot be written as UTF-8: a Python `str` holding a lone surrogate, as
    `sys.argv` makes of an argument that is not UTF-8. `field` names where it was."""

    def __init__(self, *, field: str, position: int, code_point: int, cid: object = None) -> None:
        # U+DC80..U+DCFF is how surrogateescape carries one byte that does not decode
        escaped = 0xDC80 <= code_point <= 0xDCFF
        byte = f" (byte 0x{code_point - 0xDC00:02x} of text that is not UTF-8)" if escaped else ""
        super().__init__(
            f"{field} is not valid Unicode text: a lone surrogate U+{code_point:04X} at index {position}"
            + byte,
            cid=cid,
        )
        self.field = field
        self.position = position
        self.code_point = code_point


class VerificationError(ConvgraphError):
    """The record is well-formed but not authentic."""


class CidMismatchError(VerificationError):
    """The CID the record was offered under is not the hash of its bytes."""

    def __init__(self, *, expected: str, got: str) -> None:
        super().__init__(f"CID mismatch: claimed {expected}, bytes hash to {got}", cid=expected)
        self.expected = expected
        self.got = got


class SignatureError(VerificationError):
    """The signature does not verify under the record's actor key."""


class CoverError(VerificationError):
    """A checkpoint's cover (the headers of the records its snapshot holds) that does not match
    the checkpoint or its snapshot. `checkpoint` names the checkpoint; `record`, when set, the
    covered record at fault."""

    def __init__(self, message: str, *, checkpoint: object, record: object = None) -> None:
        super().__init__(message if record is None else f"{message}: covered record {record}", cid=checkpoint)
        self.checkpoint = str(checkpoint)
        self.record = None if record is None else str(record)


class CoverConflictError(CoverError):
    """A cover that vouches for itself but contradicts what this replica already holds."""


class UntrustedCheckpointError(VerificationError):
    """A sync peer's base whose checkpoint is signed by a key the adoption policy does not
    trust for that conversation: nothing of it is stored. `signer` is the key's text form."""

    def __init__(self, message: str, *, checkpoint: object, signer: str) -> None:
        super().__init__(message, cid=checkpoint)
        self.checkpoint = str(checkpoint)
        self.signer = signer


class GenesisError(SchemaError):
    """A rooted conversation's root rule is broken: a parentless record that is not its genesis,
    a genesis whose id is not derived from its own key and nonce, or a genesis in a legacy
    conversation (docs/format.md §15)."""


class CausalityError(ConvgraphError):
    """The record contradicts the records it names as parents."""


class ParentConversationError(CausalityError):
    """A parent belongs to another conversation."""


class HlcOrderError(CausalityError):
    """The record's hlc is not strictly after every parent's."""


class SeqChainError(CausalityError):
    """`seq` is not the author's previous seq + 1, or that record is not a parent."""


class ParentRejectedError(CausalityError):
    """A parent was rejected, so no replica can ever place this record."""


class AuthorityError(CausalityError):
    """The author does not hold `capability` at the record's causal position (docs/authority.md).

    `actor` is the author's actor id text; `blocked_by` the CIDs of the revocations that cut its
    grants (empty when it never had one). For a local write, `cid` is None.
    """

    def __init__(
        self, message: str, *, capability: str, actor: str, blocked_by: tuple[str, ...] = (),
        cid: object = None,
    ) -> None:
        super().__init__(message, cid=cid)
        self.capability = capability
        self.actor = actor
        self.blocked_by = blocked_by


class ForgedMergeError(CausalityError):
    """A merge whose branch, heads or accepted records are not what its causal past holds."""


class FloatingDecisionError(CausalityError):
    """A decision whose `request` is not a `decision_request` in its causal past."""


class BranchOriginError(CausalityError):
    """A branch whose `from` is not a record in its causal past."""


class RetractionTargetError(CausalityError):
    """A retraction or supersession whose target is not a record in its causal past."""


class IntegrityError(ConvgraphError):
    """Witnessed history: a statement, receipt or evidence bundle that cannot be used."""


class StatementError(IntegrityError):
    """A statement (docs/integrity.md §2) that is malformed or not authentic.

    `reason` is `decode`, `schema` or `signature`.
    """

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class EvidenceError(IntegrityError):
    """Bytes that are not an evidence bundle (docs/integrity.md §6.2): not even a claim to check."""


class NoteError(IntegrityError):
    """A C2SP signed note or signature line (docs/integrity.md §8) that cannot be used.

    `reason` is `format` (not a well-formed note, body or line), `signature` (a line by a
    known key does not verify) or `untrusted` (no line by a known key verifies).
    """

    def __init__(self, message: str, *, reason: str, cid: object = None) -> None:
        super().__init__(message, cid=cid)
        self.reason = reason


class WitnessRefusedError(IntegrityError):
    """A witness refused to cosign a checkpoint (docs/integrity.md §7.4).

    `reason` is `unknown_checkpoint`, `unverified`, `false_checkpoint` or `not_extending`.
    """

    def __init__(self, message: str, *, reason: str, cid: object = None) -> None:
        super().__init__(message, cid=cid)
        self.reason = reason


class UnwitnessedError(IntegrityError):
    """A checkpoint lacks cosignatures by `k` configured witnesses, so nothing was compacted."""

    def __init__(self, message: str, *, cid: object, got: int, k: int) -> None:
        super().__init__(message, cid=cid)
        self.got = got
        self.k = k


class WitnessConfigError(IntegrityError):
    """A witness configuration (home/witnesses.json, or a name, key, URL or k given) that cannot be used."""


class PatchApplyError(ConvgraphError):
    """A unified diff that does not apply exactly to its base (docs/format.md §18): malformed,
    or a context or removed line that differs. `hunk` (1-based; 0 for the headers) and `line`
    (the 1-based line of the diff) say where; `cid` names the patch record when known."""

    def __init__(self, message: str, *, hunk: int, line: int, cid: object = None) -> None:
        super().__init__(message, cid=cid)
        self.hunk = hunk
        self.line = line


class NotADiffError(PatchApplyError):
    """Input to make a patch of that holds no hunk: empty, not a unified diff at all (a source
    file given by mistake), or `---`/`+++` headers alone. It would change nothing, so it is no
    patch; `hunk` is 0 and `line` the diff line where a hunk was looked for."""


class KeyFileError(ConvgraphError):
    """A key file is missing, unreadable, too open or malformed."""


class StoreError(ConvgraphError):
    """The storage layer failed; the underlying driver error is chained as `__cause__`."""


class StoreBusyError(StoreError):
    """The store stayed locked by another writer past the busy timeout."""


class LockOrderError(StoreBusyError):
    """A transaction needed the lock of a conversation that sorts before one it holds, and
    another writer held it: waiting could deadlock, so the transaction was rolled back. Run it
    again naming `convs` from its start, so that every lock is taken in order."""

    def __init__(self, message: str, *, convs: tuple[str, ...]) -> None:
        super().__init__(message)
        self.convs = convs


class StoreCorruptError(StoreError):
    """The database file is damaged or is not a convgraph store."""


class TurnIndexError(StoreCorruptError):
    """A row of the turn index (docs/conversation.md §8) that the records do not make, or one
    they make that is missing; `Replica.repair_index` rebuilds it from the records."""


class StoreSchemaError(StoreError):
    """The database was written with a schema version this code does not know."""


class NotFoundError(ConvgraphError):
    """The replica holds no record (or conversation) by that name."""


class LegacyConversationError(ConvgraphError):
    """A local write into a legacy conversation (one whose id names no owner), refused because
    anyone could have written it; `convgraph migrate` starts a rooted one from its history.
    `conv` is the conversation's id."""

    def __init__(self, message: str, *, conv: str) -> None:
        super().__init__(message)
        self.conv = conv


class MigrationError(ConvgraphError):
    """A conversation `migrate` cannot copy: only a legacy conversation has no root to take over."""


class AliasError(ConvgraphError):
    """A local alias that cannot be one (empty, the form of an id, …) or an alias file that
    cannot be read or written (the CLI's `aliases.json`)."""


class BindError(ConvgraphError):
    """The sync server cannot listen on `host`:`port` (taken, not allowed, or no such address)."""

    def __init__(self, message: str, *, host: str, port: int) -> None:
        super().__init__(f"cannot listen on {host}:{port}: {message}")
        self.host = host
        self.port = port


class AccessConfigError(ConvgraphError):
    """An access configuration (a file or `--allow` rules) that cannot be read or is malformed.

    The message names where (the file, `--allow` or the rule) and what is wrong, so the
    server is never started on a configuration that grants other than what was meant.
    """


class ProjectionError(ConvgraphError):
    """A view of the records cannot be built as asked."""


class RetentionRefusedError(ProjectionError):
    """A retention rule was asked of a surface whose values depend on all of its history."""


class CompactedError(ProjectionError):
    """The raw records needed were dropped by compaction; only the snapshot remains."""


class NoUserTurnError(ProjectionError):
    """Nothing to resume: no visible turn is a user turn with text, which every provider
    wants first (docs/conversation.md, *Resume windows*)."""


class SnapshotError(ProjectionError):
    """Snapshot bytes that are not the canonical snapshot of a folded state."""


class SyncError(ConvgraphError):
    """A sync exchange with a peer cannot go on."""


class ProtocolError(SyncError):
    """A sync message that breaks the grammar of `docs/sync.md` or one of its bounds.

    `reason` is one of the names `docs/sync.md` lists (`version`, `kind`, `malformed`,
    `limit`, `part`), or `peer` for what a peer did outside the grammar.
    """

    def __init__(self, message: str, *, reason: str = "peer") -> None:
        super().__init__(message)
        self.reason = reason


class RoundTripLimitError(ProtocolError):
    """The peer kept the sync going past `limit` round trips (counted over every session)."""

    def __init__(self, message: str, *, limit: int) -> None:
        super().__init__(message, reason="round_trips")
        self.limit = limit


class StaleStatementError(SyncError):
    """A peer's statement of `conv` whose `time_ms` lies outside the freshness window
    [`earliest_ms`, `latest_ms`] of its session (docs/integrity.md §4 step 1): nothing of
    it is remembered, and the run does not converge."""

    def __init__(self, message: str, *, conv: str, time_ms: int, earliest_ms: int, latest_ms: int) -> None:
        super().__init__(message)
        self.conv = conv
        self.time_ms = time_ms
        self.earliest_ms = earliest_ms
        self.latest_ms = latest_ms


class CarError(SyncError):
    """A CAR file that is malformed, oversized, or holds a block that is not what its CID says."""


class TransportError(SyncError):
    """The peer could not be reached, or it answered outside the protocol."""


class SlowTransferError(TransportError):
    """An answer arrived slower than the client's minimum rate: `got` bytes in `elapsed_s`."""

    def __init__(self, message: str, *, got: int, elapsed_s: float, min_rate: int) -> None:
        super().__init__(f"{message}: {got} bytes in {elapsed_s:.1f} s, below {min_rate} bytes/s")
        self.got = got
        self.elapsed_s = elapsed_s
        self.min_rate = min_rate


class SyncTimeoutError(SyncError):
    """The sync was still running when its overall deadline of `timeout_s` passed."""

    def __init__(self, message: str, *, timeout_s: float) -> None:
        super().__init__(message)
        self.timeout_s = timeout_s


class PeerMisbehavedError(SyncError):
    """The peer's answer is well-formed but false; `error` is the record check it failed, if any.

    Raised for a record whose bytes do not hash to the CID asked for or announced, or that
    do not decode as a valid record, or that belongs to another conversation, and for a
    claimed head that is an ancestor of another head.
    """

    def __init__(self, message: str, *, cid: object = None, error: ConvgraphError | None = None) -> None:
        super().__init__(message, cid=cid)
        self.error = error


class UnconfirmedStoreError(SyncError):
    """The peer reported record `cid` stored, but its receipt does not name it
    (docs/integrity.md §3): the record is not confirmed, and the session does not converge."""

    def __init__(self, message: str, *, cid: object, peer: str) -> None:
        super().__init__(message, cid=cid)
        self.peer = peer


class PeerKeyChangedError(SyncError):
    """The server at `url` answers with key `got`, not the key `pinned` it first answered
    with (docs/integrity.md §9); `convgraph sync --accept-new-key` takes the new one."""

    def __init__(self, message: str, *, url: str, pinned: str, got: str) -> None:
        super().__init__(message)
        self.url, self.pinned, self.got = url, pinned, got


class AuthError(SyncError):
    """The sync server refused the request; `reason` says why in the server's words."""

    status = 400

    def __init__(self, message: str, *, reason: str = "", cid: object = None) -> None:
        super().__init__(message, cid=cid)
        self.reason = reason or message


class UnauthenticatedError(AuthError):
    """No valid request signature, a stale timestamp or a replayed nonce (HTTP 401)."""

    status = 401


class ForbiddenError(AuthError):
    """The signature is valid but the key has no access to what it asked (HTTP 403).

    In a rooted conversation the refusal cites its authority projection (docs/authority.md §9):
    `conv` names it, `capability` is what the key lacks, and `blocked_by` the CIDs (text) of the
    revocations that cut its grants, empty when it never had one. `hint` names the server
    configuration (`serve --allow` rule) that would admit the request, when one would.
    """

    status = 403

    def __init__(
        self, message: str, *, reason: str = "", cid: object = None, conv: str | None = None,
        capability: str = "", blocked_by: tuple[str, ...] = (), hint: str = "",
    ) -> None:
        super().__init__(message, reason=reason, cid=cid)
        self.conv = conv
        self.capability = capability
        self.blocked_by = blocked_by
        self.hint = hint


class ServerBusyError(AuthError):
    """The server refused the request rather than exceed one of its bounds (HTTP 503).

    `limit` is the bound that was full; nothing of the request was acted on.
    """

    status = 503

    def __init__(self, message: str, *, limit: int, reason: str = "") -> None:
        super().__init__(message, reason=reason)
        self.limit = limit


class NonceLogFullError(ServerBusyError):
    """The nonce log holds `limit` unexpired nonces and forgets none of them early.

    Forgetting one would make its request replayable, so a new request is refused instead.
    """

    def __init__(self, *, limit: int) -> None:
        super().__init__(
            "too many requests in the replay window", limit=limit,
            reason=f"the server holds {limit} unexpired request nonces; retry later",
        )


_RULES: dict[type[ConvgraphError], str] = {
    DecodeError: "decode",
    NonCanonicalError: "canonical",
    SizeLimitError: "size",
    SchemaError: "schema",
    UnknownKindError: "kind",
    InvalidTextError: "text",
    VerificationError: "verification",
    CidMismatchError: "cid",
    SignatureError: "signature",
    CoverError: "cover",
    CoverConflictError: "cover_conflict",
    UntrustedCheckpointError: "untrusted_checkpoint",
    CausalityError: "causality",
    ParentConversationError: "parent_conv",
    HlcOrderError: "hlc",
    SeqChainError: "seq",
    ParentRejectedError: "parent_rejected",
    GenesisError: "genesis",
    AuthorityError: "authority",
    ForgedMergeError: "forged_merge",
    FloatingDecisionError: "floating_decision",
    BranchOriginError: "branch_origin",
    RetractionTargetError: "retraction_target",
    LegacyConversationError: "legacy",
    MigrationError: "migration",
    AliasError: "alias",
    ProjectionError: "projection",
    RetentionRefusedError: "retention",
    CompactedError: "compacted",
    TurnIndexError: "turn_index",
    SnapshotError: "snapshot",
    NoUserTurnError: "no_user_turn",
    SyncError: "sync",
    ProtocolError: "protocol",
    RoundTripLimitError: "round_trips",
    CarError: "car",
    TransportError: "transport",
    SlowTransferError: "slow_transfer",
    SyncTimeoutError: "timeout",
    PeerMisbehavedError: "peer",
    AuthError: "auth",
    UnauthenticatedError: "unauthenticated",
    ForbiddenError: "forbidden",
    ServerBusyError: "busy",
    NonceLogFullError: "busy",
    BindError: "bind",
    AccessConfigError: "access_config",
    IntegrityError: "integrity",
    StatementError: "statement",
    EvidenceError: "evidence",
    NoteError: "note",
    WitnessRefusedError: "witness",
    UnwitnessedError: "unwitnessed",
    WitnessConfigError: "witness_config",
    PatchApplyError: "patch_apply",
    NotADiffError: "not_a_diff",
}


class AdapterError(ConvgraphError):
    """An integration adapter (convgraph.integrations) was handed input it cannot store as
    turns: an item or message of a shape its framework does not define. `what` names it."""

    def __init__(self, message: str, *, what: object = None) -> None:
        super().__init__(message)
        self.what = what


class ImportSourceError(AdapterError):
    """A history to import (`convgraph.importers`) cannot be read as the source it was named as:
    no such file, table, thread or session, or a file of no format an importer knows.
    `source` names the file (or database) it was reading."""

    def __init__(self, message: str, *, source: object = None) -> None:
        super().__init__(message, what=source)
        self.source = source


class ImportConflictError(AdapterError):
    """The conversation an import would continue holds a history the source does not: a LangGraph
    thread with a checkpoint the source lacks or holds otherwise, or a session whose items are not
    the start of the source's. `conv` names it; nothing was written."""

    def __init__(self, message: str, *, conv: str) -> None:
        super().__init__(message, what=conv)
        self.conv = conv


class MissingExtraError(ConvgraphError, ImportError):
    """A feature needs an optional extra that is not installed (`pip install 'convgraph[EXTRA]'`).

    Also an `ImportError`, so `except ImportError` around an optional import still catches it;
    `name` is the module that could not be imported.
    """

    def __init__(self, extra: str, feature: str, *, module: str | None = None) -> None:
        missing = f" ({module} is not installed)" if module else ""
        super().__init__(f"{feature} needs the optional '{extra}' dependencies{missing}: "
                         f"pip install 'convgraph[{extra}]'")
        self.extra = extra
        self.name = module


_RULES[MissingExtraError] = "missing_extra"


class NoReplicaError(ConvgraphError):
    """A directory that holds no replica, where one was expected: only `convgraph init` (or
    `Replica.open(path)`, which creates) makes one, so a mistyped `--home` makes nothing.
    `home` is the directory."""

    def __init__(self, message: str, *, home: str) -> None:
        super().__init__(message)
        self.home = home


class MissingKeyError(KeyFileError):
    """A replica whose store is there but whose actor key is gone. It is never replaced on its
    own: a new key is a new author, who owns none of the old key's conversations. `path` is
    the key file."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class UnusableStoreError(StoreCorruptError):
    """A replica database file that is empty (0 bytes) or not a convgraph SQLite store; it is
    never replaced on its own, since it may be the only copy. `path` is the file."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class UnknownConversationError(NotFoundError):
    """A conversation the replica holds no record of, where one that exists was expected.
    `conv` is what was asked for, `known` the conversations held (a reader picks one)."""

    def __init__(self, message: str, *, conv: str, known: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.conv = conv
        self.known = known


class ForgottenConversationError(ConvgraphError):
    """A record of a conversation this replica forgot (`Replica.forget`): it is neither stored
    nor written, so sync cannot bring the conversation back. `conv` is the conversation, `cid`
    the record (its rule in an ingest or sync report is `forgotten`)."""

    def __init__(self, message: str, *, conv: str, cid: object = None) -> None:
        super().__init__(message, cid=cid)
        self.conv = conv


_RULES[ForgottenConversationError] = "forgotten"


class _AmbiguousError(NotFoundError):
    """A short form (`prefix`) that more than one thing matches; `candidates` lists them whole,
    so the reader can give more characters."""

    def __init__(self, message: str, *, prefix: str, candidates: tuple[str, ...]) -> None:
        super().__init__(message)
        self.prefix = prefix
        self.candidates = candidates


class AmbiguousCidError(_AmbiguousError):
    """A short CID that more than one stored record's CID matches (candidates in text form)."""


class AmbiguousActorError(_AmbiguousError):
    """A short actor id that more than one key known to the replica matches (whole ids)."""


class AmbiguousConversationError(_AmbiguousError):
    """A short conversation id that more than one conversation held here matches (whole ids)."""


class ArtifactError(ConvgraphError):
    """An artifact (docs/format.md §17) could not be stored, read or trusted; `cid` names the
    block concerned."""

    def __str__(self) -> str:
        return self.message if self._cid is None else f"{self.message} (artifact {self._cid})"


class ArtifactTooLargeError(ArtifactError):
    """An artifact over the replica's size limit; nothing of it is stored. `size` is how many
    bytes had been read when the limit was crossed."""

    def __init__(self, message: str, *, size: int) -> None:
        super().__init__(message)
        self.size = size


class ArtifactCorruptError(ArtifactError, VerificationError):
    """Block bytes that do not hash to the CID they came under, or a chunk of the wrong
    length: refused on the way in, reported (never returned) on the way out."""


class ArtifactMissingError(ArtifactError, NotFoundError):
    """A block of the artifact is not held (yet): sync may still bring it."""


class ManifestError(ArtifactError, DecodeError):
    """A block under a dag-cbor artifact CID that is not a §17 chunk manifest."""


_RULES[ArtifactTooLargeError] = "artifact_size"
_RULES[ArtifactCorruptError] = "artifact_hash"
_RULES[ArtifactMissingError] = "artifact_missing"
_RULES[ManifestError] = "manifest"


class WorkingTreeError(ConvgraphError):
    """Paths a `code_snapshot` cannot be made of: one that does not exist, lies outside the
    snapshot's root, or a set of paths that holds no readable regular file."""


class WrongTargetError(ConvgraphError):
    """A review, decision request or decision naming a record that is not held in its
    conversation or is not of a kind it can be about; `cid` names the record named."""


class ChoiceError(ConvgraphError):
    """A decision whose choice is not one of its request's `options`; `cid` names the request."""


_RULES[WorkingTreeError] = "working_tree"
_RULES[WrongTargetError] = "wrong_target"
_RULES[ChoiceError] = "choice"


class ArtifactScopeError(ArtifactError):
    """A block a peer sent (by sync or in a CAR file) that no record of its conversation names,
    nor any manifest those records name: refused, nothing stored (docs/sync.md, Artifacts)."""


_RULES[ArtifactScopeError] = "artifact_scope"
