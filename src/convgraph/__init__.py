"""convgraph: AI-agent conversations as a signed, content-addressed causal DAG.

    >>> from convgraph import ManualClock, Replica, is_rooted
    >>> a = Replica.in_memory(clock=ManualClock())
    >>> conv = a.create("hello")
    >>> is_rooted(conv)
    True
    >>> first = a.say(conv, "user", "hello")
    >>> b = Replica.in_memory(clock=ManualClock())
    >>> len(b.ingest([r.data for r in a.records(conv)]).accepted)
    2
    >>> b.heads(conv) == [first.cid]
    True
"""

from convgraph.adoption import Compaction, compaction_of
from convgraph.artifacts.claims import ClaimCheck, ClaimStatus, check_claim
from convgraph.artifacts.diff import apply_unified_diff, make_unified_diff
from convgraph.core.cid import CID
from convgraph.core.codec import decode, encode
from convgraph.core.hlc import Clock, Hlc, ManualClock, system_clock
from convgraph.core.keys import SigningKey, actor_text, fingerprint, load_key, save_key, verify
from convgraph.core.kinds import KINDS, check_payload
from convgraph.core.record import (
    SIGNING_DOMAIN,
    Limits,
    Record,
    RecordMeta,
    decode_record,
    sign_record,
    signing_bytes,
)
from convgraph.core.rooted import conv_id, is_rooted
from convgraph.core.validation import check_causality
from convgraph.errors import (
    AccessConfigError,
    AdapterError,
    AliasError,
    AmbiguousCidError,
    AuthError,
    BindError,
    CarError,
    CausalityError,
    ChoiceError,
    CidMismatchError,
    CompactedError,
    ConvgraphError,
    CoverConflictError,
    CoverError,
    DecodeError,
    EvidenceError,
    ForbiddenError,
    GenesisError,
    HlcOrderError,
    ImportSourceError,
    IntegrityError,
    InvalidTextError,
    KeyFileError,
    LegacyConversationError,
    MigrationError,
    MissingExtraError,
    MissingKeyError,
    NonCanonicalError,
    NonceLogFullError,
    NoReplicaError,
    NotFoundError,
    NoUserTurnError,
    ParentConversationError,
    ParentRejectedError,
    PatchApplyError,
    PeerKeyChangedError,
    PeerMisbehavedError,
    ProjectionError,
    ProtocolError,
    RetentionRefusedError,
    RoundTripLimitError,
    SchemaError,
    SeqChainError,
    ServerBusyError,
    SignatureError,
    SizeLimitError,
    SlowTransferError,
    SnapshotError,
    StaleStatementError,
    StatementError,
    StoreBusyError,
    StoreCorruptError,
    StoreError,
    StoreSchemaError,
    SyncError,
    SyncTimeoutError,
    TransportError,
    TurnIndexError,
    UnauthenticatedError,
    UnconfirmedStoreError,
    UnknownConversationError,
    UnknownKindError,
    UntrustedCheckpointError,
    UnusableStoreError,
    UnwitnessedError,
    VerificationError,
    WitnessConfigError,
    WitnessRefusedError,
    WorkingTreeError,
    WrongTargetError,
)
from convgraph.graph import (
    Closure,
    ancestors,
    canonical_order,
    closure,
    extends,
    heads,
    is_ancestor,
    missing_ancestors,
)
from convgraph.importers import ImportReport, Unmapped, import_jsonl, import_langgraph, import_openai_agents
from convgraph.ingest import IngestReport, Rejection
from convgraph.integrity.consistency import Verdict
from convgraph.integrity.evidence import Proof, verify_bundle
from convgraph.integrity.findings import FINDING_KINDS, Finding
from convgraph.integrity.statement import Statement, decode_statement, sign_statement
from convgraph.migration import Migration, migrate
from convgraph.projections.message import Message
from convgraph.projections.repair import repair
from convgraph.projections.request import check_request, to_request
from convgraph.projections.resume import PROVIDERS, to_provider
from convgraph.projections.retention import LastN
from convgraph.projections.state import ConvState, apply, fold, restore, snapshot
from convgraph.projections.surfaces import SURFACES, RouteStats, Surface
from convgraph.projections.transcript import transcript, transcript_bytes, transcript_cid
from convgraph.projections.turn import DEFAULT_CONVERSATION, Role, ToolCall, Turn, turn_of
from convgraph.replica import Config, Draft, Replica, resume
from convgraph.replica_verify import VerifyReport
from convgraph.store.base import Pending, QuarantineBounds, Store, WriteSet
from convgraph.store.memory import MemoryStore
from convgraph.store.sqlite import SqliteStore
from convgraph.sync.car import OtherBlock, read_car, write_car
from convgraph.sync.deadline import Deadline
from convgraph.sync.http import HttpRemote
from convgraph.sync.initiator import ConvReport, Initiator, Remote, SyncReport, synchronize
from convgraph.sync.local import sync_replicas
from convgraph.sync.peer import AdoptionPolicy, ReplicaPeer, trusting
from convgraph.sync.reconcile import Outcome, SyncPeer
from convgraph.sync.responder import Responder
from convgraph.sync.wire import Fate, Reported, WireLimits
from convgraph.witness_policy import Witness, WitnessPolicy
from convgraph.witnessing import SessionVerdict

