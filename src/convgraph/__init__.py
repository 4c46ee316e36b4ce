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

import importlib as _importlib
from types import ModuleType as _ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers and the docs see; at run time `__getattr__` imports them
    from convgraph.artifacts import (
        CHUNK_SIZE,
        MAX_ARTIFACT_SIZE,
        MAX_CHUNKS,
        Manifest,
        artifact_links,
        decode_manifest,
        encode_manifest,
    )
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
        AmbiguousActorError,
        AmbiguousCidError,
        AmbiguousConversationError,
        ArtifactCorruptError,
        ArtifactError,
        ArtifactMissingError,
        ArtifactTooLargeError,
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
        ForgottenConversationError,
        GenesisError,
        HlcOrderError,
        ImportConflictError,
        ImportSourceError,
        IntegrityError,
        InvalidTextError,
        KeyFileError,
        LegacyConversationError,
        ManifestError,
        MigrationError,
        MissingExtraError,
        MissingKeyError,
        NonCanonicalError,
        NonceLogFullError,
        NoReplicaError,
        NotADiffError,
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
    from convgraph.importers import (
        ImportReport,
        ThreadImportReport,
        Unmapped,
        import_jsonl,
        import_langgraph,
        import_langgraph_thread,
        import_openai_agents,
        import_openai_agents_session,
    )
    from convgraph.integrity.consistency import Verdict
    from convgraph.integrity.evidence import Proof, verify_bundle
    from convgraph.integrity.findings import FINDING_KINDS, Finding
    from convgraph.integrity.statement import Statement, decode_statement, sign_statement
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
    from convgraph.replica.adoption import Compaction, compaction_of
    from convgraph.replica.ingest import IngestReport, Rejection
    from convgraph.replica.migration import Migration, migrate
    from convgraph.replica.verify import VerifyReport
    from convgraph.replica.witness_policy import Witness, WitnessPolicy
    from convgraph.replica.witnessing import SessionVerdict
    from convgraph.store.base import Store
    from convgraph.store.memory import MemoryStore
    from convgraph.store.rows import Pending, QuarantineBounds, WriteSet
    from convgraph.store.sqlite import SqliteStore
    from convgraph.sync.car import OtherBlock, read_car, write_car
    from convgraph.sync.deadline import Deadline
    from convgraph.sync.http import HttpRemote
    from convgraph.sync.initiator import ConvReport, Initiator, Remote, SyncReport, synchronize
    from convgraph.sync.local import sync_replicas
    from convgraph.sync.messages import Fate, Reported, WireLimits
    from convgraph.sync.peer import AdoptionPolicy, ReplicaPeer, trusting
    from convgraph.sync.reconcile import Outcome, SyncPeer
    from convgraph.sync.responder import Responder

