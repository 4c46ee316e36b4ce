"""The report part over a real server: every pushed record's fate, by its real digest.

A uvicorn server on 127.0.0.1 in front of a SQLite replica on a manual clock gets pushes
whose records end in each fate; the initiator's statement then says why a session did not
converge, never offers a rejected record again and holds a held one back for a later run.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from convgraph import ManualClock, Replica, SigningKey, errors
from convgraph.core.cid import CID
from convgraph.core.hlc import DEFAULT_MAX_DRIFT_MS, Hlc
from convgraph.core.keys import actor_text
from convgraph.core.record import Record, sign_record
from convgraph.replica.ingest import IngestReport
from convgraph.server.access import Access
from convgraph.server.app import ServerConfig, create_app
from convgraph.store.rows import Pending
from convgraph.sync import wire
from convgraph.sync.fates import fates, refused
from convgraph.sync.http import HttpRemote
from convgraph.sync.initiator import synchronize
from convgraph.sync.peer import ReplicaPeer
from convgraph.sync.reconcile import Outcome
from convgraph.sync.wire import Fate, Reported
from server.live import LiveServer

WRITER, READER = SigningKey(bytes([1]) * 32), SigningKey(bytes([2]) * 32)
CLOCK = ManualClock()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Replica, str]]:
    replica = Replica.open(tmp_path / "server", clock=CLOCK)
    access = Access.from_rules([f"{actor_text(WRITER.public)}=c", f"{actor_text(READER.public)}=c:read"])
    with LiveServer(create_app(replica, ServerConfig(access=access))) as live:
        yield replica, live.url
    replica.close()


def _say(seq: int, wall: int, parents: list[Record], text: str) -> Record:
    return sign_record(WRITER, conv="c", seq=seq, hlc=Hlc(wall, 0), parents=[p.cid for p in parents],
                       kind="user_message", payload={"content": text})


def _push(url: str, records: list[bytes], key: SigningKey = WRITER) -> tuple[Reported, ...]:
    message = wire.Message(wire.Kind.CONTINUE, os.urandom(8), (wire.Section("c", records=tuple(records)),))
    with HttpRemote(url, key) as remote:
        reply = wire.decode(remote.exchange(wire.encode(message)))
    assert reply.sections[0].report is not None
    return reply.sections[0].report


def test_every_fate_is_reported_with_the_records_real_digest(served: tuple[Replica, str]) -> None:
    server, url = served
    now = CLOCK()
    stored = _say(1, now - 10, [], "already there")
    parent = _say(2, now - 5, [stored], "the parent, sent last")
    child = _say(3, now - 1, [parent], "waits for its parent")
    future = _say(4, now + DEFAULT_MAX_DRIFT_MS + 3_600_000, [child], "an hour ahead")
    forged = bytearray(_say(5, now, [stored], "forged").data)
    forged[-5] ^= 1
    huge = b"\xa1" + os.urandom((1 << 20) + 10)
    server.ingest([stored.data])

    first = _push(url, [child.data, stored.data, bytes(forged), huge, future.data, child.data])
    assert first == (
        Reported(Fate.QUARANTINED, child.cid.digest, parents=(parent.cid.digest,)),
        Reported(Fate.DUPLICATE, stored.cid.digest),
        Reported(Fate.REJECTED, hashlib.sha256(forged).digest(), rule=first[2].rule),
        Reported(Fate.REJECTED_AT, index=3, rule="size"),
        # its parent (child) is not stored either, but the clock is checked first
        Reported(Fate.HELD, future.cid.digest, retry_ms=future.hlc.wall_ms - DEFAULT_MAX_DRIFT_MS),
        Reported(Fate.DUPLICATE, child.cid.digest),
    )
    assert first[2].rule in {"signature", "schema"}

    second = _push(url, [parent.data])
    assert second == (Reported(Fate.ACCEPTED, parent.cid.digest), Reported(Fate.RELEASED, child.cid.digest))


def test_a_read_only_key_learns_which_records_were_refused(served: tuple[Replica, str]) -> None:
    _, url = served
    record = _say(1, CLOCK(), [], "not yours to write")
    assert _push(url, [record.data], READER) == (Reported(Fate.REJECTED, record.cid.digest, rule="forbidden"),)


def _sync(replica: Replica, url: str) -> object:
    with HttpRemote(url, replica.key) as remote:
        return synchronize(ReplicaPeer(replica), remote, ["c"], salts=lambda: os.urandom(8), max_sessions=3)


def test_the_statement_says_why_and_a_held_record_waits_for_a_later_run(
    served: tuple[Replica, str],
) -> None:
    server, url = served
    ahead = ManualClock(CLOCK() + 2 * 3_600_000)  # a client whose clock runs two hours ahead
    client = Replica.in_memory(WRITER, clock=ahead)
    client.say("c", "user", "from the future")
    sent: list[int] = []
    with HttpRemote(url, WRITER) as remote:
        def counting(message: bytes) -> bytes:
            sent.append(sum(len(s.records) for s in wire.decode(message).sections))
            return remote.exchange(message)

        report = synchronize(ReplicaPeer(client), counting, ["c"], salts=lambda: os.urandom(8), max_sessions=3)
    conv = report.convs["c"]
    assert not report.converged and sum(sent) == 1  # held once, never pushed again in this run
    [held] = conv.waiting_there.values()
    assert held.fate is Fate.HELD and held.retry_ms == CLOCK() + 2 * 3_600_000 - DEFAULT_MAX_DRIFT_MS
    assert conv.statement().startswith("not converged: 1 record held by the peer")

    CLOCK.advance(2 * 3_600_000)  # the server's clock catches up: the next run offers it again
    again = _sync(client, url)
    assert again.converged and again.convs["c"].statement() == "converged"  # type: ignore[attr-defined]
    assert server.store.count("c") == 1


def test_the_specs_closed_list_of_rules_is_every_rule_ingest_can_report() -> None:
    """A rule added to the record errors must be added to docs/sync.md's list, and no other."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "sync.md").read_text("utf-8")
    paragraph = doc[doc.index("**Rules** of REJECTED") :].split("\n\n")[0]
    listed = set(re.findall(r"`([a-z_]+)`", paragraph))
    families = (errors.DecodeError, errors.SchemaError, errors.VerificationError, errors.CausalityError)
    record_errors = [c for c in vars(errors).values()
                     if isinstance(c, type) and issubclass(c, families)
                     and not issubclass(c, errors.ArtifactError)]  # blocks' rules: *Artifacts*, not a record's
    # `rule` reads only the type: an instance made without __init__ answers it; a base's
    # refusals (docs/sync.md, *Compacted history*) add the snapshot's; a replica's own refusals
    # (a conversation not covered, one it forgot) add theirs
    replica_rules = {"forbidden", errors.ForgottenConversationError.__new__(errors.ForgottenConversationError).rule}
    assert listed == {c.__new__(c).rule for c in [*record_errors, errors.SnapshotError]} | replica_rules


