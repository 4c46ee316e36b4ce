"""Any single lie is found: after any honest history, any one lie a hostile server can tell
(docs/integrity.md §1, each performed as in tests/attacks/test_attacks.py) is caught within one
sync after the honest parties next talk, with a finding of the right kind whose bundle proves
it while a tampered copy does not (§4-§7).

The lies: a database put back from its own earlier copy, receipted records dropped, a server
that signs that it holds nothing or that it holds less while the fingerprints match, a split
view, a checkpoint with a false count, heads or snapshot, two checkpoints by one author that
fork (a witness refuses the second), and one of two equivocating records dropped before
serving. Replicas are real SQLite replicas on one manual clock, moved on 2 s (past the order
slack) after every step, so statements are ordered by time without sleeping; the server
lies through the in-process transport (`liars.lying_sync`) where the attacks use HTTP.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from checkpoint_world import true_payload
from conftest import IN_CI
from convgraph import ManualClock, Replica, SigningKey
from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.core.record import Record, decode_record, sign_record
from convgraph.errors import EvidenceError, WitnessRefusedError
from convgraph.integrity.evidence import decode_bundle, verify_bundle
from convgraph.integrity.statement import Statement, decode_statement, sign_statement
from convgraph.replica import KEY_FILE
from convgraph.server.witness import cosigner_for
from convgraph.sync.local import sync_replicas
from liars import lying_sync

CONV = "c"
STEP_MS = 2_000
AUTHOR = SigningKey(bytes([7]) * 32)  # signs two records at one seq in `hidden_equivocation`

honest = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.sampled_from(["server", "a", "b"])),
        st.tuples(st.just("sync"), st.sampled_from(["a", "b"])),
    ),
    max_size=8,
)


class World:
    """A server and two clients; closing, copying and rebuilding the server are the liar's tools."""

    def __init__(self, root: Path) -> None:
        self.root, self.clock = root, ManualClock()
        self.homes = {n: root / n for n in ("server", "a", "b")}
        self.r = {n: Replica.open(h, clock=self.clock) for n, h in self.homes.items()}
        self.last: dict[str, Record] = {}  # each party's latest turn
        self.n = 0

    def tick(self) -> None:
        self.clock.advance(STEP_MS)

    def write(self, who: str) -> Record:
        self.n += 1
        self.last[who] = self.r[who].say(CONV, "user", f"turn {self.n}")
        self.tick()
        return self.last[who]

    def sync(self, who: str, with_: str = "server") -> None:
        sync_replicas(self.r[who], self.r[with_], [CONV])
        self.tick()

    def copy_server(self, name: str) -> Path:
        self.r["server"].close()
        where = self.root / name
        shutil.copytree(self.homes["server"], where)
        self.r["server"] = Replica.open(self.homes["server"], clock=self.clock)
        return where

    def restore_server(self, copy: Path) -> None:
        self.r["server"].close()
        shutil.rmtree(self.homes["server"])
        shutil.copytree(copy, self.homes["server"])
        self.r["server"] = Replica.open(self.homes["server"], clock=self.clock)

    def rebuild_server_without(self, dropped: CID) -> None:
        """The operator rebuilds the database from the records but one, under the same key."""
        kept = [r.data for r in self.r["server"].records(CONV) if r.cid != dropped]
        self.r["server"].close()
        home, kept_key = self.homes["server"], self.root / KEY_FILE
        shutil.move(home / KEY_FILE, kept_key)
        shutil.rmtree(home)
        home.mkdir()
        shutil.move(kept_key, home / KEY_FILE)
        self.r["server"] = Replica.open(home, clock=self.clock)
        self.r["server"].ingest(kept)

    def close(self) -> None:
        for r in self.r.values():
            r.close()


@dataclass(frozen=True)
class Expect:
    """What the one sync after the lie must find: a finding of one of `kinds`, at one of `finders`;
    any finding at a client is of one of `allowed`."""

    finders: tuple[str, ...]
    kinds: frozenset[str]
    allowed: frozenset[str]


def _expect(finders: tuple[str, ...], *kinds: str, also: tuple[str, ...] = ()) -> Expect:
    return Expect(finders, frozenset(kinds), frozenset({*kinds, *also}))


def _other(who: str) -> str:
    return "b" if who == "a" else "a"


# ------------------------------------------------------------ the lies, each ended by the one sync that must catch it