__version__ = "0.1.0"

__all__ = [
    "AccessConfigError",
    "AdapterError",
    "AdoptionPolicy",
    "AliasError",
    "AmbiguousCidError",
    "AuthError",
    "BindError",
    "CID",
    "CarError",
    "CausalityError",
    "ChoiceError",
    "CidMismatchError",
    "ClaimCheck",
    "ClaimStatus",
    "Clock",
    "Closure",
    "CompactedError",
    "Compaction",
    "Config",
    "ConvReport",
    "ConvState",
    "ConvgraphError",
    "CoverConflictError",
    "CoverError",
    "DEFAULT_CONVERSATION",
    "Deadline",
    "DecodeError",
    "Draft",
    "EvidenceError",
    "FINDING_KINDS",
    "Fate",
    "Finding",
    "ForbiddenError",
    "GenesisError",
    "Hlc",
    "HlcOrderError",
    "HttpRemote",
    "ImportReport",
    "ImportSourceError",
    "IngestReport",
    "Initiator",
    "IntegrityError",
    "InvalidTextError",
    "KINDS",
    "KeyFileError",
    "LastN",
    "LegacyConversationError",
    "Limits",
    "ManualClock",
    "MemoryStore",
    "Message",
    "Migration",
    "MigrationError",
    "MissingExtraError",
    "MissingKeyError",
    "NoReplicaError",
    "NoUserTurnError",
    "NonCanonicalError",
    "NonceLogFullError",
    "NotFoundError",
    "OtherBlock",
    "Outcome",
    "PROVIDERS",
    "ParentConversationError",
    "ParentRejectedError",
    "PatchApplyError",
    "PeerKeyChangedError",
    "PeerMisbehavedError",
    "Pending",
    "ProjectionError",
    "Proof",
    "ProtocolError",
    "QuarantineBounds",
    "Record",
    "RecordMeta",
    "Rejection",
    "Remote",
    "Replica",
    "ReplicaPeer",
    "Reported",
    "Responder",
    "RetentionRefusedError",
    "Role",
    "RoundTripLimitError",
    "RouteStats",
    "SIGNING_DOMAIN",
    "SURFACES",
    "SchemaError",
    "SeqChainError",
    "ServerBusyError",
    "SessionVerdict",
    "SignatureError",
    "SigningKey",
    "SizeLimitError",
    "SlowTransferError",
    "SnapshotError",
    "SqliteStore",
    "StaleStatementError",
    "Statement",
    "StatementError",
    "Store",
    "StoreBusyError",
    "StoreCorruptError",
    "StoreError",
    "StoreSchemaError",
    "Surface",
    "SyncError",
    "SyncPeer",
    "SyncReport",
    "SyncTimeoutError",
    "ToolCall",
    "TransportError",
    "Turn",
    "TurnIndexError",
    "UnauthenticatedError",
    "UnconfirmedStoreError",
    "UnknownConversationError",
    "UnknownKindError",
    "Unmapped",
    "UntrustedCheckpointError",
    "UnusableStoreError",
    "UnwitnessedError",
    "Verdict",
    "VerificationError",
    "VerifyReport",
    "WireLimits",
    "Witness",
    "WitnessConfigError",
    "WitnessPolicy",
    "WitnessRefusedError",
    "WorkingTreeError",
    "WriteSet",
    "WrongTargetError",
    "actor_text",
    "ancestors",
    "apply",
    "apply_unified_diff",
    "canonical_order",
    "check_causality",
    "check_claim",
    "check_payload",
    "check_request",
    "closure",
    "compaction_of",
    "conv_id",
    "decode",
    "decode_record",
    "decode_statement",
    "encode",
    "extends",
    "fingerprint",
    "fold",
    "heads",
    "import_jsonl",
    "import_langgraph",
    "import_openai_agents",
    "is_ancestor",
    "is_rooted",
    "load_key",
    "make_unified_diff",
    "migrate",
    "missing_ancestors",
    "read_car",
    "repair",
    "restore",
    "resume",
    "save_key",
    "sign_record",
    "sign_statement",
    "signing_bytes",
    "snapshot",
    "sync_replicas",
    "synchronize",
    "system_clock",
    "to_provider",
    "to_request",
    "transcript",
    "transcript_bytes",
    "transcript_cid",
    "trusting",
    "turn_of",
    "verify",
    "verify_bundle",
    "write_car",
]
