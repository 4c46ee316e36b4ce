"""A two-device conversation with concurrent writes, a branch and a merge, in SQLite replicas."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from convgraph.cli import aliases
from convgraph.core.cid import CID
from convgraph.replica import Replica
from convgraph.sync.local import sync_replicas

TITLE = "trip planning"


@dataclass(frozen=True)
class World:
    laptop: Path
    phone: Path
    conv: str
    merge: CID
    labels: dict[str, str]  # CID text -> what the test calls the record


def two_devices(base: Path) -> World:
    """The laptop owns the conversation and grants the phone; both write at once (a fork the
    next write joins), the laptop branches, the phone answers on the branch, the laptop merges."""
    laptop_home, phone_home = base / "laptop", base / "phone"
    with Replica.open(laptop_home) as laptop, Replica.open(phone_home) as phone:
        conv = laptop.create(TITLE)
        with aliases.editing(laptop_home) as table:
            table["trip"] = conv
        laptop.write(conv, "grant", {"grantee": phone.actor, "rights": ["read", "write"]})
        laptop.say(conv, "user", "Plan three days in Lisbon.")
        sync_replicas(laptop, phone, [conv])
        day1 = laptop.say(conv, "assistant", "Day 1: Alfama and the castle.")
        budget = phone.say(conv, "user", "Budget is 800 EUR.")  # concurrent: neither has seen the other's
        sync_replicas(laptop, phone, [conv])
        joined = laptop.say(conv, "assistant", "Noted the budget; here is the revised plan.")
        fork = laptop.branch(conv, "day-trips", joined.cid, purpose="compare day trips")
        asked = laptop.say(conv, "user", "What about Sintra?", branch="day-trips")
        sync_replicas(laptop, phone, [conv])
        answer = phone.say(conv, "assistant", "Sintra: Pena Palace, by train in 40 minutes.", branch="day-trips")
        sync_replicas(laptop, phone, [conv])
        merged = laptop.merge(conv, "day-trips", accepted=[answer.cid], content="Day 3: Sintra.")
        sync_replicas(laptop, phone, [conv])
    named = {"day 1": day1, "budget": budget, "joined": joined, "branch": fork, "sintra?": asked,
             "sintra": answer, "merge": merged}
    return World(laptop_home, phone_home, conv, merged.cid, {str(r.cid): name for name, r in named.items()})
