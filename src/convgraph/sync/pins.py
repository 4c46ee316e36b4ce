"""Trust on first use: the key each sync server URL first answered with (docs/integrity.md §9).

A server that changes its key would start a fresh memory of statements at every client, so
`convgraph sync URL` remembers URL -> key in the replica home (`remotes.json`) and refuses a
different key with `PeerKeyChangedError` unless told to accept it. `pin` is pure; `load` and
`save` are the file's shell. Invariant: a URL's pin changes only through `accept_new=True`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Final

from convgraph.core import suggestions
from convgraph.core.keys import fingerprint
from convgraph.errors import ConvgraphError, PeerKeyChangedError

PINS_FILE: Final = "remotes.json"
__all__ = ["PINS_FILE", "fingerprint", "load", "normal_url", "pin", "save"]


def normal_url(url: str) -> str:
    """The form a URL is pinned under: without trailing slashes."""
    return url.rstrip("/")


def pin(pins: dict[str, str], url: str, key: bytes, *, accept_new: bool = False) -> dict[str, str]:
    """`pins` with `url` pinned to `key` (hex); `PeerKeyChangedError` when it holds another."""
    url = normal_url(url)
    held = pins.get(url)
    if held is not None and held != key.hex() and not accept_new:
        pinned = fingerprint(bytes.fromhex(held))
        raise PeerKeyChangedError(
            f"the server at {url} now answers with key {fingerprint(key)}, not {pinned} as before; "
            f"if it rotated its key on purpose, sync again: `{suggestions.SYNC_NEW_KEY(url=url)}`",
            url=url, pinned=pinned, got=fingerprint(key))
    return {**pins, url: key.hex()}


def load(home: Path) -> dict[str, str]:
    """The pins kept in `home`; none when the file is absent."""
    path = Path(home) / PINS_FILE
    try:
        raw = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ConvgraphError(f"cannot read the pinned server keys in {path}: {exc}") from exc
    pins = raw.get("pins") if isinstance(raw, dict) else None
    if not isinstance(pins, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and _is_key_hex(v) for k, v in pins.items()
    ):
        raise ConvgraphError(f"{path} is not a file of pinned server keys ({{\"pins\": {{url: hex key}}}})")
    return dict(pins)


def save(home: Path, pins: dict[str, str]) -> None:
    """Write the pins to `home`, through a temp file and a rename (a reader never sees half)."""
    path = Path(home) / PINS_FILE
    temp = path.with_name(f".{PINS_FILE}.{os.getpid()}.tmp")
    temp.write_text(json.dumps({"pins": dict(sorted(pins.items()))}, indent=1) + "\n", "utf-8")
    os.replace(temp, path)


def _is_key_hex(value: str) -> bool:
    try:
        return len(bytes.fromhex(value)) == 32
    except ValueError:
        return False
