"""Request signatures: only the signer's exact, fresh, first request passes."""

from __future__ import annotations

import pytest

from convgraph import SigningKey
from convgraph.errors import ServerBusyError, UnauthenticatedError
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


def test_the_signed_target_is_the_raw_path_and_query_as_sent() -> None:
    """Percent-escapes are signed as they travel: signing the decoded form does not verify."""
    raw = "/v1/conversations/a%20b/heads?after=1"
    assert verify(signed(method="GET", target=raw, body=b""), method="GET", target=raw, body=b"") == KEY.public
    decoded = signed(method="GET", target="/v1/conversations/a b/heads?after=1", body=b"")
    with pytest.raises(UnauthenticatedError, match="bad request signature"):
        verify(decoded, method="GET", target=raw, body=b"")


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


def test_a_full_nonce_log_refuses_new_requests_and_forgets_no_unexpired_nonce() -> None:
    log = MemoryNonces(max_entries=3)
    for i in range(3):
        assert log.first_use(b"a", f"n{i}", NOW + 10 + i, NOW)
    with pytest.raises(ServerBusyError) as caught:
        log.first_use(b"a", "n3", NOW + 10, NOW)
    assert caught.value.status == 503 and caught.value.limit == 3 and caught.value.rule == "busy"
    assert not log.first_use(b"a", "n0", NOW + 10, NOW)  # the oldest is still remembered: no replay
    assert log.first_use(b"a", "n3", NOW + 20, NOW + 11)  # n0 expired, which made room
    assert not log.first_use(b"a", "n1", NOW + 20, NOW + 11)  # n1 still within its window
    assert log.first_use(b"a", "n0", NOW + 30, NOW + 13)  # expired nonces may be used again


def test_a_full_log_refuses_a_signed_request_after_checking_its_signature() -> None:
    verifier = Verifier(MemoryNonces(max_entries=1))
    verify(signed(), verifier=verifier)
    with pytest.raises(UnauthenticatedError, match="bad request signature"):  # forgeries never reach the log
        verify(signed(nonce="f" * 16), verifier=verifier, body=b"forged")
    with pytest.raises(ServerBusyError):
        verify(signed(nonce="g" * 16), verifier=verifier)


@pytest.mark.parametrize(("headers", "why"), [
    ({}, "missing header"),
    ({**signed(), auth.ACTOR: "not-an-actor"}, "not an actor id"),
    ({**signed(), auth.TIMESTAMP: "soon"}, "decimal digits"),
    ({**signed(), auth.SIGNATURE: "zz"}, "lower-case hex"),
    # one spelling each: what int() and bytes.fromhex() would also have taken is refused
    ({**signed(), auth.TIMESTAMP: f"+{NOW}"}, "decimal digits"),
    ({**signed(), auth.TIMESTAMP: f"{NOW // 1000}_{NOW % 1000:03d}"}, "decimal digits"),
    ({**signed(), auth.SIGNATURE: signed()[auth.SIGNATURE].upper()}, "lower-case hex"),
    ({**signed(), auth.SIGNATURE: " ".join(signed()[auth.SIGNATURE][i:i + 2] for i in range(0, 128, 2))},
     "lower-case hex"),
    ({**signed(), auth.NONCE: "short"}, "16 to 64"),
])
def test_malformed_headers_say_what_is_wrong(headers: dict[str, str], why: str) -> None:
    with pytest.raises(UnauthenticatedError) as caught:
        verify(headers)
    assert why in caught.value.reason
