"""`convgraph verify-evidence FILE`: check an evidence bundle from its bytes alone.

It opens no replica, reads no configuration and uses no network (docs/integrity.md §6.3):
exit 0 when the bundle proves its claim, 1 when it does not (saying why), 2 when the file
is not a bundle. Registered on the main group by `register`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from convgraph.cli.shared import _emit, err, error_line, json_option, out
from convgraph.core import safe_text
from convgraph.core.cid import CID
from convgraph.errors import EvidenceError
from convgraph.integrity.evidence import MAX_BUNDLE_BYTES, decode_bundle, verify_bundle
from convgraph.integrity.findings import ARTIFACT_KINDS


def _read(file: Path) -> bytes:
    # refuse an oversized file before reading it: a bundle is at most 256 MiB
    size = file.stat().st_size
    if size > MAX_BUNDLE_BYTES:
        raise EvidenceError(f"a bundle is at most {MAX_BUNDLE_BYTES} bytes; the file has {size}")
    return file.read_bytes()


def check(file: Path) -> tuple[int, dict[str, Any]]:
    """The exit code and the report of verifying `file`."""
    data = b""
    try:
        data = _read(file)
        proof = verify_bundle(data)
    except (EvidenceError, OSError) as exc:
        return 2, {"file": str(file), "bundle": False, "proves": False, "reason": str(exc)}
    bundle = decode_bundle(data)
    report = {
        "file": str(file), "bundle": True, "proves": proof.ok, "kind": proof.kind, "conv": proof.conv,
        "id": str(CID.of_record(data)), "statements": len(bundle.statements), "records": len(bundle.records),
        "reason": proof.reason,
    }
    if bundle.kind in ARTIFACT_KINDS:
        report["blocks"] = len(bundle.blocks)
    return (0 if proof.ok else 1), report


def register(cli: click.Group) -> None:
    """Add `verify-evidence` to `cli`."""

    @cli.command("verify-evidence")
    @click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
    @json_option
    def verify_evidence(file: Path, as_json: bool) -> None:
        """Check the evidence bundle FILE using nothing but its bytes (docs/integrity.md §6.3).

        Exits 0 when it proves its claim, 1 when it does not, 2 when FILE is not a bundle.
        """
        code, report = check(file)
        if as_json:
            _emit(report)
        elif code == 2:
            err.print(error_line("not a bundle:", report["reason"]), soft_wrap=True)
        else:
            verdict = "PROVES" if code == 0 else "DOES NOT PROVE"
            out.print(safe_text.line(f"{verdict} {report['kind']} in conversation {report['conv']!r}"),
                      soft_wrap=True)
            blocks = f", {report['blocks']} block(s)" if "blocks" in report else ""
            out.print(f"bundle {report['id']}: {report['statements']} statement(s), "
                      f"{report['records']} record(s){blocks}")
            out.print(safe_text.line(report["reason"]), soft_wrap=True)
        sys.exit(code)
