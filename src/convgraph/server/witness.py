"""A witness: a server that cosigns checkpoints that extend what it cosigned before (docs/integrity.md §7.4).

`convgraph serve --witness` gives the app a `Cosigner`. For each request it decides with
`integrity.checkpoints.decide_cosign` over the records its store holds, and cosigns with
`integrity.cosignature`. The checkpoint it last cosigned per conversation is kept in its
home (`witness/<sha-256 of the conversation>.json`, the record's bytes included), written
and fsynced before the answer leaves, under a lock file, so neither a restart nor a second
process on the same home lets it cosign a fork of what it signed. Invariant: it never
cosigns two checkpoints of one conversation neither of which extends the other.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

from convgraph.core.cid import CID
from convgraph.core.keys import SigningKey
from convgraph.core.record import Record, decode_record
from convgraph.errors import ConvgraphError, StoreError, WitnessRefusedError
from convgraph.integrity import cosignature as cosignature_
from convgraph.integrity import note
from convgraph.integrity.checkpoints import Checkpoint, decide_cosign
from convgraph.replica.checkpointing import ConvView
from convgraph.store.base import Store

WITNESS_DIR: Final = "witness"


class LastCosigned:
    """Per conversation, the checkpoint record this witness cosigned last, in files under `directory`."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._threads = threading.Lock()

    def _path(self, conv: str) -> Path:
        return self.directory / (hashlib.sha256(conv.encode("utf-8", "surrogatepass")).hexdigest() + ".json")

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the witness's one lock: the threads of this process, then other processes."""
        with self._threads, open(self.directory / ".lock", "a+b") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)

    def get(self, conv: str) -> Record | None:
        """The checkpoint last cosigned for `conv`, or None."""
        path = self._path(conv)
        try:
            body = json.loads(path.read_text(encoding="utf-8"))
            record = decode_record(base64.b64decode(body["record"]))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, ConvgraphError) as exc:
            # refusing every cosignature is safe; forgetting what was signed is not
            raise StoreError(f"the witness's record of its last cosignature, {path}, is unreadable: "
                             f"{exc}") from exc
        if record.conv != conv or record.kind != "checkpoint":
            raise StoreError(f"{path} holds no checkpoint of this conversation")
        return record

    def put(self, record: Record) -> None:
        """Make `record` the last cosigned of its conversation, durably, before returning."""
        body = {"conv": record.conv, "checkpoint": str(record.cid),
                "record": base64.b64encode(record.data).decode()}
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".last.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(body, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self._path(record.conv))
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        dir_fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)  # the rename itself survives a crash
        finally:
            os.close(dir_fd)


class Cosigner:
    """The witness: its key, key name, store and memory of what it cosigned."""

    def __init__(self, store: Store, key: SigningKey, last: LastCosigned, *, name: str | None = None,
                 clock_s: Callable[[], int]) -> None:
        self.store, self.key, self.last, self.clock_s = store, key, last, clock_s
        self.name = note.check_key_name(name) if name is not None else note.witness_key_name(key.public)

    def cosign(self, conv: str, cid: CID) -> dict[str, Any]:
        """The cosignature of checkpoint `cid` of `conv` as the route answers it, or
        `WitnessRefusedError` with the reason of §7.4."""
        with self.last.locked():
            view = ConvView(self.store, conv)
            record = view.record(cid)
            candidate = Checkpoint.of(record) if record is not None and record.kind == "checkpoint" else None
            held = self.last.get(conv)
            if candidate is not None:
                view.prefetch_past(candidate)
            last = Checkpoint.of(held) if held is not None else None
            decision = decide_cosign(candidate, last, view.lookup, view.fetch)
            if decision.refusal is not None or record is None:
                reason = decision.refusal.value if decision.refusal is not None else "unknown_checkpoint"
                raise WitnessRefusedError(f"the witness will not cosign {cid}: {decision.detail}",
                                          reason=reason, cid=cid)
            cosigned = cosignature_.cosign_checkpoint(self.key, record, self.clock_s(), self.name)
            self.last.put(record)  # durable before anyone sees the cosignature
        return {"cosignature": cosigned.line().line.rstrip("\n"), "name": cosigned.name,
                "key": cosigned.key.hex(), "time": cosigned.time}


def cosigner_for(home: Path, store: Store, key: SigningKey, *, name: str | None,
                 clock_s: Callable[[], int]) -> Cosigner:
    """The witness of a server whose home is `home`."""
    return Cosigner(store, key, LastCosigned(Path(home) / WITNESS_DIR), name=name, clock_s=clock_s)
