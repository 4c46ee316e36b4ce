"""Request signatures: only the signer's exact, fresh, first request passes."""

from __future__ import annotations

import pytest

from convgraph import SigningKey
from convgraph.errors import UnauthenticatedError
from convgraph.server import auth
from convgraph.server.auth import MemoryNonces, Verifier

KEY = SigningKey(bytes(range(32)))
NOW = 1_700_000_000_000
NONCE = "0123456789abcdef"


def signed(**over: object) -> dict[str, str]:
    args: dict[str, object] = {"method": "POST", "target": "/v1/sync", "body": b"msg", "now_ms": NOW, "nonce": NONCE}
    args.update(over)
    return auth.sign(KEY, args["method"], args["target"], args["body"], now_ms=args["now_ms"], nonce=args["nonce"])  # type: ignore[arg-type]


def verify(headers: dict[str, str], *, method: str = "POST", target: str = "/v1/sync", body: bytes = b"msg",
           now: int = NOW, verifier: Verifier | None = None) -> bytes:
    return (verifier or Verifier(MemoryNonces())).verify(method, target, body, headers, now_ms=now)


def test_a_signed_request_names_its_signer() -> None:
    assert verify(signed()) == KEY.public


@pytest.mark.parametrize(("change", "why"), [
    ({"method": "GET"}, "signature does not verify"),
    ({"target": "/v1/sync?x=1"}, "signature does not verify"),
    ({"body": b"msh"}, "signature does not verify"),
    ({"now": NOW + 60_001}, "ms from the server's clock"),
    ({"now": NOW - 60_001}, "ms from the server's clock"),
])
def test_any_change_or_a_stale_clock_is_refused(change: dict[str, object], why: str) -> None:
    with pytest.raises(UnauthenticatedError) as caught:
        verify(signed(), **change)  # type: ignore[arg-type]
    assert why in caught.value.reason and caught.value.status == 401


def test_a_nonce_is_good_once_within_the_window_and_forgotten_after() -> None:
    verifier = Verifier(MemoryNonces(), window_ms=1000)
    verify(signed(), verifier=verifier)
    with pytest.raises(UnauthenticatedError, match="replayed"):
        verify(signed(), verifier=verifier, now=NOW + 500)
    other = SigningKey(bytes(32))
    headers = auth.sign(other, "POST", "/v1/sync", b"msg", now_ms=NOW, nonce=NONCE)
    assert verifier.verify("POST", "/v1/sync", b"msg", headers, now_ms=NOW) == other.public  # per key


def test_the_nonce_log_is_bounded_and_drops_the_oldest() -> None:
    log = MemoryNonces(max_entries=3)
    for i in range(5):
        assert log.first_use(b"a", f"n{i}", NOW + 10, NOW)
    assert not log.first_use(b"a", "n4", NOW + 10, NOW)
    assert log.first_use(b"a", "n0", NOW + 10, NOW)  # evicted: only a bound, the window still holds
    assert log.first_use(b"a", "n4", NOW + 20, NOW + 11)  # expired


@pytest.mark.parametrize(("headers", "why"), [
    ({}, "missing header"),
    ({**signed(), auth.ACTOR: "not-an-actor"}, "not an actor id"),
    ({**signed(), auth.TIMESTAMP: "soon"}, "invalid literal"),
    ({**signed(), auth.SIGNATURE: "zz"}, "non-hexadecimal"),
    ({**signed(), auth.NONCE: "short"}, "16 to 64"),
])
def test_malformed_headers_say_what_is_wrong(headers: dict[str, str], why: str) -> None:
    with pytest.raises(UnauthenticatedError) as caught:
        verify(headers)
    assert why in caught.value.reason


def test_a_forged_request_does_not_use_up_the_genuine_requests_nonce() -> None:
    verifier = Verifier(MemoryNonces())
    forged = {**signed(), auth.SIGNATURE: SigningKey(bytes(32)).sign(b"something else").hex()}
    with pytest.raises(UnauthenticatedError, match="bad request signature"):
        verify(forged, verifier=verifier)
    assert verify(signed(), verifier=verifier) == KEY.public
    with pytest.raises(UnauthenticatedError, match="replayed"):
        verify(signed(), verifier=verifier)


@pytest.mark.parametrize("later", [1, 500, 1000])
def test_a_request_stamped_ahead_stays_unreplayable_while_its_stamp_is_fresh(later: int) -> None:
    # stamped a whole window ahead of the server: fresh until stamp + window, so its nonce
    # must be remembered until then, not until the server's own now + window
    verifier = Verifier(MemoryNonces(), window_ms=1000)
    ahead = signed(now_ms=NOW + 1000)
    assert verify(ahead, verifier=verifier) == KEY.public
    with pytest.raises(UnauthenticatedError, match="replayed"):
        verify(ahead, verifier=verifier, now=NOW + 1000 + later)


@pytest.mark.parametrize("skew", [60_000, -60_000])
def test_a_request_exactly_one_window_off_is_still_fresh(skew: int) -> None:
    assert verify(signed(), now=NOW + skew) == KEY.public
