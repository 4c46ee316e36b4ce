"""Request signatures: only the signer's exact, fresh, first request passes."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from convgraph import SigningKey
from convgraph.core.keys import actor_text
from convgraph.errors import ServerBusyError, UnauthenticatedError
from convgraph.sync import auth
from convgraph.sync.auth import MemoryNonces, Verifier

DOCS = Path(__file__).resolve().parents[2] / "docs"
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


def test_check_leaves_the_nonce_to_record_so_the_server_can_check_where_it_is_cheap() -> None:
    verifier = Verifier(MemoryNonces())
    first = verifier.check("POST", "/v1/sync", b"msg", signed(), now_ms=NOW)
    again = verifier.check("POST", "/v1/sync", b"msg", signed(), now_ms=NOW)  # nothing recorded yet
    assert first == again and first.actor == KEY.public
    assert verifier.record(first) == KEY.public
    with pytest.raises(UnauthenticatedError, match="replayed"):
        verifier.record(again)
    with pytest.raises(UnauthenticatedError, match="replayed"):  # and `verify` sees what `record` logged
        verify(signed(), verifier=verifier)


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


def test_the_signed_bytes_are_exactly_the_documented_ones() -> None:
    # docs/sync.md: "convgraph/http/v1\n" METHOD "\n" PATH[?QUERY] "\n" hex(sha256(body)) "\n" TIMESTAMP "\n" NONCE "\n"
    digest = hashlib.sha256(b"body").hexdigest()
    expected = f"convgraph/http/v1\nPOST\n/v1/sync?x=1\n{digest}\n1700\n{NONCE}\n".encode()
    assert auth.signing_input("post", "/v1/sync?x=1", b"body", 1700, NONCE) == expected
    headers = auth.sign(KEY, "post", "/v1/sync?x=1", b"body", now_ms=1700, nonce=NONCE)
    assert headers == {
        "x-convgraph-actor": actor_text(KEY.public), "x-convgraph-timestamp": "1700",
        "x-convgraph-nonce": NONCE, "x-convgraph-signature": KEY.sign(expected).hex(),
    }


@pytest.mark.parametrize(("nonce", "ok"), [
    ("n" * 15, False), ("n" * 16, True), ("n" * 64, True), ("n" * 65, False), ("é" * 16, False),
])
def test_a_nonce_is_16_to_64_ascii_characters(nonce: str, ok: bool) -> None:
    headers = signed(nonce=nonce)
    if ok:
        assert verify(headers) == KEY.public
        return
    with pytest.raises(UnauthenticatedError) as caught:
        verify(headers)
    assert (caught.value.message, caught.value.reason) == (
        "malformed nonce", "the nonce must be 16 to 64 ASCII characters")


def test_each_refusal_says_why_in_words_a_client_can_act_on() -> None:
    with pytest.raises(UnauthenticatedError) as caught:
        verify({auth.NONCE: NONCE})
    assert (caught.value.message, caught.value.reason) == (
        "request is not signed",
        "missing header(s): x-convgraph-actor, x-convgraph-timestamp, x-convgraph-signature")
    with pytest.raises(UnauthenticatedError) as caught:
        verify({**signed(), auth.TIMESTAMP: "soon"})
    assert (caught.value.message, caught.value.reason) == (
        "malformed signature headers",
        "the timestamp must be decimal digits and the signature 128 lower-case hex digits")
    with pytest.raises(UnauthenticatedError) as caught:
        verify({**signed(), auth.ACTOR: "not-an-actor"})
    assert caught.value.message == "malformed signature headers" and "not an actor id" in caught.value.reason
    with pytest.raises(UnauthenticatedError) as caught:
        verify(signed(), now=NOW + 60_001)
    assert (caught.value.message, caught.value.reason) == (
        "stale request", f"timestamp {NOW} is 60001 ms from the server's clock (window 60000 ms)")
    with pytest.raises(UnauthenticatedError) as caught:
        verify(signed(), body=b"other")
    assert (caught.value.message, caught.value.reason) == (
        "bad request signature",
        "the signature does not verify for this method, path, body, timestamp and nonce")
    verifier = Verifier(MemoryNonces())
    verify(signed(), verifier=verifier)
    with pytest.raises(UnauthenticatedError) as caught:
        verify(signed(), verifier=verifier)
    assert (caught.value.message, caught.value.reason) == ("replayed request", "this nonce was already used")


def test_a_nonce_is_remembered_up_to_and_including_its_expiry() -> None:
    log = MemoryNonces()
    assert log.first_use(b"a", NONCE, NOW + 100, NOW)
    assert not log.first_use(b"a", NONCE, NOW + 200, NOW + 100)  # at the very instant it expires
    assert log.first_use(b"a", NONCE, NOW + 201, NOW + 101)
    assert log.first_use(b"b", NONCE, NOW + 201, NOW + 101)  # per actor


def test_each_fresh_nonce_of_one_key_is_accepted() -> None:
    verifier = Verifier(MemoryNonces())
    for nonce in (NONCE, NONCE[::-1], "f" * 16):
        assert verify(signed(nonce=nonce), verifier=verifier) == KEY.public


def test_the_memory_log_holds_as_many_nonces_as_the_spec_promises() -> None:
    promised = re.search(r"at most ([\d,]+) unexpired nonces", (DOCS / "sync.md").read_text())
    assert promised is not None
    # filling a million entries to see the refusal would cost seconds per mutant; the bound it
    # keeps is read instead (inspect.signature would see mutmut's wrapper, not the mutant)
    assert MemoryNonces()._max == int(promised.group(1).replace(",", ""))


def test_a_key_s_actor_text_is_decoded_once_and_a_malformed_one_is_refused_every_time() -> None:
    auth._actor.cache_clear()
    verifier = Verifier(MemoryNonces())
    for _ in range(3):  # the server's keys come back in every request: decoded (and checked) once
        assert verifier.claimed(auth.sign(KEY, "GET", "/", b"", now_ms=NOW, nonce="n" * 16)) == KEY.public
    assert auth._actor.cache_info().misses == 1
    bad = {**auth.sign(KEY, "GET", "/", b"", now_ms=NOW, nonce="n" * 16), auth.ACTOR: actor_text(KEY.public).upper()}
    for _ in range(2):  # not the canonical spelling: refused, and nothing cached lets it through
        with pytest.raises(UnauthenticatedError, match="malformed signature headers"):
            verifier.claimed(bad)