def test_a_release_is_reported_in_its_own_conversation_only(served: tuple[Replica, str]) -> None:
    server, url = served
    now = CLOCK()
    ahead = now + DEFAULT_MAX_DRIFT_MS + 1_000
    held_c = _say(1, ahead, [], "held in c")
    held_d = sign_record(WRITER, conv="d", seq=1, hlc=Hlc(ahead, 0), parents=[], kind="user_message",
                         payload={"content": "held in d"})
    assert _push(url, [held_c.data]) == (Reported(Fate.HELD, held_c.cid.digest, retry_ms=now + 1_000),)
    assert server.ingest([held_d.data]).held == [held_d.cid]
    CLOCK.advance(2_000)
    other = sign_record(SigningKey(bytes([9]) * 32), conv="c", seq=1, hlc=Hlc(CLOCK(), 0), parents=[],
                        kind="user_message", payload={"content": "wakes the quarantine"})
    report = _push(url, [other.data])
    assert report == (Reported(Fate.ACCEPTED, other.cid.digest), Reported(Fate.RELEASED, held_c.cid.digest))
    assert server.store.count("d") == 1  # released too, but not this key's to hear of


# ---------------------------------------------------------------- the pure functions, case by case


def _cid(n: int) -> CID:
    return CID.of_record(b"record %d" % n)