# each public name and the module it comes from: imported on first use, so that `import
# convgraph` (and with it every `convgraph` command) pays only for what it touches
_EXPORTS: dict[str, tuple[str, ...]] = {
    "convgraph.replica.adoption": ("Compaction", "compaction_of"),
    "convgraph.artifacts": (
        "CHUNK_SIZE", "MAX_ARTIFACT_SIZE", "MAX_CHUNKS", "Manifest", "artifact_links", "decode_manifest",
        "encode_manifest",
    ),
    "convgraph.artifacts.claims": ("ClaimCheck", "ClaimStatus", "check_claim"),
    "convgraph.artifacts.diff": ("apply_unified_diff", "make_unified_diff"),
    "convgraph.core.cid": ("CID",),
    "convgraph.core.codec": ("decode", "encode"),
    "convgraph.core.hlc": ("Clock", "Hlc", "ManualClock", "system_clock"),
    "convgraph.core.keys": ("SigningKey", "actor_text", "fingerprint", "load_key", "save_key", "verify"),
    "convgraph.core.kinds": ("KINDS", "check_payload"),
    "convgraph.core.record": (
        "SIGNING_DOMAIN", "Limits", "Record", "RecordMeta", "decode_record", "sign_record",
        "signing_bytes",
    ),
    "convgraph.core.rooted": ("conv_id", "is_rooted"),
    "convgraph.core.validation": ("check_causality",),
    "convgraph.errors": (
        "AccessConfigError", "AdapterError", "AliasError", "AmbiguousActorError", "AmbiguousCidError",
        "AmbiguousConversationError", "ArtifactCorruptError",
        "ArtifactError", "ArtifactMissingError", "ArtifactTooLargeError", "AuthError", "BindError",
        "CarError", "CausalityError", "ChoiceError", "CidMismatchError", "CompactedError",
        "ConvgraphError", "CoverConflictError", "CoverError", "DecodeError", "EvidenceError",
        "ForbiddenError", "ForgottenConversationError", "GenesisError", "HlcOrderError",
        "ImportConflictError", "ImportSourceError", "IntegrityError", "InvalidTextError", "KeyFileError",
        "LegacyConversationError", "ManifestError", "MigrationError",
        "MissingExtraError", "MissingKeyError", "NonCanonicalError", "NonceLogFullError",
        "NoReplicaError", "NotADiffError", "NotFoundError", "NoUserTurnError", "ParentConversationError",
        "ParentRejectedError", "PatchApplyError", "PeerKeyChangedError", "PeerMisbehavedError",
        "ProjectionError", "ProtocolError", "RetentionRefusedError", "RoundTripLimitError", "SchemaError",
        "SeqChainError", "ServerBusyError", "SignatureError", "SizeLimitError", "SlowTransferError",
        "SnapshotError", "StaleStatementError", "StatementError", "StoreBusyError", "StoreCorruptError",
        "StoreError", "StoreSchemaError", "SyncError", "SyncTimeoutError", "TransportError",
        "TurnIndexError", "UnauthenticatedError", "UnconfirmedStoreError", "UnknownConversationError",
        "UnknownKindError", "UntrustedCheckpointError", "UnusableStoreError", "UnwitnessedError",
        "VerificationError", "WitnessConfigError", "WitnessRefusedError", "WorkingTreeError",
        "WrongTargetError",
    ),
    "convgraph.graph": (
        "Closure", "ancestors", "canonical_order", "closure", "extends", "heads", "is_ancestor",
        "missing_ancestors",
    ),
    "convgraph.importers": (
        "ImportReport", "ThreadImportReport", "Unmapped", "import_jsonl", "import_langgraph",
        "import_langgraph_thread", "import_openai_agents", "import_openai_agents_session",
    ),
    "convgraph.replica.ingest": ("IngestReport", "Rejection"),
    "convgraph.integrity.consistency": ("Verdict",),
    "convgraph.integrity.evidence": ("Proof", "verify_bundle"),
    "convgraph.integrity.findings": ("FINDING_KINDS", "Finding"),
    "convgraph.integrity.statement": ("Statement", "decode_statement", "sign_statement"),
    "convgraph.replica.migration": ("Migration", "migrate"),
    "convgraph.projections.message": ("Message",),
    "convgraph.projections.repair": ("repair",),
    "convgraph.projections.request": ("check_request", "to_request"),
    "convgraph.projections.resume": ("PROVIDERS", "to_provider"),
    "convgraph.projections.retention": ("LastN",),
    "convgraph.projections.state": ("ConvState", "apply", "fold", "restore", "snapshot"),
    "convgraph.projections.surfaces": ("SURFACES", "RouteStats", "Surface"),
    "convgraph.projections.transcript": ("transcript", "transcript_bytes", "transcript_cid"),
    "convgraph.projections.turn": ("DEFAULT_CONVERSATION", "Role", "ToolCall", "Turn", "turn_of"),
    "convgraph.replica": ("Config", "Draft", "Replica", "resume"),
    "convgraph.replica.verify": ("VerifyReport",),
    "convgraph.store.base": ("Store",),
    "convgraph.store.memory": ("MemoryStore",),
    "convgraph.store.rows": ("Pending", "QuarantineBounds", "WriteSet"),
    "convgraph.store.sqlite": ("SqliteStore",),
    "convgraph.sync.car": ("OtherBlock", "read_car", "write_car"),
    "convgraph.sync.deadline": ("Deadline",),
    "convgraph.sync.http": ("HttpRemote",),
    "convgraph.sync.initiator": ("ConvReport", "Initiator", "Remote", "SyncReport", "synchronize"),
    "convgraph.sync.local": ("sync_replicas",),
    "convgraph.sync.peer": ("AdoptionPolicy", "ReplicaPeer", "trusting"),
    "convgraph.sync.reconcile": ("Outcome", "SyncPeer"),
    "convgraph.sync.responder": ("Responder",),
    "convgraph.sync.messages": ("Fate", "Reported", "WireLimits"),
    "convgraph.replica.witness_policy": ("Witness", "WitnessPolicy"),
    "convgraph.replica.witnessing": ("SessionVerdict",),
}
_FROM = {name: module for module, names in _EXPORTS.items() for name in names}

__version__ = "0.1.0"

__all__ = [
    "AccessConfigError",
    "AdapterError",
    "AdoptionPolicy",
    "AliasError",
    "AmbiguousActorError",
    "AmbiguousCidError",
    "AmbiguousConversationError",
    "ArtifactCorruptError",
    "ArtifactError",
    "ArtifactMissingError",
    "ArtifactTooLargeError",
    "AuthError",
    "BindError",
    "CHUNK_SIZE",
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
    "ForgottenConversationError",
    "GenesisError",
    "Hlc",
    "HlcOrderError",
    "HttpRemote",
    "ImportConflictError",
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
    "MAX_ARTIFACT_SIZE",
    "MAX_CHUNKS",
    "Manifest",
    "ManifestError",
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
    "NotADiffError",
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
    "ThreadImportReport",
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
    "artifact_links",
    "canonical_order",
    "check_causality",
    "check_claim",
    "check_payload",
    "check_request",
    "closure",
    "compaction_of",
    "conv_id",
    "decode",
    "decode_manifest",
    "decode_record",
    "decode_statement",
    "encode",
    "encode_manifest",
    "extends",
    "fingerprint",
    "fold",
    "heads",
    "import_jsonl",
    "import_langgraph",
    "import_langgraph_thread",
    "import_openai_agents",
    "import_openai_agents_session",
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


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use and kept (PEP 562)."""
    module = _FROM.get(name)
    if module is None:  # AttributeError lets `from convgraph import submodule` import it
        raise AttributeError(f"module 'convgraph' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names, the dunders and the submodules imported so far (not this file's helpers)."""
    return sorted({*__all__, *(n for n, v in globals().items() if n.startswith("__")
                               or (isinstance(v, _ModuleType) and v.__name__.startswith("convgraph.")))})
