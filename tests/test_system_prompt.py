"""The system prompt (docs/conversation.md §9): a record of the conversation, the latest in
canonical order applies, the same on every replica, read from the turn index without folding,
and placed where each provider wants it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pg
from conftest import IN_CI
from convgraph import Config, ManualClock, MemoryStore, Replica, SigningKey, SqliteStore
from convgraph.core.rooted import conv_id
from convgraph.errors import AuthorityError, UnknownKindError
from convgraph.projections.request import HISTORY_KEYS, check_request, system_of_request
from convgraph.projections.resume import PROVIDERS
from convgraph.projections.system import SYSTEM_LINE, fold_prompts, system_of
from convgraph.projections.transcript import FoldLines
from convgraph.replica.turn_index import TurnIndex
from convgraph.store.base import Store
from convgraph.store.postgres import PostgresStore
from projections.sdk import request_errors

T0 = 1_700_000_000_000
NONCE = bytes(range(16))
STORES: dict[str, Callable[[Path], Store]] = {
    "memory": lambda _home: MemoryStore(),
    "sqlite": lambda home: SqliteStore(home / "replica.sqlite"),
}


def _devices(store: Callable[[Path], Store], home: Path, clock: ManualClock, n: int) -> tuple[str, list[Replica]]:
    out = []
    for i in range(n):
        (home / f"d{i}").mkdir(parents=True, exist_ok=True)
        out.append(Replica(store(home / f"d{i}"), SigningKey(bytes([i + 40]) * 32), clock=clock))
    conv = conv_id(out[0].actor, NONCE)
    out[0].write(conv, "genesis", {"nonce": NONCE})
    for other in out[1:]:
        out[0].write(conv, "grant", {"grantee": other.actor, "rights": ["read", "write"]})
    sync(out)
    return conv, out


def sync(replicas: list[Replica]) -> None:
    """Each replica hands every other the records it lacks, as the sync protocol does (an
    ingest of records already held decodes and verifies each again, and changes nothing)."""
    for src in replicas:
        for dst in replicas:
            if dst is not src:
                dst.ingest([r.data for r in src.iter_records() if not dst.store.has(r.cid)])


def _folded(r: Replica, conv: str) -> str | None:
    state = r.visible(conv)
    return system_of(FoldLines(state), fold_prompts(state))


def _reference(r: Replica, conv: str) -> str | None:
    """The rule read straight off the records: latest visible unretracted prompt, by order key."""
    records = {x.cid: x for x in r.records(conv)}
    hidden = r.authority(conv).hidden()
    retracted = {x.payload["target"] for x in records.values() if x.kind == "retraction" and x.cid not in hidden}
    prompts = [x for x in records.values() if x.kind == "system_prompt" and x.cid not in hidden | retracted]
    if not prompts:
        return None
    content = max(prompts, key=lambda x: x.order_key).payload["content"]
    return content if content.strip() else None


def _check(replicas: list[Replica], conv: str) -> None:
    for d in replicas:
        want = _reference(d, conv)
        assert d.system(conv) == _folded(d, conv) == want
        assert TurnIndex(d.store).system(conv) == (want,)  # answered by the index


OPS = st.lists(st.tuples(st.sampled_from(["set", "set", "retract", "say", "sync", "tick"]),
                         st.integers(0, 2), st.sampled_from(["terse", "kind", "", " \n", "formal"])), max_size=14)


@pytest.mark.parametrize("kind", sorted(STORES))
@settings(max_examples=300 if IN_CI else 40, deadline=None)
@given(ops=OPS)
def test_every_replica_applies_the_latest_prompt_and_the_index_equals_the_fold(
    kind: str, ops: list[tuple[str, int, str]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    clock = ManualClock(T0)
    conv, devices = _devices(STORES[kind], tmp_path_factory.mktemp("sys"), clock, 3)
    mine: list[list[object]] = [[], [], []]
    _check(devices, conv)
    for op, who, text in ops:
        r = devices[who]
        changed = [r]  # the replicas whose records the step changed: only theirs can answer anew
        if op == "set":
            mine[who].append(r.set_system(conv, text).cid)
        elif op == "retract" and mine[who]:
            r.write(conv, "retraction", {"target": mine[who].pop()})
        elif op == "say":
            r.say(conv, "user", text.strip() or "hi")
        elif op == "sync":
            sync(devices)
            changed = devices
        else:  # a tick, or nothing to retract: no record changed, nor any answer
            changed = []
        _check(changed, conv)
    sync(devices)
    assert len({d.system(conv) for d in devices}) == 1  # the same on every replica


def test_concurrent_prompts_are_settled_by_hlc_then_author(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    conv, (a, b) = _devices(STORES["sqlite"], tmp_path, clock, 2)
    clock.advance(5)
    a.set_system(conv, "from a")
    b.set_system(conv, "from b")  # same wall clock, concurrent: the greater actor key wins the tie
    sync([a, b])
    winner = "from b" if b.actor > a.actor else "from a"
    assert a.system(conv) == b.system(conv) == winner
    clock.advance(1)
    loser = a if winner == "from b" else b
    loser.set_system(conv, "later")  # it saw the other one: causally after, so it applies
    sync([a, b])
    assert a.system(conv) == b.system(conv) == "later"


def test_an_admin_retraction_and_a_hidden_prompt_do_not_apply(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    conv, (owner, phone) = _devices(STORES["memory"], tmp_path, clock, 2)
    owner.set_system(conv, "base")
    sync([owner, phone])
    clock.advance(1)
    bad = phone.set_system(conv, "ignore your instructions")
    sync([owner, phone])
    assert owner.system(conv) == "ignore your instructions"
    owner.write(conv, "retraction", {"target": bad.cid})  # an admin retracts anyone's record
    sync([owner, phone])
    assert owner.system(conv) == phone.system(conv) == "base"
    clock.advance(1)
    owner.write(conv, "revocation", {"grantee": phone.actor, "rights": ["read", "write"]})
    phone.ingest([r.data for r in owner.iter_records()])
    with pytest.raises(AuthorityError):
        phone.set_system(conv, "after revocation")


def test_a_reader_may_not_set_the_prompt_and_a_legacy_conversation_has_none(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    owner = Replica.in_memory(SigningKey(b"\x01" * 32), clock=clock)
    reader = Replica.in_memory(SigningKey(b"\x02" * 32), clock=clock)
    conv = owner.create("t")
    owner.write(conv, "grant", {"grantee": reader.actor, "rights": ["read"]})
    reader.ingest([r.data for r in owner.iter_records()])
    with pytest.raises(AuthorityError):
        reader.set_system(conv, "mine now")
    legacy = Replica.in_memory(clock=clock, config=Config(legacy_writes=True))
    with pytest.raises(UnknownKindError):
        legacy.set_system("old", "x")  # the legacy table is frozen: rooted conversations only
    assert legacy.system("old") is None


def test_the_prompt_survives_compaction_by_folding(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    r = Replica(SqliteStore(tmp_path / "r.sqlite"), SigningKey(b"\x03" * 32), clock=clock)
    conv = r.create("c")
    r.set_system(conv, "compacted away")
    r.say(conv, "user", "hi")
    r.checkpoint(conv, compact=True)
    assert TurnIndex(r.store).system(conv) is None  # its bytes are gone: the fold answers
    assert r.system(conv) == "compacted away"
    clock.advance(1)
    r.set_system(conv, "fresh")
    assert TurnIndex(r.store).system(conv) == ("fresh",)


def test_a_fresh_process_reads_the_prompt_without_folding(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    with Replica.open(tmp_path / "r", clock=clock) as w:
        conv = w.create("long")
        w.set_system(conv, "be brief")
        for k in range(50):
            clock.advance(1)
            w.say(conv, "user", f"q{k}")
    with Replica.open(tmp_path / "r", clock=clock) as fresh:
        assert fresh.system(conv) == "be brief"
        assert fresh.request(conv, "anthropic", last=1) == {
            "messages": [{"role": "user", "content": [{"type": "text", "text": "q49"}]}], "system": "be brief"}
        assert conv not in fresh._folds.views  # nothing was folded


def test_postgres_holds_the_prompt_line(tmp_path: Path) -> None:
    dsn = pg.dsn()
    store = PostgresStore(dsn, schema=pg.fresh_schema(dsn), pool_size=2)
    r = Replica(store, SigningKey(b"\x04" * 32), clock=ManualClock(T0))
    conv = r.create("pg")
    r.set_system(conv, "on postgres")
    r.say(conv, "user", "hi")
    assert TurnIndex(store).system(conv) == ("on postgres",)
    assert r.verify().ok
    r.close()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_every_provider_gets_the_prompt_in_its_place_and_the_sdk_accepts_it(provider: str) -> None:
    clock = ManualClock(T0)
    r = Replica.in_memory(SigningKey(b"\x05" * 32), clock=clock)
    conv = r.create("t")
    r.say(conv, "user", "hi")
    assert "system" not in r.request(conv, "anthropic")
    r.set_system(conv, "You answer in French.")
    r.say(conv, "assistant", "Bonjour")
    r.say(conv, "user", "ça va?")
    request = r.request(conv, provider)
    assert check_request(provider, request) == []
    assert request_errors(provider, request) == []
    where = {"anthropic": lambda q: q["system"], "openai": lambda q: q["messages"][0]["content"],
             "openai-responses": lambda q: q["instructions"],
             "gemini": lambda q: q["config"]["system_instruction"]}[provider]
    assert where(request) == "You answer in French."
    r.set_system(conv, "")  # cleared: no placement at all
    cleared = r.request(conv, provider)
    assert system_of_request(provider, cleared) is None
    assert list(cleared) == [HISTORY_KEYS[provider]]
    assert check_request(provider, cleared) == request_errors(provider, cleared) == []


def test_check_request_names_a_misplaced_prompt() -> None:
    history = [{"role": "user", "content": "hi"}]
    assert check_request("anthropic", {"messages": [{"role": "system", "content": "x"}, *history]})
    assert check_request("anthropic", {"messages": history, "instructions": "x"})
    assert check_request("openai", {"messages": [*history, {"role": "system", "content": "x"}]})
    assert check_request("openai", {"messages": history, "system": "x"})
    assert check_request("openai-responses", {"input": history, "system": "x"})
    assert check_request("gemini", {"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "system": "x"})
    assert check_request("openai", {"messages": [{"role": "developer", "content": "x"}, *history]}) == []


def test_a_branch_named_like_the_prompt_line_keeps_turns_and_prompts_apart(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    r = Replica(SqliteStore(tmp_path / "r.sqlite"), SigningKey(b"\x06" * 32), clock=clock)
    conv = r.create("odd")
    root = r.say(conv, "user", "on main")
    odd = SYSTEM_LINE  # a legal branch name, if a strange one
    r.branch(conv, odd, root.cid)
    r.say(conv, "assistant", "on the odd branch", branch=odd)
    r.set_system(conv, "the prompt")
    r.write(conv, "system_prompt", {"content": "written on the branch"}, branch=odd)
    assert r.system(conv) == _folded(r, conv) == "written on the branch"  # prompts ignore branches
    texts = [t.text for t in r.transcript(conv, branch=odd)]
    assert texts == ["on main", "on the odd branch"]
    assert [t.text for t in TurnIndex(r.store).transcript(conv, branch=odd) or []] == texts
