"""Viewer sessions: a token works until it expires, and only a token that was issued."""

from __future__ import annotations

from convgraph.viewer.sessions import COOKIE_PREFIX, Session, Sessions, cookie_name


def test_a_token_lives_until_it_expires() -> None:
    now = [1_000]
    sessions = Sessions(lambda: now[0], ttl_ms=500)
    token = sessions.issue(b"k" * 32)
    forever = sessions.issue(None, expires=False)
    assert sessions.lookup(token) == Session(b"k" * 32, 1_500)
    assert sessions.lookup(token[:-1]) is None and sessions.lookup("") is None
    now[0] = 1_500
    assert sessions.lookup(token) is None
    assert sessions.lookup(forever) == Session(None, None)


def test_cookies_are_named_per_token_and_only_live_ones_count() -> None:
    sessions = Sessions(lambda: 0)
    token, other = sessions.issue(None), "not-issued"
    assert cookie_name(token).startswith(COOKIE_PREFIX) and cookie_name(token) != cookie_name(other)
    assert sessions.from_cookies({cookie_name(other): other, "x": token}) is None
    assert sessions.from_cookies({cookie_name(other): other, cookie_name(token): token}) == Session(
        None, sessions.ttl_ms)


def test_the_oldest_token_makes_room() -> None:
    sessions = Sessions(lambda: 0, limit=2)
    first, second, third = (sessions.issue(None) for _ in range(3))
    assert sessions.lookup(first) is None
    assert sessions.lookup(second) is not None and sessions.lookup(third) is not None
