"""The terminal DAG drawing: every record once, lanes opened by merges and closed at forks."""

from __future__ import annotations

import random

from convgraph import Draft, ManualClock, Record, Replica
from convgraph.cli.graph_view import render


def _label(r: Record) -> str:
    return str(r.payload["content"])


def test_linear_chain_is_one_lane(replica: Replica) -> None:
    recs = replica.write_many("c", [Draft("user_message", {"content": f"m{i}"}) for i in range(3)])
    assert render(recs, _label) == ["*  m2", "*  m1", "*  m0"]


def test_fork_and_join() -> None:
    clock = ManualClock()
    a, b = Replica.in_memory(clock=clock), Replica.in_memory(clock=clock)
    root = a.write("c", "user_message", {"content": "root"})
    b.ingest([root.data])
    a.write("c", "user_message", {"content": "left"})
    b.write("c", "user_message", {"content": "right"})
    a.ingest([r.data for r in b.records("c")])
    a.write("c", "user_message", {"content": "join"})
    lines = render(a.records("c"), _label)
    assert lines[0] == "*  join"
    assert lines[1] == "| \\"
    assert lines[-2] == "| /"
    assert lines[-1] == "*  root"
    assert sorted(x.split("  ")[-1] for x in lines if "*" in x) == ["join", "left", "right", "root"]


def test_every_record_drawn_exactly_once_on_random_dags() -> None:
    rng = random.Random(7)
    clock = ManualClock()
    reps = [Replica.in_memory(clock=clock) for _ in range(3)]
    for i in range(60):
        w = rng.choice(reps)
        other = rng.choice(reps)
        if rng.random() < 0.4:
            w.ingest([r.data for r in other.records("c")])
        w.write("c", "user_message", {"content": f"n{i}"})
    for r in reps[1:]:
        reps[0].ingest([x.data for x in r.records("c")])
    records = reps[0].records("c")
    lines = render(records, _label)
    drawn = [x.split("  ")[-1] for x in lines if "*" in x]
    assert sorted(drawn) == sorted(str(r.payload["content"]) for r in records)
    assert drawn == [str(r.payload["content"]) for r in reversed(records)]


def _text(r: Record) -> str:
    return str(r.payload.get("content") or r.payload.get("name") or r.kind)


def test_a_branch_forks_from_its_fork_point_and_a_merge_joins_it_back(replica: Replica) -> None:
    conv = replica.create("forks")
    one = replica.say(conv, "user", "one")
    replica.say(conv, "assistant", "two")
    replica.branch(conv, "alt", one.cid)  # its DAG parent is "two", the head; it forks from "one"
    replica.say(conv, "user", "b1", branch="alt")
    replica.say(conv, "assistant", "b2", branch="alt")
    replica.say(conv, "user", "three")  # main again: its DAG parent is b2, its line's is "two"
    assert render(replica.records(conv), _text) == [
        "*  three",
        "| *  b2",
        "| *  b1",
        "| *  alt",
        "* |  two",
        "| /",
        "*  one",
        "*  genesis",
    ]
    replica.merge(conv, "alt")
    assert render(replica.records(conv), _text)[:3] == ["*  merge", "| \\", "* |  three"]


def test_a_fork_point_outside_the_records_drawn_keeps_its_lane_open(replica: Replica) -> None:
    conv = replica.create("window")
    one = replica.say(conv, "user", "one")
    replica.say(conv, "assistant", "two")
    replica.branch(conv, "alt", one.cid)
    replica.say(conv, "user", "b1", branch="alt")
    assert render(replica.records(conv)[-2:], _text) == ["*  b1", "*  alt"]
