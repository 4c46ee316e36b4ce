"""The witnesses a replica trusts and how many must cosign (docs/integrity.md §7.4).

The policy lives in the replica's home as `witnesses.json`:
`{"k": K, "witnesses": [{"name": N, "key": "<hex>", "url": U}, ...]}`, written whole and
atomically. A checkpoint is *witnessed* when valid cosignatures of it by at least `k`
distinct configured witness keys are held as attestation records. Invariant: a loaded
policy has distinct names and keys, and 0 ≤ k ≤ the number of witnesses.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from convgraph.core.cid import CID
from convgraph.errors import NoteError, WitnessConfigError
from convgraph.integrity import note
from convgraph.projections.state import Entry
from convgraph.replica import checkpointing
from convgraph.store.base import Store

POLICY_FILE: Final = "witnesses.json"


@dataclass(frozen=True, slots=True)
class Witness:
    """A configured witness: its C2SP key name, Ed25519 public key and base URL."""

    name: str
    key: bytes
    url: str


@dataclass(frozen=True, slots=True)
class WitnessPolicy:
    """The configured witnesses and the threshold `k` (0: no policy, nothing is waited for)."""

    witnesses: tuple[Witness, ...] = ()
    k: int = 0

    def add(self, witness: Witness) -> WitnessPolicy:
        """This policy with `witness` added, or replacing the one of the same name."""
        kept = tuple(w for w in self.witnesses if w.name != witness.name)
        return _checked(replace(self, witnesses=(*kept, witness)))

    def with_k(self, k: int) -> WitnessPolicy:
        """This policy with threshold `k`."""
        return _checked(replace(self, k=k))


def witness(name: str, key_hex: str, url: str) -> Witness:
    """A witness from what a user types: a C2SP key name, 64 hex digits, an http(s) URL."""
    try:
        note.check_key_name(name)
    except NoteError as exc:
        raise WitnessConfigError(f"witness name {name!r}: {exc}") from exc
    try:
        key = bytes.fromhex(key_hex)
    except ValueError:
        key = b""
    if len(key) != 32:
        raise WitnessConfigError(f"witness key {key_hex[:80]!r} is not 64 hex digits (an Ed25519 public key)")
    if not url.startswith(("http://", "https://")):
        raise WitnessConfigError(f"witness URL {url!r} is not an http:// or https:// URL")
    return Witness(name, key, url.rstrip("/"))


def _checked(policy: WitnessPolicy) -> WitnessPolicy:
    names = [w.name for w in policy.witnesses]
    keys = [w.key for w in policy.witnesses]
    if len(set(names)) != len(names) or len(set(keys)) != len(keys):
        raise WitnessConfigError("two configured witnesses share a name or a key")
    if not 0 <= policy.k <= len(policy.witnesses):
        raise WitnessConfigError(f"k = {policy.k} must be between 0 and the {len(policy.witnesses)} "
                                 "configured witnesses")
    return policy


def load(home: Path) -> WitnessPolicy:
    """The policy in `home`, or the empty one when none was configured."""
    path = Path(home) / POLICY_FILE
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return WitnessPolicy()
    except (OSError, ValueError) as exc:
        raise WitnessConfigError(f"cannot read {path}: {exc}") from exc
    try:
        witnesses = tuple(witness(w["name"], w["key"], w["url"]) for w in raw["witnesses"])
        k = raw["k"]
    except (KeyError, TypeError) as exc:
        raise WitnessConfigError(f"{path} is not {{\"k\": K, \"witnesses\": [{{name, key, url}}]}}") from exc
    if type(k) is not int:
        raise WitnessConfigError(f"{path}: k must be an integer")
    return _checked(WitnessPolicy(witnesses, k))


def configured(home: Path | None) -> WitnessPolicy:
    """The policy a replica opened at `home` applies; the empty one for a replica with no home."""
    return load(home) if home is not None else WitnessPolicy()


def save(home: Path, policy: WitnessPolicy) -> None:
    """Write the policy to `home` whole: a reader sees the old file or the new one."""
    body: dict[str, Any] = {"k": policy.k, "witnesses": [
        {"name": w.name, "key": w.key.hex(), "url": w.url} for w in policy.witnesses]}
    home = Path(home)
    home.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=home, prefix=".witnesses.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(body, f, indent=2)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, home / POLICY_FILE)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def cosigners(
    store: Store, cid: CID, policy: WitnessPolicy, entries: Callable[[str], Iterable[Entry]]
) -> set[str]:
    """The names of the configured witnesses whose valid cosignature of checkpoint `cid` is held."""
    view = checkpointing.ConvView(store, checkpointing.conv_of(store, cid))
    by_key = {w.key: w.name for w in policy.witnesses}
    return {by_key[c.key] for _, c in checkpointing.cosignatures_of(view, entries(view.conv), cid)
            if c.key in by_key}


def witnessed(
    store: Store, cid: CID, policy: WitnessPolicy, entries: Callable[[str], Iterable[Entry]]
) -> bool:
    """§7.4: at least `k` distinct configured witnesses cosigned checkpoint `cid` (true when k = 0)."""
    return policy.k == 0 or len(cosigners(store, cid, policy, entries)) >= policy.k
