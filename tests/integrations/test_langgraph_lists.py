"""Property: a messages list rebuilt from a chain of deltas newest first (`resolve`) is exactly
the list applying the deltas oldest first gives, in both delta forms, from any cached base."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from convgraph.integrations._langgraph_lists import items_of, resolve, spans

# one checkpoint's edit of the list: keep some of the parent's places (in any order, some
# twice), drop others, add new entries between them
EDITS = st.lists(st.tuples(st.lists(st.integers(0, 40), max_size=12), st.integers(0, 3),
                           st.booleans(), st.booleans()), min_size=1, max_size=25)


def _applied(delta: dict[str, Any], base: list[Any]) -> list[Any]:
    """The list a delta makes of its base's, one delta at a time: the reference."""
    out: list[Any] = []
    for item in items_of(delta):
        out += base[item[0]:item[1]] if type(item) is list else [item]
    return out


def _chain(edits: list[tuple[list[int], int, bool, bool]]) -> tuple[list[dict[str, Any]], list[list[Any]]]:
    """Deltas (oldest first) and the list after each, from `edits`: kept places (mod the parent's
    length), how many new entries, whether they come first, whether the delta takes the first form."""
    deltas: list[dict[str, Any]] = []
    lists: list[list[Any]] = []
    prior: list[Any] = []
    for n, (kept, new, front, first_form) in enumerate(edits):
        fresh = [f"e{n}.{k}" for k in range(new)]
        if first_form:  # `keep` a prefix, then `add`
            keep = min(len(kept), len(prior))
            delta: dict[str, Any] = {"keep": keep, "add": fresh}
        else:
            places = [k % len(prior) for k in kept] if prior else []
            plan: list[Any] = [*fresh, *places] if front else [*places, *fresh]
            delta = {"spans": spans(plan)}
        deltas.append(delta)
        prior = _applied(delta, prior)
        lists.append(prior)
    return deltas, lists


@settings(max_examples=300, deadline=None)
@given(EDITS, st.integers(0, 30))
def test_resolving_newest_first_equals_applying_oldest_first(
    edits: list[tuple[list[int], int, bool, bool]], cut: int,
) -> None:
    deltas, lists = _chain(edits)
    top = len(deltas) - 1
    below = min(cut, top)  # the chain stops at a cached list (or at the first delta: no base)
    base = lists[below - 1] if below else []
    chain = list(reversed(deltas[below:]))
    entries, messages, missing = resolve(chain, (base, [f"msg:{e}" for e in base]))
    assert entries == lists[top]
    assert sorted(missing) == [i for i, m in enumerate(messages) if m is None]
    # what came from the base keeps its messages; the rest is what the chain's deltas add
    assert all(m == f"msg:{e}" for e, m in zip(entries, messages, strict=True) if m is not None)
    assert all(type(entries[i]) is str and not entries[i].startswith("msg") for i in missing)


def test_an_empty_chain_is_the_base_and_an_empty_list_is_empty() -> None:
    assert resolve([], (["a"], ["A"])) == (["a"], ["A"], [])
    assert resolve([{"spans": []}], (["a"], ["A"])) == ([], [], [])
    assert resolve([{"keep": 1, "add": []}], (["a", "b"], ["A", "B"])) == (["a"], ["A"], [])


def test_a_long_append_only_chain_resolves_each_entry_once() -> None:
    """Ten thousand checkpoints each adding one message: every entry is read once, in order."""
    deltas = [{"spans": ["e0"]}] + [{"spans": [[0, n], f"e{n}"]} for n in range(1, 10_000)]
    entries, messages, missing = resolve(list(reversed(deltas)), ([], []))
    assert entries == [f"e{n}" for n in range(10_000)]
    assert missing == list(range(10_000)) and messages == [None] * 10_000
