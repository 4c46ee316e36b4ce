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
