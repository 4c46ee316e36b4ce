"""Short actor ids: the start of a known key's id or of its fingerprint; whole ids need no list."""

from __future__ import annotations

import pytest

from convgraph.core import short_actor
from convgraph.core.keys import actor_text, fingerprint
from convgraph.errors import AmbiguousActorError, DecodeError, NotFoundError

A, B = bytes(31) + b"\x01", bytes(31) + b"\x02"  # their ids share 49 characters
C = bytes(range(32))


def _known() -> list[bytes]:
    return [A, B, C]


def _never() -> list[bytes]:
    raise AssertionError("a whole id must not ask for the known keys")


def test_a_whole_id_names_its_key_known_or_not() -> None:
    assert short_actor.resolve(actor_text(C), _never) == C


def test_the_start_of_an_id_or_of_a_fingerprint_names_the_one_key_it_matches() -> None:
    assert short_actor.resolve(actor_text(C)[:6], _known) == C
    assert short_actor.resolve(fingerprint(A)[:8], _known) == A
    assert short_actor.resolve(actor_text(B)[:51], _known) == B


def test_several_matches_list_the_candidates() -> None:
    with pytest.raises(AmbiguousActorError) as caught:
        short_actor.resolve("aaaa", _known)
    assert caught.value.candidates == (actor_text(A), actor_text(B)) and "give more characters" in str(caught.value)


def test_an_unknown_short_id_says_only_known_keys_can_be_cut_short() -> None:
    unknown = actor_text(bytes([255]) * 32)[:8]
    with pytest.raises(NotFoundError, match="a short id names only a key the replica knows") as caught:
        short_actor.resolve(unknown, _known, "conversation cg1x")
    assert not isinstance(caught.value, AmbiguousActorError) and "conversation cg1x" in str(caught.value)


@pytest.mark.parametrize("text", ["abc", "ABCDEF", "abcd-e", "a" * 53, "1" * 52])
def test_what_cannot_be_part_of_an_id_is_refused(text: str) -> None:
    with pytest.raises(DecodeError):
        short_actor.resolve(text, _known)


# --- found by mutation testing (tests/MUTATION.md, issue 30 §4) ----------------------------------

def _sharing(count: int) -> list[bytes]:
    """`count` keys whose ids all start with `aaaa` (31 zero bytes, then 1..count)."""
    return [bytes(31) + bytes([n]) for n in range(1, count + 1)]


def _shown(keys: list[bytes]) -> str:
    return ", ".join(f"{actor_text(k)} ({fingerprint(k)})" for k in sorted(keys))


def test_a_refused_short_id_is_quoted_to_80_characters_and_the_forms_it_may_take_are_named() -> None:
    with pytest.raises(DecodeError) as caught:
        short_actor.resolve("1" * 100, _known)
    assert str(caught.value) == (
        f"{'1' * 80!r} is not an actor id: expected the whole 52-character actor id (as "
        "`convgraph init` and `convgraph device add` print it) or at least 4 characters from the "
        "start of the id or of its fingerprint (as `log` and `members` print them)")


def test_a_refused_whole_id_says_what_an_actor_id_is_made_of() -> None:
    with pytest.raises(DecodeError) as caught:
        short_actor.resolve("1" * 52, _known)
    assert str(caught.value) == f"not an actor id: {'1' * 52!r}: a 52-character actor id is base32, a-z and 2-7"


def test_where_the_keys_come_from_defaults_to_this_replica() -> None:
    with pytest.raises(NotFoundError, match=r"^no key known to this replica \(an author"):
        short_actor.resolve(actor_text(bytes([255]) * 32)[:8], _known)


def test_an_ambiguity_names_ten_candidates_then_how_many_more() -> None:
    keys = _sharing(12)
    with pytest.raises(AmbiguousActorError) as caught:
        short_actor.resolve("aaaa", lambda: keys)
    assert str(caught.value) == (
        f"'aaaa' matches 12 keys known to this replica: {_shown(keys[:10])} and 2 more; give more characters")
    assert caught.value.prefix == "aaaa" and caught.value.candidates == tuple(actor_text(k) for k in keys[:10])


@pytest.mark.parametrize("count", [2, 10])
def test_an_ambiguity_of_at_most_ten_lists_them_all_and_no_more(count: int) -> None:
    keys = _sharing(count)
    with pytest.raises(AmbiguousActorError) as caught:
        short_actor.resolve("aaaa", lambda: keys, "conversation cg1x")
    assert str(caught.value) == (
        f"'aaaa' matches {count} keys known to conversation cg1x: {_shown(keys)}; give more characters")
