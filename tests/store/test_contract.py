"""The `Store` contract, run against every implementation.

Every test takes `store` (a fresh, empty store) or `new_store` (a factory of fresh stores,
for hypothesis tests that need one per example); both are parametrized over `FACTORIES`.
A new implementation (PostgreSQL) joins the whole suite by adding one entry there. The
differential tests at the end run one random operation sequence against several of them at
once and require identical answers to every query: the embedded stores at the full example
count, every store (`SERVER_KINDS` too, whose examples cost far more) at a smaller one.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pg
from conftest import IN_CI
from convgraph import graph
from convgraph.core.cid import CID
from convgraph.core.hlc import ZERO, Hlc
from convgraph.core.keys import SigningKey
from convgraph.core.record import Record, decode_record, sign_record
from convgraph.errors import StoreError
from convgraph.store.base import Store
from convgraph.store.memory import MemoryStore
from convgraph.store.postgres import PostgresStore
from convgraph.store.rows import Pending, QuarantineBounds, WriteSet
from convgraph.store.sqlite import SqliteStore

# ---------------------------------------------------------------- stores under test

class FreshPostgres(PostgresStore):
    """A store in a schema of the one server tests/pg.py finds (or starts) per process, as
    fresh as a new one: one a closed store left, emptied (`pg.emptied`: milliseconds), else a
    new one (half a second of DDL, and dropping it at the end as much again)."""

    free: ClassVar[list[str]] = []  # the schemas of closed stores

    def __init__(self) -> None:
        dsn = pg.dsn()
        super().__init__(dsn, schema=pg.emptied(dsn, self.free.pop()) if self.free else pg.fresh_schema(dsn))
        self._given_back = False

    def close(self) -> None:
        super().close()
        if not self._given_back:
            self._given_back = True
            self.free.append(self.schema)


FACTORIES: dict[str, Callable[[Path], Store]] = {
    "memory": lambda _home: MemoryStore(),
    "sqlite": lambda home: SqliteStore(home / "s.sqlite"),
    "postgres": lambda _home: FreshPostgres(),
}

# store tests do real I/O per example (a fresh database each); the pure tests keep the profile's count
STORE_EXAMPLES = settings(max_examples=150 if IN_CI else 40)
# a server store's fresh schema costs ~60 ms of DDL and each of its queries a round trip: fewer there
SERVER_KINDS = frozenset({"postgres"})
SERVER_EXAMPLES = settings(max_examples=50 if IN_CI else 15)


class StoreMaker:
    """Makes fresh, empty stores of one kind, each in its own directory; closes them all.

    At most `KEEP` stay open: a hypothesis test that forgets to close its stores would otherwise
    hold one PostgreSQL pool per example until the module ends, and the server's 100
    connections are shared by every xdist worker (CI's 150 examples ran out of them)."""

    KEEP = 6

    def __init__(self, kind: str, base: Path) -> None:
        self.kind = kind
        self._base = base
        self._made = itertools.count()
        self._open: list[Store] = []

    def __call__(self) -> Store:
        while len(self._open) >= self.KEEP:  # the oldest belong to examples that have ended
            self._open.pop(0).close()
        home = self._base / f"{self.kind}-{next(self._made)}"
        home.mkdir()
        store = FACTORIES[self.kind](home)
        self._open.append(store)
        return store

    def close_all(self) -> None:
        while self._open:
            self._open.pop().close()


@pytest.fixture(scope="module", params=sorted(FACTORIES))
def new_store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StoreMaker]:
    maker = StoreMaker(request.param, tmp_path_factory.mktemp(request.param))
    yield maker
    maker.close_all()


@pytest.fixture
def store(new_store: StoreMaker) -> Iterator[Store]:
    with closing(new_store()) as s:
        yield s


# ---------------------------------------------------------------- records

KEYS = [SigningKey(bytes(range(i, i + 32))) for i in range(3)]
ACTORS = [k.public for k in KEYS]
T0 = 1_700_000_000_000


def rec(
    conv: str = "c1",
    seq: int = 1,
    wall: int = T0,
    parents: tuple[Record, ...] = (),
    *,
    key: int = 0,
    text: str = "hi",
    counter: int = 0,
) -> Record:
    return sign_record(
        KEYS[key], conv=conv, seq=seq, hlc=Hlc(wall, counter), parents=[p.cid for p in parents],
        kind="user_message", payload={"content": text},
    )


def chain(n: int, conv: str = "c1", *, key: int = 0, wall: int = T0) -> list[Record]:
    out: list[Record] = []
    for i in range(n):
        out.append(rec(conv, i + 1, wall + i, tuple(out[-1:]), key=key, text=f"{conv} {i}"))
    return out


def pend(r: Record, reason: str = "parents", missing: tuple[CID, ...] = (), wall: int | None = None) -> Pending:
    return Pending(r.cid, r.data, cast(Any, reason), r.hlc.wall_ms if wall is None else wall, missing)


GHOSTS = [CID.of_record(b"ghost %d" % i) for i in range(4)]  # never stored


