"""The file transport: sync messages as files in a shared folder (a network share, a
synced directory, a mounted volume), answered by a peer that watches it.

The initiator writes each message to `requests/<id>.msg` (through a temp file and a
rename, so a reader never sees half of one) and waits for `replies/<id>.msg`;
`answer_spool` takes requests in order of arrival, runs them through a `Responder` and
writes the replies the same way. A request that breaks the protocol gets
`replies/<id>.err` with the reason. The folder's permissions are the access control:
whoever may write it may sync. Invariant: every request is answered at most once, and
no file is ever read before it is complete.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path

from convgraph.core import suggestions
from convgraph.errors import ConvgraphError, ProtocolError, TransportError
from convgraph.sync.deadline import Deadline

_REQ, _REP = "requests", "replies"


def _write(path: Path, data: bytes) -> None:
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    temp.write_bytes(data)
    os.replace(temp, path)


def prepare(root: Path) -> None:
    """Create the spool's folders if absent."""
    for sub in (_REQ, _REP):
        (root / sub).mkdir(parents=True, exist_ok=True)


class SpoolTransport:
    """A `Remote` that posts each message into the spool at `root` and waits for its reply."""

    def __init__(self, root: Path, *, timeout_s: float = 60.0, poll_s: float = 0.005) -> None:
        self.root, self.timeout_s, self.poll_s = Path(root), timeout_s, poll_s
        if not (self.root / _REQ).is_dir():
            raise TransportError(f"{root} is not a sync spool (no {_REQ}/ folder)")

    def __call__(self, message: bytes) -> bytes:
        return self.exchange(message)

    def exchange(self, message: bytes, *, deadline: Deadline | None = None) -> bytes:
        """Post `message`; its reply, waited for until `deadline` when there is one (the sync's own,
        which then names the time it waited), else for `timeout_s`.

        The whole wait goes to the one message: the peer either answers the spool or is not
        there, and starting the session again (a `TransportError`) would wait as long again,
        each time behind a message that named only the one wait."""
        ident = f"{time.time_ns():020d}-{secrets.token_hex(6)}"
        reply, error = self.root / _REP / f"{ident}.msg", self.root / _REP / f"{ident}.err"
        try:
            _write(self.root / _REQ / f"{ident}.msg", message)
        except OSError as exc:
            raise TransportError(f"cannot write to the spool {self.root}: {exc}") from exc
        wait = self.timeout_s if deadline is None else deadline.remaining()
        until = time.monotonic() + wait
        while time.monotonic() < until:
            for path, is_error in ((reply, False), (error, True)):
                if path.exists():
                    data = path.read_bytes()
                    path.unlink(missing_ok=True)
                    if is_error:
                        why = data.decode(errors="replace")
                        raise ProtocolError(f"the spool's peer refused the message: {why}")
                    return data
            time.sleep(self.poll_s)
        (self.root / _REQ / f"{ident}.msg").unlink(missing_ok=True)  # nobody took it: withdraw it
        serving = f"is a peer serving it? (`{suggestions.SERVE_SPOOL(root=self.root)}`)"
        if deadline is not None:
            deadline.check(f"no answer in the spool {self.root}: {serving}")
        raise TransportError(f"no answer in the spool {self.root} within {self.timeout_s:g} s: {serving}")


def answer_spool(
    receive: Callable[[bytes], bytes], root: Path, *, stop: threading.Event, poll_s: float = 0.005,
) -> int:
    """Answer requests in the spool until `stop` is set; returns how many were answered."""
    prepare(root)
    answered = 0
    while not stop.is_set():
        pending = sorted(p for p in (root / _REQ).glob("*.msg"))
        for path in pending:
            claimed = path.with_name(f".{path.name}.taken")
            try:
                os.rename(path, claimed)  # atomic: of two answerers, one wins the request
            except FileNotFoundError:  # withdrawn by its sender, or taken by another answerer
                continue
            data = claimed.read_bytes()
            claimed.unlink()
            try:
                _write(root / _REP / path.name, receive(data))
            except ConvgraphError as exc:
                _write(root / _REP / f"{path.stem}.err", str(exc).encode())
            answered += 1
        if not pending:
            stop.wait(poll_s)
    return answered
