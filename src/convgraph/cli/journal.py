"""What the command line remembers between runs for `convgraph status`, in the replica home.

Two small JSON files beside the store, neither part of the records nor of any projection, so
losing one costs only what `status` says: `syncs.json` keeps the last sync with each peer
(`convgraph sync` writes it), `findings-seen.json` the ids of the findings the user has been
shown (`convgraph findings` writes it). Each is replaced whole through a temp file and a
rename, under a lock, so a reader never sees half of one and two writers lose neither's
entry. Invariant: a file that cannot be read is reported as a `ConvgraphError`, never guessed.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Final

from convgraph.errors import ConvgraphError

SYNCS_FILE: Final = "syncs.json"
SEEN_FILE: Final = "findings-seen.json"


def _read(path: Path) -> dict[str, Any]:
    try:
        raw = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ConvgraphError(f"cannot read {path}: {exc}; delete it to start it afresh") from exc
    if not isinstance(raw, dict):
        raise ConvgraphError(f"{path} is not a JSON object; delete it to start it afresh")
    return raw


def _update(path: Path, change: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    with open(path.with_name(f".{path.name}.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temp.write_text(json.dumps(change(_read(path)), indent=1, sort_keys=True) + "\n", "utf-8")
        os.replace(temp, path)


def peer_name(target: str) -> str:
    """How a sync target is remembered: a URL without trailing slashes, a spool as given, a
    replica directory by its absolute path (so `../b` and `/x/b` are one peer)."""
    if target.startswith(("http://", "https://")):
        return target.rstrip("/")
    if target.startswith("spool:"):
        return target
    return str(Path(target).resolve())


def record_sync(home: Path, target: str, summary: dict[str, Any], at_ms: int) -> None:
    """Remember a finished sync with `target` (its `_summary` from `convgraph sync`) at `at_ms`."""
    entry = {"at_ms": at_ms, "ok": bool(summary["ok"]), "peer_key": summary["peer_key"],
             "conversations": len(summary["conversations"]), "findings": len(summary["findings"]),
             "sent": sum(c["sent"] for c in summary["conversations"].values()),
             "received": sum(c["received"] for c in summary["conversations"].values())}
    _update(home / SYNCS_FILE, lambda held: {**held, peer_name(target): entry})


def syncs(home: Path) -> dict[str, dict[str, Any]]:
    """The last sync with each peer, by `peer_name`."""
    return {k: v for k, v in _read(home / SYNCS_FILE).items() if isinstance(v, dict)}


def mark_seen(home: Path, ids: Iterable[str]) -> None:
    """Note that the findings `ids` have been shown."""
    new = set(ids)
    if new:
        _update(home / SEEN_FILE, lambda held: {"seen": sorted({*held.get("seen", []), *new})})


def seen(home: Path) -> set[str]:
    """The ids of the findings shown so far."""
    held = _read(home / SEEN_FILE).get("seen", [])
    return {x for x in held if isinstance(x, str)} if isinstance(held, list) else set()