class Exploding:
    """Stands in for a record, entry or CID; raises on first touch, midway through a commit."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"boom ({name})")

    def __lt__(self, other: object) -> bool:
        raise RuntimeError("boom (<)")

    __gt__ = __lt__

    def __hash__(self) -> int:
        raise RuntimeError("boom (hash)")

    def __bytes__(self) -> bytes:
        raise RuntimeError("boom (bytes)")


def commit(store: Store, *records: Record, **more: Any) -> None:
    store.commit(WriteSet(records=list(records), **more))


# ---------------------------------------------------------------- observation


def observe(store: Store, universe: Universe) -> dict[str, Any]:
    """Every answer the store gives about the universe: two equal observations, one state."""
    convs = [*universe.convs, "absent"]
    obs: dict[str, Any] = {
        "count": store.count(),
        "conversations": store.conversations(),
        "iter_all": list(store.iter_all()),
        "max_hlc": store.max_hlc(),
        "pending_stats": store.pending_stats(),
        "pending_get": store.pending_get(universe.cids),
        "waiting_all": store.pending_waiting_on(universe.cids),
        "equivocations": store.equivocations(),
        "metas": store.metas(universe.cids),
        "has": [store.has(c) for c in universe.cids],
        "get": [store.get(c) for c in universe.cids],
        "get_many": store.get_many(universe.cids),
    }
    for c in universe.cids:
        obs[f"waiting {c}"] = store.pending_waiting_on([c])
    for w in universe.walls:
        obs[f"due {w}"] = store.pending_due(w)
    for conv in convs:
        full = store.records(conv)
        obs[f"records {conv}"] = full
        obs[f"count {conv}"] = store.count(conv)
        obs[f"heads {conv}"] = store.heads(conv)
        obs[f"sync_keys {conv}"] = store.sync_keys(conv)
        obs[f"equivocations {conv}"] = store.equivocations(conv)
        for n in range(len(full) + 2):
            obs[f"records {conv} last={n}"] = store.records(conv, last=n)
        for actor in [*ACTORS, b"\x00" * 32]:
            obs[f"last_own {conv} {actor.hex()[:6]}"] = store.last_own(actor, conv)
            for seq in range(universe.max_seq + 2):
                obs[f"at_seq {conv} {actor.hex()[:6]} {seq}"] = store.at_seq(actor, conv, seq)
    return obs


@dataclass
class Universe:
    cids: list[CID] = field(default_factory=list)
    convs: list[str] = field(default_factory=list)
    walls: list[int] = field(default_factory=list)
    max_seq: int = 0

    @classmethod
    def of(cls, records: Iterable[Record], pending: Iterable[Pending] = ()) -> Universe:
        records = list(records)
        walls = {0, T0 - 1, *(r.hlc.wall_ms for r in records), *(p.wall_ms for p in pending)}
        walls |= {w + 1 for w in walls}
        return cls(
            cids=sorted({*(r.cid for r in records), *GHOSTS}),
            convs=sorted({r.conv for r in records} | {"c1"}),
            walls=sorted(walls),
            max_seq=max((r.seq for r in records), default=0),
        )


# ---------------------------------------------------------------- random histories


@dataclass
class History:
    records: list[Record]  # parents before children
    rivals: dict[CID, list[CID]]  # record -> earlier records at its (actor, conv, seq)


@st.composite
def histories(draw: st.DrawFn, max_records: int = 14) -> History:
    """Random DAGs of signed records across 2-3 conversations and 3 authors, with equivocations."""
    convs = ["c1", "c2", "c3"][: draw(st.integers(2, 3))]
    records: list[Record] = []
    by_conv: dict[str, list[Record]] = defaultdict(list)
    tip: dict[tuple[int, str], Record] = {}
    by_seq: dict[tuple[int, str, int], list[CID]] = defaultdict(list)
    rivals: dict[CID, list[CID]] = {}
    for i in range(draw(st.integers(0, max_records))):
        conv, key = draw(st.sampled_from(convs)), draw(st.integers(0, len(KEYS) - 1))
        pool, prev = by_conv[conv], tip.get((key, conv))
        if prev is not None and draw(st.integers(0, 5)) == 0:  # equivocate: a rival of `prev`
            seq, parents = prev.seq, [r for r in pool if r.cid in prev.parents]
        else:
            picks = draw(st.lists(st.integers(0, len(pool) - 1), max_size=3, unique=True)) if pool else []
            seq, parents = (prev.seq + 1 if prev else 1), [pool[j] for j in picks]
            if prev is not None and prev not in parents:
                parents.append(prev)
        base = max((p.hlc for p in parents), default=Hlc(T0, 0))
        bump = draw(st.integers(0, 2))
        stamp = Hlc(base.wall_ms, base.counter + 1) if bump == 0 else Hlc(base.wall_ms + bump, 0)
        r = sign_record(
            KEYS[key], conv=conv, seq=seq, hlc=stamp, parents=[p.cid for p in parents],
            kind="user_message", payload={"content": f"record {i}"},
        )
        rivals[r.cid] = list(by_seq[(key, conv, seq)])
        by_seq[(key, conv, seq)].append(r.cid)
        records.append(r)
        pool.append(r)
        if prev is None or r.seq > prev.seq or draw(st.booleans()):
            tip[(key, conv)] = r
    return History(records, rivals)


@dataclass
class Step:
    records: list[Record]
    equivocations: list[tuple[CID, CID]]
    rollback: bool = False
    pending_put: list[Pending] = field(default_factory=list)
    pending_remove: list[CID] = field(default_factory=list)
    evict: QuarantineBounds | None = None

    def writes(self) -> WriteSet:
        return WriteSet(list(self.records), list(self.pending_put), list(self.pending_remove),
                        list(self.equivocations))


@st.composite
def scripts(draw: st.DrawFn, *, quarantine: bool) -> tuple[History, list[Step]]:
    """A history cut into commits (in order, with re-sent duplicates and rolled-back attempts)."""
    hist = draw(histories())
    recs, steps, done = hist.records, [], 0
    stored: list[Record] = []
    for _ in range(draw(st.integers(1, 8))):
        take = draw(st.integers(0, 4))
        new = recs[done : done + take]
        dups = draw(st.lists(st.sampled_from(stored), max_size=2)) if stored else []
        pairs = []
        for r in new:
            for rival in hist.rivals[r.cid]:
                pairs.append((rival, r.cid) if draw(st.booleans()) else (r.cid, rival))
        step = Step([*dups, *new], pairs, rollback=draw(st.integers(0, 5)) == 0)
        if quarantine:
            for r in draw(st.lists(st.sampled_from(recs), max_size=3, unique_by=lambda r: r.cid)) if recs else []:
                missing = draw(st.lists(st.sampled_from([*r.parents, *GHOSTS]), max_size=3, unique=True))
                reason = draw(st.sampled_from(["parents", "clock"]))
                step.pending_put.append(pend(r, reason, tuple(missing), r.hlc.wall_ms + draw(st.integers(0, 2))))
            if recs:
                step.pending_remove = draw(st.lists(st.sampled_from([r.cid for r in recs] + GHOSTS), max_size=2))
            if draw(st.booleans()):
                step.evict = QuarantineBounds(draw(st.integers(0, 4)), draw(st.integers(0, 800)))
        steps.append(step)
        if not step.rollback:
            done += len(new)
            stored.extend(new)
    return hist, steps


def aborted(store: Store, body: Callable[[], object]) -> None:
    """Run `body` in a transaction that then raises; the raise must come out unchanged."""

    def attempt() -> None:
        with store.transaction():
            body()
            raise RuntimeError("roll back")

    with pytest.raises(RuntimeError, match="roll back"):
        attempt()


def apply(store: Store, step: Step) -> None:
    def run() -> None:
        store.commit(step.writes())
        if step.evict is not None:
            store.evict_pending(step.evict)

    if step.rollback:
        aborted(store, run)
    else:
        run()


# ---------------------------------------------------------------- the reference for records


def check_against_records(store: Store, stored: list[Record]) -> None:
    """Every record-derived answer equals what a naive computation over `stored` gives."""
    by_cid = {r.cid: r for r in stored}
    assert store.count() == len(by_cid)
    assert [c for c, _ in store.iter_all()] == list(by_cid)  # insertion order, no duplicates
    assert store.max_hlc() == max((r.hlc for r in stored), default=ZERO)
    convs = sorted({r.conv for r in stored})
    assert store.conversations() == convs
    parents_of = {r.cid: r.parents for r in stored}.get
    for conv in [*convs, "absent"]:
        mine = [r for r in by_cid.values() if r.conv == conv]
        assert store.count(conv) == len(mine)
        assert store.heads(conv) == sorted(graph.heads([r.cid for r in mine], parents_of))
        full = [(r.cid, r.data) for r in graph.canonical_order(mine)]
        assert store.records(conv) == full
        for n in range(len(full) + 2):
            assert store.records(conv, last=n) == full[len(full) - min(n, len(full)) :]
        assert paged(store, conv, 1) == paged(store, conv, 3) == full
        for key, actor in enumerate(ACTORS):
            own = [r for r in mine if r.actor == actor]
            for seq in range(max((r.seq for r in own), default=0) + 2):
                assert store.at_seq(actor, conv, seq) == sorted(r.cid for r in own if r.seq == seq), (key, seq)
            last = store.last_own(actor, conv)
            if not own:
                assert last is None
            else:
                top = max(r.seq for r in own)
                assert last is not None and last.seq == top
                assert last in [r.meta for r in own if r.seq == top]
    assert store.metas([*by_cid, *GHOSTS]) == {c: r.meta for c, r in by_cid.items()}


def paged(store: Store, conv: str, size: int) -> list[tuple[CID, bytes]]:
    """The conversation read page by page through `records_after`, as a stream reads it."""
    out: list[tuple[CID, bytes]] = []
    after = None
    while page := store.records_after(conv, after, size):
        assert len(page) <= size
        out += page
        after = decode_record(page[-1][1]).order_key
    return out


# ---------------------------------------------------------------- records, heads, indexes


def test_an_empty_store(store: Store) -> None:
    assert store.count() == 0 and store.count("c1") == 0
    assert store.conversations() == []
    assert store.heads("c1") == []
    assert store.records("c1") == [] and store.records("c1", last=3) == []
    assert list(store.iter_all()) == []
    assert store.max_hlc() == ZERO
    assert store.last_own(ACTORS[0], "c1") is None
    assert store.at_seq(ACTORS[0], "c1", 1) == []
    assert store.pending_stats() == (0, 0)
    assert store.equivocations() == []
    assert not store.has(GHOSTS[0]) and store.get(GHOSTS[0]) is None
    assert store.metas(GHOSTS) == {}


def test_put_is_idempotent_by_cid(store: Store) -> None:
    a, b = chain(2)
    commit(store, a)
    commit(store, b)
    before = observe(store, Universe.of([a, b]))
    commit(store, a)  # an old record again must not become a head again
    commit(store, b, b)
    commit(store, a, b, a)
    assert observe(store, Universe.of([a, b])) == before
    assert store.count() == 2 and store.heads("c1") == [b.cid]
    assert store.get(a.cid) == a.data and store.has(b.cid)


def test_change_token_moves_with_every_commit_and_only_then(store: Store) -> None:
    a, b = chain(2)
    first = store.change_token()
    assert store.change_token() == first
    commit(store, a)
    second = store.change_token()
    assert second != first
    with store.transaction():
        inside = store.change_token()
        commit(store, b)
        assert store.change_token() != inside
    assert store.change_token() not in (first, second)


def test_heads_follow_forks_and_merges(store: Store) -> None:
    root = rec("c1", 1, T0)
    x = rec("c1", 1, T0 + 1, (root,), key=1, text="x")
    y = rec("c1", 1, T0 + 1, (root,), key=2, text="y")
    commit(store, root)
    assert store.heads("c1") == [root.cid]
    commit(store, x, y)
    assert store.heads("c1") == sorted([x.cid, y.cid])
    m = rec("c1", 2, T0 + 2, (root, x, y), text="merge")
    commit(store, m)
    assert store.heads("c1") == [m.cid]
    other = chain(2, "c2", key=1)
    commit(store, *other)
    assert store.heads("c2") == [other[1].cid] and store.heads("c1") == [m.cid]
    check_against_records(store, [root, x, y, m, *other])


def test_indexes_after_every_commit_of_random_dags(new_store: StoreMaker) -> None:
    @(SERVER_EXAMPLES if new_store.kind in SERVER_KINDS else STORE_EXAMPLES)
    @given(scripts(quarantine=False))
    def check(script: tuple[History, list[Step]]) -> None:
        _, steps = script
        with closing(new_store()) as store:
            stored: list[Record] = []
            pairs: set[tuple[CID, CID]] = set()
            for step in steps:
                apply(store, step)
                if not step.rollback:
                    stored.extend(r for r in step.records if r not in stored)
                    pairs |= {(min(p), max(p)) for p in step.equivocations}
                check_against_records(store, stored)
                assert store.equivocations() == sorted(pairs)

    check()


def test_seq_index(store: Store) -> None:
    a1, a2, a3 = chain(3, key=0)
    b1 = rec("c1", 1, T0 + 5, (a3,), key=1)
    elsewhere = chain(1, "c2", key=0)
    commit(store, a1, a2, a3, b1, *elsewhere)
    assert store.at_seq(ACTORS[0], "c1", 2) == [a2.cid]
    assert store.at_seq(ACTORS[1], "c1", 1) == [b1.cid]
    assert store.at_seq(ACTORS[1], "c1", 2) == []
    assert store.at_seq(ACTORS[0], "c2", 1) == [elsewhere[0].cid]
    assert store.at_seq(ACTORS[0], "c2", 2) == []
    assert store.last_own(ACTORS[0], "c1") == a3.meta
    assert store.last_own(ACTORS[1], "c1") == b1.meta
    assert store.last_own(ACTORS[0], "c2") == elsewhere[0].meta
    assert store.last_own(ACTORS[2], "c1") is None
    assert store.metas([a2.cid, GHOSTS[0]]) == {a2.cid: a2.meta}


def test_records_in_canonical_order_with_every_tail(store: Store) -> None:
    # same wall time for everyone: the order falls to counter, then actor, then CID
    root = rec("c1", 1, T0)
    kids = [rec("c1", 1, T0 + 1, (root,), key=k, text=f"k{k}") for k in (1, 2)]
    kids += [rec("c1", 2, T0 + 1, (root,), key=0, counter=1), rec("c1", 2, T0 + 1, (root,), key=0, text="z")]
    late = rec("c2", 1, T0 - 100, key=1)
    for r in reversed([root, *kids]):  # arrival order must not matter; heads are checked elsewhere
        commit(store, r)
    commit(store, late)
    want = [(r.cid, r.data) for r in graph.canonical_order([root, *kids])]
    assert store.records("c1") == want
    assert want[0][0] == root.cid and want[-1][0] == kids[2].cid  # counter 1 sorts last
    for n in range(len(want) + 3):
        assert store.records("c1", last=n) == want[len(want) - min(n, len(want)) :]
    assert store.records("c1", last=0) == []
    for size in range(1, len(want) + 2):
        assert paged(store, "c1", size) == want
    keys = [decode_record(d).order_key for _, d in want]
    assert store.records_after("c1", keys[1], 2) == want[2:4]  # strictly after, whatever the CID
    assert store.records_after("c1", (T0 + 1, 0, b"", b""), 9) == want[1:]  # a key no record holds
    assert store.records_after("c1", keys[-1], 5) == [] and store.records_after("c1", None, 0) == []
    assert store.records_after("c3", None, 5) == []
    assert store.first("c1") == want[0] and store.first("c2") == (late.cid, late.data)
    assert store.first("c3") is None
    assert store.records("c2") == [(late.cid, late.data)]
    assert store.conversations() == ["c1", "c2"]
    assert store.count() == 6 and store.count("c1") == 5 and store.count("c3") == 0
    assert store.max_hlc() == Hlc(T0 + 1, 1)


def test_iter_all_streams_everything_in_insertion_order(store: Store) -> None:
    records = _many()
    commit(store, *records[:1700])
    commit(store, *records[1700:])
    it = store.iter_all()
    assert isinstance(it, Iterator)
    first = next(it)
    assert first == (records[0].cid, records[0].data)
    assert [first, *it] == [(r.cid, r.data) for r in records]


_MANY: list[Record] = []


def _many() -> list[Record]:
    """2,500 records (more than one page of any paging store), built once per process."""
    if not _MANY:
        _MANY.extend(chain(2500, "big"))
    return _MANY


def test_max_hlc_is_the_largest_ever_stored(store: Store) -> None:
    late = rec("c1", 1, T0 + 50, counter=3)
    early = rec("c2", 1, T0, key=1)
    commit(store, late)
    commit(store, early)
    assert store.max_hlc() == Hlc(T0 + 50, 3)


# ---------------------------------------------------------------- transactions


def _populated(store: Store) -> tuple[list[Record], list[Record]]:
    """A store with records, quarantine entries and an equivocation; returns (stored, fresh)."""
    c1 = chain(4, "c1")
    rival = rec("c1", 4, T0 + 3, (c1[2],), text="rival")
    fresh = chain(6, "c2", key=1)
    commit(store, *c1, rival, equivocations=[(rival.cid, c1[3].cid)],
           pending_put=[pend(fresh[3], missing=(fresh[2].cid,)), pend(fresh[4], "clock")])
    return [*c1, rival], fresh


def _big_writes(stored: list[Record], fresh: list[Record]) -> WriteSet:
    forked = rec("c1", 5, T0 + 9, (stored[3],), text="next")
    return WriteSet(
        records=[*fresh[:3], stored[0], forked],
        pending_put=[pend(fresh[5], missing=(fresh[4].cid, GHOSTS[0])), pend(stored[1])],
        pending_remove=[fresh[3].cid],
        equivocations=[(fresh[0].cid, fresh[1].cid)],
    )


def test_a_transaction_that_raises_leaves_nothing(store: Store) -> None:
    stored, fresh = _populated(store)
    universe = Universe.of([*stored, *fresh])
    before = observe(store, universe)

    def body() -> None:
        store.commit(_big_writes(stored, fresh))
        assert store.count() == len(stored) + 4  # a transaction reads its own writes
        assert store.heads("c2") == [fresh[2].cid]
        store.evict_pending(QuarantineBounds(0, 0))
        assert store.pending_stats() == (0, 0)

    aborted(store, body)
    assert observe(store, universe) == before
    # and the store is whole afterwards: the same writes land normally
    store.commit(_big_writes(stored, fresh))
    assert store.heads("c2") == [fresh[2].cid]
    assert store.count() == len(stored) + 4
    assert store.pending_stats()[0] == 2


def test_nested_transactions_roll_back_together(store: Store) -> None:
    a, b = chain(2)
    before = observe(store, Universe.of([a, b]))

    def body() -> None:
        commit(store, a)
        with store.transaction():
            commit(store, b)
            raise RuntimeError("roll back")  # from the inner transaction

    with pytest.raises(RuntimeError, match="roll back"), store.transaction():
        body()
    assert observe(store, Universe.of([a, b])) == before


def test_commits_in_one_transaction_land_together(store: Store) -> None:
    a, b, c = chain(3)
    with store.transaction():
        commit(store, a)
        commit(store, b)
        assert store.heads("c1") == [b.cid]
        commit(store, c)
    check_against_records(store, [a, b, c])


@pytest.mark.parametrize("where", ["records", "pending_put", "pending_remove", "equivocations"])
def test_a_commit_that_fails_midway_leaves_nothing(store: Store, where: str) -> None:
    stored, fresh = _populated(store)
    universe = Universe.of([*stored, *fresh])
    before = observe(store, universe)
    writes = _big_writes(stored, fresh)
    boom = cast(Any, Exploding())
    if where == "equivocations":
        writes.equivocations.append((boom, fresh[2].cid))
    else:
        getattr(writes, where).append(boom)
    with pytest.raises(RuntimeError, match="boom"):
        store.commit(writes)
    assert observe(store, universe) == before


# ---------------------------------------------------------------- quarantine


def test_pending_put_get_remove(store: Store) -> None:
    a, b, c = chain(3)
    entries = [pend(b, missing=(a.cid,)), pend(c, "clock", wall=T0 + 99), pend(a, missing=(GHOSTS[0],))]
    commit(store, pending_put=entries)
    assert store.pending_get([a.cid, b.cid, c.cid, GHOSTS[1]]) == {e.cid: e for e in entries}
    assert store.pending_stats() == (3, len(a.data) + len(b.data) + len(c.data))
    assert store.count() == 0 and store.conversations() == []  # quarantine is not the record store
    commit(store, pending_remove=[b.cid, GHOSTS[2]])
    assert store.pending_get([a.cid, b.cid, c.cid]) == {e.cid: e for e in entries if e.cid != b.cid}
    assert store.pending_waiting_on([a.cid]) == []
    assert store.pending_stats() == (2, len(a.data) + len(c.data))


def test_pending_put_replaces_an_entry_by_cid(store: Store) -> None:
    a, b = chain(2)
    commit(store, pending_put=[pend(b, missing=(a.cid,))])
    newer = pend(b, "clock", wall=T0 + 77)
    commit(store, pending_put=[newer])
    assert store.pending_get([b.cid]) == {b.cid: newer}
    assert store.pending_waiting_on([a.cid]) == []
    assert store.pending_stats() == (1, len(b.data))


def test_pending_put_replaces_by_cid_within_one_writeset(store: Store) -> None:
    a, b = chain(2)
    newer = pend(b, "clock", wall=T0 + 77)
    commit(store, pending_put=[pend(b, missing=(a.cid,)), newer])
    assert store.pending_get([b.cid]) == {b.cid: newer}
    assert store.pending_waiting_on([a.cid]) == []
    assert store.pending_stats() == (1, len(b.data))


def test_pending_waiting_on(store: Store) -> None:
    recs = chain(4)
    e1 = pend(recs[1], missing=(GHOSTS[0],))
    e2 = pend(recs[2], missing=(GHOSTS[0], GHOSTS[1]))
    e3 = pend(recs[3], "clock")
    commit(store, pending_put=[e1, e2, e3])
    by_cid = sorted([e1, e2], key=lambda e: e.cid)
    assert store.pending_waiting_on([GHOSTS[0]]) == by_cid
    assert store.pending_waiting_on([GHOSTS[0], GHOSTS[1]]) == by_cid  # each entry once
    assert store.pending_waiting_on([GHOSTS[1]]) == [e2]
    assert store.pending_waiting_on([GHOSTS[2], recs[0].cid]) == []
    assert store.pending_waiting_on([]) == []


def test_pending_due(store: Store) -> None:
    recs = chain(4)
    early, soon, later = pend(recs[0], "clock", wall=T0 + 10), pend(recs[1], "clock", wall=T0 + 20), pend(
        recs[2], "clock", wall=T0 + 30
    )
    waiting = pend(recs[3], "parents", (GHOSTS[0],), wall=T0)
    commit(store, pending_put=[soon, waiting, later, early])
    assert store.pending_due(T0 + 9) == []
    assert sorted(store.pending_due(T0 + 20), key=lambda e: e.cid) == sorted([early, soon], key=lambda e: e.cid)
    assert sorted(store.pending_due(T0 + 10**6), key=lambda e: e.cid) == sorted(
        [early, soon, later], key=lambda e: e.cid
    )


def test_evict_pending_drops_the_oldest_first_by_count(store: Store) -> None:
    recs = sorted(chain(5), key=lambda r: r.cid, reverse=True)  # arrival order is not CID order
    for r in recs:
        commit(store, pending_put=[pend(r, missing=(GHOSTS[0],))])
    assert store.evict_pending(QuarantineBounds(max_count=5)) == []
    assert store.evict_pending(QuarantineBounds(max_count=3)) == [recs[0].cid, recs[1].cid]
    assert store.pending_stats() == (3, sum(len(r.data) for r in recs[2:]))
    assert set(store.pending_get([r.cid for r in recs])) == {r.cid for r in recs[2:]}
    assert {e.cid for e in store.pending_waiting_on([GHOSTS[0]])} == {r.cid for r in recs[2:]}
    assert store.evict_pending(QuarantineBounds(max_count=3)) == []
    assert store.evict_pending(QuarantineBounds(max_count=0)) == [r.cid for r in recs[2:]]
    assert store.pending_stats() == (0, 0) and store.pending_waiting_on([GHOSTS[0]]) == []


def test_evict_pending_drops_the_oldest_first_by_bytes(store: Store) -> None:
    recs = [rec("c1", 1, T0 + i, text="x" * (10 + 40 * i)) for i in range(4)]
    recs = [recs[2], recs[0], recs[3], recs[1]]
    for r in recs:
        commit(store, pending_put=[pend(r)])
    sizes = [len(r.data) for r in recs]
    assert len(set(sizes)) == 4
    assert store.evict_pending(QuarantineBounds(max_bytes=sum(sizes))) == []
    assert store.evict_pending(QuarantineBounds(max_bytes=sum(sizes) - 1)) == [recs[0].cid]
    assert store.evict_pending(QuarantineBounds(max_bytes=sizes[3])) == [recs[1].cid, recs[2].cid]
    assert store.pending_stats() == (1, sizes[3])
    assert store.evict_pending(QuarantineBounds(max_bytes=sizes[3] - 1)) == [recs[3].cid]


def test_evict_pending_held_evicts_inside_the_transaction_only_what_it_holds(store: Store) -> None:
    mine, theirs = chain(3, "c1"), chain(2, "c2")
    for r in [theirs[0], *mine, theirs[1]]:  # the oldest entry is of the other conversation
        commit(store, pending_put=[pend(r, missing=(GHOSTS[0],))])
    with store.transaction("c1"):
        got = store.evict_pending_held(QuarantineBounds(max_count=4))
    if got is None:  # a store whose writers of c2 this transaction does not hold off: nothing done
        assert store.pending_stats()[0] == 5
        assert store.evict_pending(QuarantineBounds(max_count=4)) == [theirs[0].cid]
    else:
        assert got == [theirs[0].cid]
    with store.transaction("c1"):
        assert store.evict_pending_held(QuarantineBounds(max_count=2)) == [mine[0].cid, mine[1].cid]
        assert store.evict_pending_held(QuarantineBounds(max_count=2)) == []
    assert set(store.pending_get([r.cid for r in mine + theirs])) == {mine[2].cid, theirs[1].cid}


def test_a_replaced_entry_arrives_anew(store: Store) -> None:
    e1, e2, e3 = (pend(r) for r in chain(3))
    for e in (e1, e2, e3):
        commit(store, pending_put=[e])
    commit(store, pending_put=[e1])
    assert store.evict_pending(QuarantineBounds(max_count=1)) == [e2.cid, e3.cid]


def test_a_pending_entry_for_a_stored_record_is_ignored(store: Store) -> None:
    a, b = chain(2)
    commit(store, a)
    commit(store, pending_put=[pend(a, missing=(GHOSTS[0],))])
    commit(store, b, pending_put=[pend(b, "clock")])  # stored by the same write set
    assert store.pending_get([a.cid, b.cid]) == {}
    assert store.pending_stats() == (0, 0)
    assert store.pending_waiting_on([GHOSTS[0]]) == []
    assert store.pending_due(T0 + 10**6) == []


def test_releasing_an_entry_stores_its_record_and_clears_it(store: Store) -> None:
    a, b = chain(2)
    commit(store, pending_put=[pend(b, missing=(a.cid,))])
    commit(store, a, b, pending_remove=[b.cid])
    assert store.pending_stats() == (0, 0) and store.pending_waiting_on([a.cid]) == []
    assert store.heads("c1") == [b.cid]


# ---------------------------------------------------------------- equivocations


def test_equivocations_are_sorted_pairs_filterable_by_conv(store: Store) -> None:
    root = rec("c1", 1, T0)
    r1, r2, r3 = (rec("c1", 2, T0 + 1, (root,), text=t) for t in ("one", "two", "three"))
    other = [rec("c2", 1, T0, key=1, text=t) for t in ("p", "q")]
    commit(store, root, r1)
    commit(store, r2, equivocations=[(max(r1.cid, r2.cid), min(r1.cid, r2.cid))])
    commit(store, r3, equivocations=[(r3.cid, r1.cid), (r2.cid, r3.cid), (r1.cid, r3.cid)])
    commit(store, *other, equivocations=[(other[1].cid, other[0].cid)])
    commit(store, r2, equivocations=[(min(r1.cid, r2.cid), max(r1.cid, r2.cid))])  # again: no new pair
    c1_pairs = sorted({tuple(sorted(p)) for p in itertools.combinations([r1.cid, r2.cid, r3.cid], 2)})
    c2_pairs = [tuple(sorted(c.cid for c in other))]
    assert store.equivocations("c1") == c1_pairs
    assert store.equivocations("c2") == c2_pairs
    assert store.equivocations() == sorted(c1_pairs + c2_pairs)
    assert store.equivocations("c3") == []
    assert store.at_seq(ACTORS[0], "c1", 2) == sorted([r1.cid, r2.cid, r3.cid])
    top = store.last_own(ACTORS[0], "c1")
    assert top is not None and top.seq == 2 and top.cid in {r1.cid, r2.cid, r3.cid}
    assert store.heads("c1") == sorted([r1.cid, r2.cid, r3.cid])


# ---------------------------------------------------------------- differential


@STORE_EXAMPLES
@given(scripts(quarantine=True))
def test_every_store_answers_alike(tmp_path_factory: pytest.TempPathFactory, script: tuple[History, list[Step]]) -> None:
    answer_alike(sorted(set(FACTORIES) - SERVER_KINDS), tmp_path_factory.mktemp("differential"), script)


@SERVER_EXAMPLES
@given(scripts(quarantine=True))
def test_server_stores_answer_like_the_embedded_ones(
    tmp_path_factory: pytest.TempPathFactory, script: tuple[History, list[Step]]
) -> None:
    answer_alike(sorted(FACTORIES), tmp_path_factory.mktemp("differential"), script)


def answer_alike(kinds: list[str], base: Path, script: tuple[History, list[Step]]) -> None:
    """Run the script against a fresh store of each kind at once; every answer must agree."""
    hist, steps = script
    universe = Universe.of(hist.records, [p for s in steps for p in s.pending_put])
    makers = [StoreMaker(kind, base) for kind in kinds]
    try:
        stores = [make() for make in makers]
        model = QuarantineModel()
        for step in steps:
            for s in stores:
                apply(s, step)
            if not step.rollback:
                model.apply(step)
            first, *rest = (observe(s, universe) for s in stores)
            for kind, other in zip(kinds[1:], rest, strict=True):
                assert other == first, kind
            model.check(stores[0], universe)
    finally:
        for m in makers:
            m.close_all()


class QuarantineModel:
    """What the quarantine must hold: entries by arrival, replaced by CID, never for stored CIDs."""

    def __init__(self) -> None:
        self.stored: set[CID] = set()
        self.pending: OrderedDict[CID, Pending] = OrderedDict()

    def apply(self, step: Step) -> None:
        self.stored |= {r.cid for r in step.records}
        for cid in [*step.pending_remove, *(p.cid for p in step.pending_put)]:
            self.pending.pop(cid, None)
        for p in step.pending_put:
            if p.cid not in self.stored:
                self.pending[p.cid] = p
        if step.evict is not None:
            while self.pending and (
                len(self.pending) > step.evict.max_count
                or sum(len(p.data) for p in self.pending.values()) > step.evict.max_bytes
            ):
                self.pending.popitem(last=False)

    def check(self, store: Store, universe: Universe) -> None:
        assert store.pending_get(universe.cids) == dict(self.pending)
        assert store.pending_stats() == (len(self.pending), sum(len(p.data) for p in self.pending.values()))
        for cid in universe.cids:
            want = sorted((p for p in self.pending.values() if cid in p.missing), key=lambda p: p.cid)
            assert store.pending_waiting_on([cid]) == want
        for w in universe.walls:
            due = [p for p in self.pending.values() if p.reason == "clock" and p.wall_ms <= w]
            assert sorted(store.pending_due(w), key=lambda p: p.cid) == sorted(due, key=lambda p: p.cid)


# ---------------------------------------------------------------- since, compact, snapshot


def pairs(*records: Record) -> list[tuple[CID, bytes]]:
    return [(r.cid, r.data) for r in records]


def test_since_returns_arrivals_of_one_conv_with_a_cursor_that_continues(store: Store) -> None:
    assert store.since(0, "c1")[0] == []
    _, cursor = store.since(0, "c1")
    a, b, c = chain(3)
    late = rec("c1", 1, T0 - 50, key=1, text="late")  # the oldest clock, arriving third
    other = chain(2, "c2", key=2)
    commit(store, a)
    commit(store, other[0], b)
    fresh, cursor = store.since(cursor, "c1")
    assert fresh == pairs(a, b)
    commit(store, late, other[1])
    commit(store, c, a)  # a again: no second arrival
    fresh, cursor = store.since(cursor, "c1")
    assert fresh == pairs(late, c)
    assert store.since(cursor, "c1")[0] == []
    assert store.since(0, "c1")[0] == pairs(a, b, late, c)
    assert store.records("c1")[0] == (late.cid, late.data)  # canonical order is another order
    assert store.since(0, "c2")[0] == pairs(*other)
    assert store.since(0, "absent")[0] == []
    # an empty answer still hands back a cursor that sees what comes next, and a rollback leaves no gap
    _, cursor = store.since(cursor, "c1")
    d = rec("c1", 4, T0 + 3, (c,), text="d")
    aborted(store, lambda: commit(store, d))
    assert store.since(cursor, "c1")[0] == []
    e = rec("c1", 4, T0 + 4, (c,), text="e")
    commit(store, e)
    assert store.since(cursor, "c1")[0] == pairs(e)


def test_cursor_marks_now_for_since(store: Store) -> None:
    a, b, c = chain(3)
    commit(store, a)
    now = store.cursor("c1")  # the conversation's own cursor: `since` continues from it
    assert store.since(now, "c1")[0] == []
    commit(store, b, *chain(1, "c2", key=2))
    assert store.since(now, "c1")[0] == pairs(b)
    aborted(store, lambda: commit(store, c))
    later = store.cursor("c1")
    commit(store, c)
    assert store.since(later, "c1")[0] == pairs(c)


def test_arrivals_page_through_every_conversation_in_arrival_order(store: Store) -> None:
    a, b, c = chain(3)
    other = chain(2, "c2", key=2)
    commit(store, a, other[0])
    commit(store, b, other[1], c)
    seen, cursor = [], 0
    while True:
        page, cursor = store.arrivals(cursor, 2)
        assert len(page) <= 2
        if not page:
            break
        seen += page
    assert seen == [(r.conv, r.cid, r.data) for r in (a, other[0], b, other[1], c)]
    assert store.arrivals(cursor, 10) == ([], cursor)
    # `cursor()` marks now for `arrivals`; a rollback leaves no gap; compacted records are left out
    assert store.arrivals(store.cursor(), 10)[0] == []
    d = rec("c1", 4, T0 + 3, (c,), text="d")
    aborted(store, lambda: commit(store, d))
    e = rec("c1", 4, T0 + 4, (c,), text="e")
    commit(store, e)
    assert store.arrivals(cursor, 10)[0] == [("c1", e.cid, e.data)]
    store.compact("c1", [a.cid], CID.of_record(b"cp"), b"snap")
    assert [cid for _, cid, _ in store.arrivals(0, 10)[0]] == [other[0].cid, b.cid, other[1].cid, c.cid, e.cid]


def test_sync_keys_are_the_conversations_records_by_wall_then_digest_compacted_included(
    store: Store,
) -> None:
    a, b, c = chain(3)
    twin = rec("c1", 1, T0, key=1, text="same ms as a")  # a wall_ms tie: the digest decides
    commit(store, a, b, c, twin, *chain(2, "c2", key=2))
    want = sorted((r.hlc.wall_ms, r.cid.digest) for r in (a, b, c, twin))
    assert store.sync_keys("c1") == want and store.sync_keys("absent") == []
    store.compact("c1", [a.cid], CID.of_record(b"cp"), b"snap")
    assert store.sync_keys("c1") == want


def _two_convs(store: Store) -> tuple[list[Record], list[Record]]:
    c1, c2 = chain(4, "c1"), chain(2, "c2", key=1)
    commit(store, *c1, *c2)
    return c1, c2


CHECKPOINTS = [CID.of_record(b"checkpoint %d" % i) for i in range(3)]


def test_compact_drops_the_bytes_and_keeps_every_header(store: Store) -> None:
    c1, c2 = _two_convs(store)
    universe = Universe.of([*c1, *c2])
    before = observe(store, universe)
    gone = {c1[0].cid, c1[2].cid}
    store.compact("c1", [c1[2].cid, c1[0].cid], CHECKPOINTS[0], b"snap-1")
    kept = [r for r in c1 if r.cid not in gone]
    want = {k: v for k, v in before.items() if not k.startswith("records c1 last=")}
    want["get"] = [None if c in gone else v for c, v in zip(universe.cids, before["get"], strict=True)]
    want["iter_all"] = [p for p in before["iter_all"] if p[0] not in gone]
    want["get_many"] = {c: d for c, d in before["get_many"].items() if c not in gone}
    want["records c1"] = full = pairs(*kept)
    for n in range(len(full) + 2):
        want[f"records c1 last={n}"] = full[len(full) - min(n, len(full)) :]
    assert observe(store, universe) == want  # metas, heads, at_seq, last_own, count, has: all unchanged
    assert store.first("c1") == full[0] != (c1[0].cid, c1[0].data)  # the first held with bytes
    assert store.since(0, "c1")[0] == full and store.since(0, "c2")[0] == pairs(*c2)
    assert store.snapshot("c1") == (CHECKPOINTS[0], b"snap-1") and store.snapshot("c2") is None
    commit(store, c1[0])  # a compacted record offered again is a duplicate, not a resurrection
    assert store.get(c1[0].cid) is None and store.count() == 6
    assert observe(store, universe) == want


def test_compacting_a_whole_conversation_keeps_it_and_its_cursor(store: Store) -> None:
    c1, _ = _two_convs(store)
    _, cursor = store.since(0, "c1")
    store.compact("c1", [r.cid for r in c1], CHECKPOINTS[0], b"all")
    assert store.records("c1") == [] and store.records("c1", last=2) == []
    assert store.since(0, "c1")[0] == []
    assert store.conversations() == ["c1", "c2"] and store.count("c1") == 4
    assert store.heads("c1") == [c1[-1].cid] and store.last_own(ACTORS[0], "c1") == c1[-1].meta
    assert store.at_seq(ACTORS[0], "c1", 2) == [c1[1].cid] and store.max_hlc() == Hlc(T0 + 3, 0)
    nxt = rec("c1", 5, T0 + 9, (c1[-1],), text="after the checkpoint")
    commit(store, nxt)
    assert store.since(cursor, "c1")[0] == pairs(nxt) and store.since(0, "c1")[0] == pairs(nxt)
    assert store.records("c1") == pairs(nxt) and store.heads("c1") == [nxt.cid]


def test_snapshot_is_the_latest_compaction(store: Store) -> None:
    c1, c2 = _two_convs(store)
    assert store.snapshot("c1") is None
    store.compact("c1", [c1[0].cid], CHECKPOINTS[0], b"one")
    store.compact("c1", [c1[1].cid], CHECKPOINTS[1], b"two")
    assert store.snapshot("c1") == (CHECKPOINTS[1], b"two")
    assert store.get(c1[0].cid) is None and store.get(c1[1].cid) is None  # the first stays compacted
    store.compact("c2", [], CHECKPOINTS[2], b"three")
    assert store.snapshot("c2") == (CHECKPOINTS[2], b"three") and store.snapshot("c1") == (CHECKPOINTS[1], b"two")
    assert store.records("c2") == pairs(*c2)


@pytest.mark.parametrize("bad", ["other conv", "unknown"])
def test_compact_refuses_a_record_the_conversation_does_not_hold(store: Store, bad: str) -> None:
    c1, c2 = _two_convs(store)
    store.compact("c1", [c1[0].cid], CHECKPOINTS[0], b"earlier")
    universe = Universe.of([*c1, *c2])
    before = observe(store, universe)
    stranger = c2[0].cid if bad == "other conv" else GHOSTS[0]
    with pytest.raises(StoreError):
        store.compact("c1", [c1[1].cid, c1[2].cid, stranger], CHECKPOINTS[1], b"later")
    assert observe(store, universe) == before
    assert store.snapshot("c1") == (CHECKPOINTS[0], b"earlier") and store.snapshot("c2") is None


def test_a_compact_in_a_transaction_that_raises_leaves_nothing(store: Store) -> None:
    c1, c2 = _two_convs(store)
    nxt = rec("c1", 5, T0 + 9, (c1[-1],), text="next")
    universe = Universe.of([*c1, *c2, nxt])
    before = observe(store, universe)

    def body() -> None:
        commit(store, nxt)
        store.compact("c1", [r.cid for r in [*c1, nxt]], CHECKPOINTS[0], b"snap")
        assert store.get(c1[0].cid) is None and store.snapshot("c1") == (CHECKPOINTS[0], b"snap")

    aborted(store, body)
    assert observe(store, universe) == before and store.snapshot("c1") is None
    assert store.since(0, "c1")[0] == pairs(*c1)


def test_a_refused_compact_caught_inside_a_transaction_changes_nothing(store: Store) -> None:
    c1, c2 = _two_convs(store)
    universe = Universe.of([*c1, *c2])
    before = observe(store, universe)
    with store.transaction(), pytest.raises(StoreError):
        store.compact("c1", [c1[0].cid, c2[0].cid], CHECKPOINTS[0], b"snap")
    assert observe(store, universe) == before and store.snapshot("c1") is None


def test_headers_are_stored_as_compaction_leaves_them(new_store: StoreMaker) -> None:
    """A store that is handed headers (an adopted checkpoint's cover) answers every query as
    one that held the records and compacted them."""
    c1, c2 = chain(4, "c1"), chain(2, "c2", key=1)
    nxt = rec("c1", 5, T0 + 9, (c1[-1],), text="after the checkpoint")
    universe = Universe.of([*c1, *c2, nxt])
    with closing(new_store()) as compacted, closing(new_store()) as adopted:
        commit(compacted, *c1, *c2)
        compacted.compact("c1", [r.cid for r in c1], CHECKPOINTS[0], b"snap")
        commit(compacted, nxt)
        commit(adopted, *c2)
        commit(adopted, nxt, headers=[r.meta for r in c1])  # headers land first: nxt names one
        adopted.compact("c1", [], CHECKPOINTS[0], b"snap")
        want = observe(compacted, universe)
        assert observe(adopted, universe) == want
        assert adopted.since(0, "c1")[0] == pairs(nxt) and adopted.snapshot("c1") == (CHECKPOINTS[0], b"snap")
        commit(adopted, headers=[r.meta for r in c1])  # again: nothing changes
        commit(adopted, headers=[c2[0].meta])  # a header for a record held whole keeps its bytes
        assert observe(adopted, universe) == want


class _RolledBack(Exception):
    pass


def test_a_rollback_moves_the_change_token_past_any_read_inside(store: Store) -> None:
    """A writer caches its tips under the token it read after its own commit; if that commit
    was inside a transaction that rolled back, the cache names records that are gone."""
    a, b = chain(2)
    commit(store, a)
    seen: list[object] = []

    def write_then_fail() -> None:
        with store.transaction():
            commit(store, b)
            seen.append(store.change_token())
            raise _RolledBack

    with pytest.raises(_RolledBack):
        write_then_fail()
    assert not store.has(b.cid)
    assert store.change_token() != seen[0]


def test_cids_like_matches_the_head_and_tail_bytes_of_stored_records(store: Store) -> None:
    records = chain(40)
    commit(store, *records)
    cids = sorted(r.cid for r in records)
    raw = [bytes(c) for c in cids]
    assert store.cids_like(b"", b"", 100) == cids and store.cids_like(b"", b"", 3) == cids[:3]
    for c in raw[:5]:
        assert store.cids_like(c[:6], b"", 100) == [CID(c)]
        assert store.cids_like(b"", c[-4:], 100) == [CID(c)]
        assert store.cids_like(c[:5], c[-3:], 100) == [CID(c)]
    assert store.cids_like(raw[0][:4], b"", 100) == cids  # every record CID starts 01 71 12 20
    by_byte = [c for c in cids if bytes(c)[-1] == raw[0][-1]]
    assert store.cids_like(b"", raw[0][-1:], 100) == by_byte
    assert store.cids_like(b"\xff" * 5, b"", 100) == [] and store.cids_like(b"", bytes(GHOSTS[0])[-8:], 9) == []


def test_keys_since_continues_like_since_and_sums_like_sync_keys(store: Store) -> None:
    a, b, c = chain(3)
    commit(store, a, *chain(2, "c2", key=2))
    keys, cursor = store.keys_since("c1", 0)
    assert sorted(keys) == store.sync_keys("c1") == [(a.hlc.wall_ms, a.cid.digest)]
    token = store.conv_token("c1")
    assert store.conv_token("c1") == token
    commit(store, b, c)
    assert store.conv_token("c1") != token
    fresh, later = store.keys_since("c1", cursor)
    assert sorted(fresh) == sorted((r.hlc.wall_ms, r.cid.digest) for r in (b, c)) and later >= cursor
    assert store.keys_since("c1", later) == ([], later)
    store.compact("c1", [a.cid], CID.of_record(b"cp"), b"snap")  # compacted keys stay in the set
    assert sorted(store.keys_since("c1", 0)[0]) == store.sync_keys("c1")
    total = sum(int.from_bytes(d, "little") for _, d in store.sync_keys("c1")) % (1 << 256)
    assert store.key_summary("c1") == (total, 3) and store.key_summary("absent") == (0, 0)