def test_each_pushed_record_gets_where_it_ended_and_a_release_overrides_its_copy() -> None:
    c = [_cid(i) for i in range(5)]
    waiting = {c[3].digest: Pending(c[3], b"", "clock", wall_ms=5, missing=()),
               c[4].digest: Pending(c[4], b"", "parents", wall_ms=5, missing=(c[0],))}
    # c[1] waited in the quarantine already (its pushed copy is a duplicate) and c[0] released it
    report = IngestReport(accepted=[c[0], c[1]], duplicates=[c[1]], released=[c[1]], evicted=[c[2]])
    assert fates([x.digest for x in c], report, waiting, [], max_drift_ms=60_000) == (
        Reported(Fate.ACCEPTED, c[0].digest), Reported(Fate.RELEASED, c[1].digest),
        Reported(Fate.EVICTED, c[2].digest),
        Reported(Fate.HELD, c[3].digest, retry_ms=0),  # never before the epoch
        Reported(Fate.QUARANTINED, c[4].digest, parents=(c[0].digest,)),
    )


@pytest.mark.parametrize(("limit", "released"), [(5, 3), (4, 2), (2, 0), (1, 0)])
def test_releases_elsewhere_fill_the_report_up_to_its_limit_and_never_displace_a_pushed_record(
    limit: int, released: int
) -> None:
    pushed, elsewhere = [_cid(1), _cid(2)], [_cid(3), _cid(4), _cid(5)]
    entries = fates([c.digest for c in pushed], IngestReport(accepted=pushed), {}, elsewhere,
                    max_drift_ms=60_000, limit=limit)
    assert entries == (*(Reported(Fate.ACCEPTED, c.digest) for c in pushed),
                       *(Reported(Fate.RELEASED, c.digest) for c in elsewhere[:released]))


def test_records_refused_for_one_rule_are_named_by_digest_or_by_place_past_the_size_limit() -> None:
    small, exact, over = b"x" * 10, b"y" * 20, b"z" * 21
    assert refused([small, over, exact], "forbidden", max_bytes=20) == (
        Reported(Fate.REJECTED, hashlib.sha256(small).digest(), rule="forbidden"),
        Reported(Fate.REJECTED_AT, index=1, rule="forbidden"),  # never hashed
        Reported(Fate.REJECTED, hashlib.sha256(exact).digest(), rule="forbidden"),
    )


class _Counting(ReplicaPeer):
    """A peer that notes whether each ingest was asked for a report."""

    def __init__(self, replica: Replica) -> None:
        super().__init__(replica)
        self.asked: list[bool] = []

    def ingest(self, conv: str, records: Sequence[bytes], *, report: bool = True) -> Outcome:
        self.asked.append(report)
        return super().ingest(conv, records, report=report)


def test_an_initiator_builds_no_report_it_would_never_send(served: tuple[Replica, str]) -> None:
    """The report's hashing and quarantine look-ups cost every pull of bench/load.py for nothing."""
    server, url = served
    first = _say(1, CLOCK() - 10, [], "on the server")
    server.ingest([first.data])
    peer = _Counting(Replica.in_memory(clock=CLOCK))
    with HttpRemote(url, READER) as remote:
        synchronize(peer, remote.exchange, ["c"], salts=lambda: os.urandom(8))
    assert peer.asked and not any(peer.asked)
    assert [r.cid for r in peer.replica.records("c")] == [first.cid]
    again = ReplicaPeer(Replica.in_memory(clock=CLOCK))
    quiet, full = again.ingest("c", [first.data], report=False), again.ingest("c", [first.data])
    assert quiet.report == () and quiet.accepted == [first.cid.digest]
    assert full.report == (Reported(Fate.DUPLICATE, first.cid.digest),)  # a responder still gets its report
