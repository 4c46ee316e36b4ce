"""convgraph: AI-agent conversations as a signed, content-addressed causal DAG.

    >>> from convgraph import ManualClock, Replica
    >>> a = Replica.in_memory(clock=ManualClock())
    >>> first = a.write("default", "user_message", {"content": "hello"})
    >>> b = Replica.in_memory(clock=ManualClock())
    >>> b.ingest([first.data]).accepted == [first.cid]
    True
    >>> b.heads("default") == [first.cid]
    True
"""

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
from convgraph.core.validation import check_causality
from convgraph.errors import (
    CausalityError,
    CidMismatchError,
    ConvgraphError,
    DecodeError,
    HlcOrderError,
    KeyFileError,
    NonCanonicalError,
    NotFoundError,
    ParentConversationError,
    ParentRejectedError,
    SchemaError,
    SeqChainError,
    SignatureError,
    SizeLimitError,
    StoreBusyError,
    StoreCorruptError,
    StoreError,
    StoreSchemaError,
    UnknownKindError,
    VerificationError,
)
from convgraph.graph import (
    ancestors,
    canonical_order,
    extends,
    heads,
    is_ancestor,
    missing_ancestors,
)
from convgraph.ingest import IngestReport, Rejection
from convgraph.replica import Config, Draft, Replica, VerifyReport
from convgraph.store.base import Pending, QuarantineBounds, Store, WriteSet
from convgraph.store.memory import MemoryStore
from convgraph.store.sqlite import SqliteStore

__version__ = "0.1.0"

__all__ = [
    "CID",
    "CausalityError",
    "CidMismatchError",
    "Clock",
    "Config",
    "ConvgraphError",
    "DecodeError",
    "Draft",
    "Hlc",
    "HlcOrderError",
    "IngestReport",
    "KINDS",
    "KeyFileError",
    "Limits",
    "ManualClock",
    "MemoryStore",
    "NonCanonicalError",
    "NotFoundError",
    "ParentConversationError",
    "ParentRejectedError",
    "Pending",
    "QuarantineBounds",
    "Record",
    "RecordMeta",
    "Rejection",
    "Replica",
    "SIGNING_DOMAIN",
    "SchemaError",
    "SeqChainError",
    "SignatureError",
    "SigningKey",
    "SizeLimitError",
    "SqliteStore",
    "Store",
    "StoreBusyError",
    "StoreCorruptError",
    "StoreError",
    "StoreSchemaError",
    "UnknownKindError",
    "VerificationError",
    "VerifyReport",
    "WriteSet",
    "actor_text",
    "ancestors",
    "canonical_order",
    "check_causality",
    "check_payload",
    "decode",
    "decode_record",
    "encode",
    "extends",
    "fingerprint",
    "heads",
    "is_ancestor",
    "load_key",
    "missing_ancestors",
    "save_key",
    "sign_record",
    "signing_bytes",
    "system_clock",
    "verify",
]