def restored_copy(w: World, first: str, copy: Path) -> Expect:
    # the first client to talk to it catches it (and pushes back what it lost, so the second
    # may find nothing missing): b saw a's turn only in the server's statements, a rollback;
    # a holds the receipt, a deletion
    w.restore_server(copy)
    w.sync(first)
    return _expect((first,), "rollback" if first == "b" else "deletion")


def dropped_after_receipt(w: World, first: str, copy: Path) -> Expect:
    w.rebuild_server_without(w.last["a"].cid)
    w.sync(first)
    return _expect((first,), "rollback" if first == "b" else "deletion")


def _holds_nothing(key: SigningKey, s: Statement) -> bytes:
    """What a server that keeps nothing signs: no records, no heads, yet receipts for a push."""
    return sign_statement(key, s.conv, 0, [], s.time_ms, stored=s.stored).data


def holds_nothing(w: World, first: str, copy: Path) -> Expect:
    w.write(first)  # the very push is caught: its receipt names what its heads lack
    lying_sync(w.r[first], w.r["server"], [CONV], _holds_nothing)
    return _expect((first,), "withholding", also=("rollback", "deletion"))


def claims_sync(w: World, first: str, copy: Path) -> Expect:
    # nothing to move, the fingerprints match, yet the statement lacks a's receipted turn
    hidden = w.last["a"]
    assert hidden.cid in w.r["server"].heads(CONV)

    def without(key: SigningKey, s: Statement) -> bytes:
        heads = (set(s.heads) - {hidden.cid}) | set(hidden.parents)
        return sign_statement(key, s.conv, s.count - 1, heads, s.time_ms, stored=s.stored).data

    lying_sync(w.r[first], w.r["server"], [CONV], without)
    # a holds the receipt: withholding; b only saw the turn in a statement: rollback
    return _expect((first,), "withholding" if first == "a" else "rollback", also=("deletion",))


def split_view(w: World, first: str, copy: Path) -> Expect:
    # from here on b is served a copy of the server as it is now (the same key): each client
    # alone sees a history that only grows, so only gossip between them can catch it
    liar = Replica.open(w.copy_server("view_b"), clock=w.clock)
    try:
        w.write("a")
        w.sync("a")
        w.write("b")
        sync_replicas(w.r["b"], liar, [CONV])
        w.tick()
    finally:
        liar.close()
    assert not any(w.r[who].findings(CONV) for who in ("a", "b"))
    w.sync(first, with_=_other(first))  # the honest clients meet
    return _expect(("a", "b"), "server_equivocation")


def _false_checkpoint(check: str) -> Callable[[World, str, Path], Expect]:
    def lie(w: World, first: str, copy: Path) -> Expect:
        server, turn = w.r["server"], w.last["a"]
        if check == "heads":  # a head that is an ancestor of another head
            payload = true_payload(server, [turn.parents[0], turn.cid])
        else:
            payload = true_payload(server, [turn.cid])
            if check == "count":
                payload["count"] += 1
            else:
                payload["snapshot"] = turn.cid  # a CID, but not that of the fold
        server.write(CONV, "checkpoint", payload)
        w.tick()
        w.sync(first)
        return _expect((first,), "unverifiable_checkpoint")

    lie.__name__ = f"false_{check}"
    return lie


