"""Trust on first use of a server's key (sync/pins.py, docs/integrity.md §9)."""

from __future__ import annotations

from pathlib import Path

import pytest

from convgraph.core.keys import fingerprint
from convgraph.errors import ConvgraphError, PeerKeyChangedError
from convgraph.sync import pins

K1, K2 = bytes([1]) * 32, bytes([2]) * 32


def test_the_first_key_is_pinned_and_kept() -> None:
    held = pins.pin({}, "https://example.org/", K1)
    assert held == {"https://example.org": K1.hex()}  # one URL, with or without its slash
    assert pins.pin(held, "https://example.org", K1) == held


def test_another_key_is_refused_naming_both_unless_accepted() -> None:
    held = pins.pin({}, "https://example.org", K1)
    with pytest.raises(PeerKeyChangedError) as caught:
        pins.pin(held, "https://example.org/", K2)
    assert (caught.value.pinned, caught.value.got) == (fingerprint(K1), fingerprint(K2))
    assert "--accept-new-key" in str(caught.value)
    assert pins.pin(held, "https://example.org", K2, accept_new=True) == {"https://example.org": K2.hex()}
    assert pins.pin(held, "https://other.example.org", K2) == {"https://example.org": K1.hex(),
                                                               "https://other.example.org": K2.hex()}


def test_pins_survive_a_round_trip_through_the_home(tmp_path: Path) -> None:
    assert pins.load(tmp_path) == {}
    pins.save(tmp_path, {"http://b": K2.hex(), "http://a": K1.hex()})
    assert pins.load(tmp_path) == {"http://a": K1.hex(), "http://b": K2.hex()}
    assert [p.name for p in tmp_path.iterdir()] == [pins.PINS_FILE]  # no temp file left behind


@pytest.mark.parametrize("text", ["not json", "[]", '{"pins": {"http://a": "abc"}}', '{"pins": {"http://a": 5}}'])
def test_a_file_that_is_not_pins_is_an_error_naming_it(tmp_path: Path, text: str) -> None:
    (tmp_path / pins.PINS_FILE).write_text(text)
    with pytest.raises(ConvgraphError, match=pins.PINS_FILE):
        pins.load(tmp_path)
