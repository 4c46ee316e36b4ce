"""A replica's memory of what its peers signed (docs/integrity.md §4-§6), end to end on real
stores: sessions remembered across a restart, findings whose bundles prove them, gossip
between two clients catching a split view, record equivocations found at ingest, and
compaction keeping every record a finding cites."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

import pg
from convgraph import Config, ManualClock, Record, Replica, SigningKey
from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.core.record import sign_record
from convgraph.errors import StaleStatementError
from convgraph.integrity import gossip as gossip_
from convgraph.integrity.consistency import Lookup, Verdict, inconsistent
from convgraph.integrity.evidence import verify_bundle
from convgraph.integrity.statement import FRESHNESS_MS, ORDER_SLACK_MS, Statement, sign_statement
from convgraph.replica.witnessing import SessionVerdict
from convgraph.store.postgres import PostgresStore

AUTHOR = SigningKey(bytes(range(32)))
OTHER = SigningKey(bytes(range(3, 35)))
SERVER = SigningKey(bytes(range(7, 39)))
T = 1_700_000_000_000
LATER = ORDER_SLACK_MS + 1
CONV = "c"


def rec(seq: int, *parents: Record, text: str = "", wall: int | None = None, key: SigningKey = AUTHOR) -> Record:
    return sign_record(key, conv=CONV, seq=seq, hlc=Hlc(wall if wall is not None else 1000 + seq, 0),
                       parents=[p.cid for p in parents], kind="user_message",
                       payload={"content": text or f"m{seq}"})


@pytest.fixture
def history() -> dict[str, Record]:
    """r1 <- r2 <- r3 <- r4, and b3 a fork off r2 by another author; twin another r3 (an equivocation)."""
    r1 = rec(1)
    r2 = rec(2, r1)
    r3 = rec(3, r2)
    r4 = rec(4, r3)
    b3 = rec(1, r2, text="the other third", wall=1003, key=OTHER)
    twin = rec(3, r2, text="the other third")
    return {"r1": r1, "r2": r2, "r3": r3, "r4": r4, "b3": b3, "twin": twin}


class Client:
    """A replica on SQLite (or on a PostgreSQL schema) that can be closed and opened again,
    with a clock we move."""

    def __init__(self, home: Path, pg_schema: str | None = None) -> None:
        self.home, self.clock, self.schema = home, ManualClock(T), pg_schema
        self.key = SigningKey.generate()
        self.replica = self._open()

    def _open(self) -> Replica:
        config = Config(legacy_writes=True)
        if self.schema is None:
            return Replica.open(self.home, clock=self.clock, config=config)
        return Replica(PostgresStore(pg.dsn(), schema=self.schema), self.key, clock=self.clock, config=config)

    def reopen(self) -> Replica:
        self.replica.close()
        self.replica = self._open()
        return self.replica

    def session(self, *statements: Statement, matched: bool = True) -> SessionVerdict:
        now = statements[-1].time_ms
        self.clock.now_ms = max(self.clock.now_ms, now)
        return self.replica.observe_session(SERVER.public, CONV, statements, started_ms=now, received_ms=now,
                                            fingerprints_matched=matched)


@pytest.fixture(params=["sqlite", "postgres"])
def client(request: pytest.FixtureRequest, tmp_path: Path, history: dict[str, Record]) -> Iterator[Client]:
    c = Client(tmp_path / "client", pg.fresh_schema(pg.dsn()) if request.param == "postgres" else None)
    c.replica.ingest([history[n].data for n in ("r1", "r2", "r3", "r4")])
    yield c
    c.replica.close()


def said(heads: Sequence[Record], count: int, time: int, *, stored: Sequence[Record] = (),
         key: SigningKey = SERVER) -> Statement:
    return sign_statement(key, CONV, count, [h.cid for h in heads], time, stored=[s.cid for s in stored])


def test_the_remembered_statement_survives_a_restart_and_a_rollback_is_proven(
    client: Client, history: dict[str, Record]
) -> None:
    first = said([history["r4"]], 4, T, stored=[history["r4"]])
    verdict = client.replica.observe_session(SERVER.public, CONV, [first], started_ms=T, received_ms=T,
                                             fingerprints_matched=True)
    assert verdict.converged and verdict.findings == [] and verdict.pending == []
    replica = client.reopen()
    assert replica.store.remembered(SERVER.public, CONV) == first.data
    assert replica.store.open_receipts(SERVER.public, CONV) == [first.data]  # nothing later covers it yet
    back = said([history["r2"]], 2, T + LATER)
    verdict = client.session(back, matched=False)
    assert [f.kind for f in verdict.findings] == ["deletion"] and not verdict.converged
    finding = verdict.findings[0]
    assert verify_bundle(finding.bundle).ok and finding.statements == (first, back)
    replica = client.reopen()
    assert replica.findings(CONV) == [finding] and replica.findings("other") == []
    assert replica.store.remembered(SERVER.public, CONV) == back.data  # one lie, reported once
    assert replica.store.open_receipts(SERVER.public, CONV) == []


def test_a_passing_session_replaces_the_remembered_statement_and_closes_receipts(
    client: Client, history: dict[str, Record]
) -> None:
    receipt = said([history["r3"]], 3, T, stored=[history["r3"]])
    client.session(receipt, matched=False)
    assert client.replica.store.open_receipts(SERVER.public, CONV) == [receipt.data]
    later = said([history["r4"]], 4, T + 5)
    verdict = client.session(later)
    assert verdict.converged and verdict.findings == []
    assert client.replica.store.remembered(SERVER.public, CONV) == later.data
    assert client.replica.store.open_receipts(SERVER.public, CONV) == []


def test_a_rollback_within_the_slack_is_pending_then_proven(client: Client, history: dict[str, Record]) -> None:
    client.session(said([history["r4"]], 4, T))
    close = said([history["r3"]], 3, T + ORDER_SLACK_MS)
    verdict = client.session(close, matched=False)
    assert verdict.findings == [] and len(verdict.pending) == 1 and "rollback" in verdict.pending[0]
    verdict = client.reopen().observe_session(SERVER.public, CONV, [said([history["r3"]], 3, T + LATER)],
                                              started_ms=T + LATER, received_ms=T + LATER,
                                              fingerprints_matched=False)
    assert [f.kind for f in verdict.findings] == ["rollback"] and verdict.pending == []
    assert verify_bundle(verdict.findings[0].bundle).ok


def test_a_stale_statement_changes_nothing(client: Client, history: dict[str, Record]) -> None:
    first = said([history["r4"]], 4, T, stored=[history["r4"]])
    client.session(first)
    stale = said([history["r2"]], 2, T - 1, stored=[history["r2"]])
    now = T + FRESHNESS_MS + 1
    with pytest.raises(StaleStatementError):
        client.replica.observe_session(SERVER.public, CONV, [stale], started_ms=now, received_ms=now,
                                       fingerprints_matched=True)
    assert client.replica.store.remembered(SERVER.public, CONV) == first.data
    assert client.replica.store.open_receipts(SERVER.public, CONV) == [first.data]
    assert client.replica.findings() == []


def test_a_withholding_receipt_is_found(client: Client, history: dict[str, Record]) -> None:
    liar = said([history["r2"]], 2, T, stored=[history["r3"]])
    verdict = client.session(liar, matched=False)
    assert [f.kind for f in verdict.findings] == ["withholding"]
    assert verify_bundle(verdict.findings[0].bundle).ok


def test_gossip_between_two_clients_catches_a_split_view(tmp_path: Path, history: dict[str, Record]) -> None:
    c2, c3 = Client(tmp_path / "c2"), Client(tmp_path / "c3")
    try:
        for c in (c2, c3):
            c.replica.ingest([history[n].data for n in ("r1", "r2", "r3", "r4", "b3")])
        c2.session(said([history["r4"]], 4, T))  # the server shows c2 one history
        c3.session(said([history["b3"]], 3, T + 10))  # and c3 another: neither extends the other
        assert c2.replica.findings() == [] and c3.replica.findings() == []
        told = c2.replica.gossip_for(CONV, exclude={c3.replica.actor})
        assert [s.key for s in told] == [SERVER.public]
        assert c2.replica.gossip_for(CONV, exclude={SERVER.public}) == []
        found = c3.replica.observe_gossip(CONV, told)
        assert [f.kind for f in found] == ["server_equivocation"] and verify_bundle(found[0].bundle).ok
        assert c3.replica.observe_gossip(CONV, told) == []  # the same evidence twice: one finding
        assert c3.reopen().findings(CONV) == found
        assert c3.replica.observe_gossip(CONV, [said([history["r1"]], 1, T, key=c3.replica.key)]) == []
    finally:
        c2.replica.close()
        c3.replica.close()


def test_gossip_held_already_is_not_walked_again(
    tmp_path: Path, history: dict[str, Record], monkeypatch: pytest.MonkeyPatch
) -> None:
    c3 = Client(tmp_path / "c3")
    walks: list[tuple[Statement, Statement]] = []

    def counted(earlier: Statement, later: Statement, lookup: Lookup) -> Verdict:
        walks.append((earlier, later))
        return inconsistent(earlier, later, lookup)

    monkeypatch.setattr(gossip_, "inconsistent", counted)
    try:
        c3.replica.ingest([history[n].data for n in ("r1", "r2", "r3", "r4")])
        c3.session(said([history["r2"]], 2, T))
        told = [said([history["r3"]], 3, T + 10), said([history["r4"]], 4, T + 20)]
        assert c3.replica.observe_gossip(CONV, told) == []
        assert len(walks) == 3  # each of the two against the remembered one, and against each other
        walks.clear()
        for _ in range(3):  # peers gossip the same latest statements session after session
            assert c3.replica.observe_gossip(CONV, [*told, told[0]]) == []
        assert walks == []
        later = said([history["r4"]], 4, T + 30)
        assert c3.replica.observe_gossip(CONV, [*told, later]) == [] and len(walks) == 3  # only the new one
    finally:
        c3.replica.close()


def test_gossip_undecided_is_kept_and_decided_after_the_records_arrive(
    tmp_path: Path, history: dict[str, Record]
) -> None:
    c3 = Client(tmp_path / "c3")
    try:
        c3.replica.ingest([history[n].data for n in ("r1", "r2", "b3")])
        c3.session(said([history["b3"]], 3, T))
        assert c3.replica.observe_gossip(CONV, [said([history["r4"]], 4, T + 10)]) == []  # r4 unknown here
        c3.replica.ingest([history[n].data for n in ("r3", "r4")])
        found = c3.replica.observe_gossip(CONV, [])  # a later sync: the kept pair is decided now
        assert [f.kind for f in found] == ["server_equivocation"]
    finally:
        c3.replica.close()


def test_a_record_equivocation_is_found_at_ingest_and_kept_through_compaction(
    client: Client, history: dict[str, Record]
) -> None:
    report = client.replica.ingest([history["twin"].data])
    assert report.equivocations
    found = client.replica.findings(CONV)
    assert [f.kind for f in found] == ["record_equivocation"] and verify_bundle(found[0].bundle).ok
    assert set(found[0].cites) == {history["r3"].cid, history["twin"].cid}
    client.replica.checkpoint(CONV, compact=True)
    store = client.replica.store
    assert store.get(history["r3"].cid) == history["r3"].data
    assert store.get(history["twin"].cid) == history["twin"].data
    assert store.get(history["r1"].cid) is None  # the rest is compacted as before
    assert client.replica.verify().ok
    assert client.reopen().transcript(CONV)  # the fold over the snapshot holds them once


def test_compaction_keeps_what_a_finding_cites(client: Client, history: dict[str, Record]) -> None:
    client.session(said([history["r4"]], 4, T))
    # the count stays: only the records show r4 missing, so the bundle must carry them
    finding = client.session(said([history["r2"]], 4, T + LATER)).findings[0]
    assert finding.cites
    client.replica.checkpoint(CONV, compact=True)
    for cid in finding.cites:
        assert client.replica.store.get(cid) is not None
    assert client.replica.store.cited(CONV) >= set(finding.cites)
    held = [history[n] for n in ("r1", "r2", "r3", "r4")]
    assert not all(client.replica.store.get(r.cid) for r in held if r.cid not in finding.cites)


def test_ids_are_cids_of_bundles(client: Client, history: dict[str, Record]) -> None:
    client.replica.ingest([history["twin"].data])
    (finding,) = client.replica.findings()
    assert finding.id == CID.of_record(finding.bundle)


def test_a_claim_whose_records_were_compacted_stays_pending(client: Client, history: dict[str, Record]) -> None:
    first = said([history["r4"]], 4, T)
    client.session(first)
    client.replica.checkpoint(CONV, compact=True)  # the headers decide `covered`; no bundle can carry them
    verdict = client.session(said([history["r2"]], 4, T + LATER), matched=False)
    assert verdict.findings == [] and len(verdict.pending) == 1 and "rollback" in verdict.pending[0]
    assert client.replica.store.remembered(SERVER.public, CONV) == first.data


def test_an_equivocation_with_a_record_compacted_before_it_has_no_bundle_but_is_named(
    client: Client, history: dict[str, Record]
) -> None:
    client.replica.checkpoint(CONV, compact=True)  # r3's bytes are gone before its twin arrives
    report = client.replica.ingest([history["twin"].data])
    assert report.equivocations and client.replica.findings() == []
    assert client.replica.store.equivocations(CONV) == [tuple(sorted([history["r3"].cid, history["twin"].cid]))]