def forked_checkpoints(w: World, first: str, copy: Path) -> Expect:
    # two concurrent turns; the server checkpoints each alone, so neither checkpoint extends
    # the other. A witness cosigns the first and refuses the second; the server serves both.
    x, y = w.write("a"), w.write("b")
    w.sync("a")
    w.sync("b")
    server = w.r["server"]
    with Replica.open(w.root / "witness", clock=w.clock) as witness:
        cosigner = cosigner_for(w.root / "witness", witness.store, witness.key, name=None,
                                clock_s=lambda: w.clock() // 1000)
        for heads, cosigns in (([x.cid], True), ([y.cid], False)):
            cp = server.write(CONV, "checkpoint", true_payload(server, heads))
            w.tick()
            sync_replicas(server, witness, [CONV])
            if cosigns:
                cosigner.cosign(CONV, cp.cid)
            else:
                with pytest.raises(WitnessRefusedError) as refused:
                    cosigner.cosign(CONV, cp.cid)
                assert refused.value.reason == "not_extending"
    w.sync(first)
    return _expect((first,), "divergent_fork")


def hidden_equivocation(w: World, first: str, copy: Path) -> Expect:
    # AUTHOR signed two records at seq 2; the server keeps one and serves only that, so its
    # clients never see the pair from it. b got the other elsewhere; a talks to the server.
    now, parents = w.clock(), w.r["b"].heads(CONV)  # all held by the server: b synced last

    def turn(seq: int, wall: int, parents: list[CID], text: str) -> bytes:
        return sign_record(AUTHOR, conv=CONV, seq=seq, hlc=Hlc(wall, 0), parents=parents, kind="user_message",
                           payload={"content": text}).data

    opening = turn(1, now, parents, "do we ship?")
    said = decode_record(opening).cid
    w.r["server"].ingest([opening, turn(2, now + 1, [said], "I said yes")])
    w.r["b"].ingest([opening, turn(2, now + 1, [said], "I said no")])
    w.tick()
    w.sync("a")  # one consistent history
    w.sync(first, with_=_other(first))  # the honest clients meet
    return _expect(("a", "b"), "record_equivocation")


LIES: dict[str, Callable[[World, str, Path], Expect]] = {
    f.__name__: f for f in (
        restored_copy, dropped_after_receipt, holds_nothing, claims_sync, split_view,
        _false_checkpoint("count"), _false_checkpoint("heads"), _false_checkpoint("snapshot"),
        forked_checkpoints, hidden_equivocation,
    )
}


# ------------------------------------------------------------ the property


def _flip_signature(bundle: bytes) -> bytes:
    """The bundle with one bit of its first signature flipped: still a bundle, no longer a proof."""
    form = decode_bundle(bundle)
    sig = decode_statement(form.statements[0]).sig if form.statements else decode_record(form.records[0]).sig
    at = bundle.index(sig) + 63
    return bundle[:at] + bytes([bundle[at] ^ 1]) + bundle[at + 1:]


def _still_proves(data: bytes) -> bool:
    try:
        return verify_bundle(data).ok
    except EvidenceError:
        return False


@settings(max_examples=25 if IN_CI else 8, deadline=None)
@given(prefix=honest, lie=st.sampled_from(sorted(LIES)), first=st.sampled_from(["a", "b"]),
       bit=st.integers(min_value=0))
# every lie at least once per run, whatever the examples drawn
@example(prefix=[], lie="restored_copy", first="a", bit=0)
@example(prefix=[], lie="restored_copy", first="b", bit=0)
@example(prefix=[], lie="dropped_after_receipt", first="b", bit=0)
@example(prefix=[], lie="holds_nothing", first="b", bit=0)
@example(prefix=[], lie="claims_sync", first="a", bit=0)
@example(prefix=[], lie="split_view", first="a", bit=0)
@example(prefix=[], lie="false_count", first="a", bit=0)
@example(prefix=[], lie="false_heads", first="b", bit=0)
@example(prefix=[], lie="false_snapshot", first="a", bit=0)
@example(prefix=[], lie="forked_checkpoints", first="b", bit=0)
@example(prefix=[], lie="hidden_equivocation", first="a", bit=0)
def test_any_single_lie_after_any_honest_history_is_found(
    prefix: list[tuple[str, str]], lie: str, first: str, bit: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        w = World(Path(tmp))
        try:
            for op, who in prefix:
                w.write(who) if op == "write" else w.sync(who)
            w.write("a")  # both clients have talked to the server before the lie
            w.sync("a")
            w.sync("b")
            copy = w.copy_server("copy")
            w.write("a")  # what most lies hide: a's new turn, receipted to a, stated to b
            w.sync("a")
            w.sync("b")
            assert not any(r.findings(CONV) for r in w.r.values()), "an honest history is no lie"
            expect = LIES[lie](w, first, copy)
            found = {who: w.r[who].findings(CONV) for who in ("a", "b")}
        finally:
            w.close()
    assert any(f.kind in expect.kinds for who in expect.finders for f in found[who]), (lie, prefix, found)
    for f in (f for fs in found.values() for f in fs):
        assert f.kind in expect.allowed, (lie, f.kind, f.summary)
        proof = verify_bundle(f.bundle)
        assert proof.ok and proof.kind == f.kind, (lie, proof.reason)
        assert f.id == CID.of_record(f.bundle)
        assert not _still_proves(_flip_signature(f.bundle)), (lie, f.kind)
        at = bit % (8 * len(f.bundle))
        flipped = bytearray(f.bundle)
        flipped[at // 8] ^= 1 << (at % 8)
        assert not _still_proves(bytes(flipped)), (lie, f.kind, at)
