"""`convgraph witness add/list/policy` and `convgraph checkpoint [--compact] | status | export`.

The witness policy (docs/integrity.md §7.4) lives in the replica's home (`witnesses.json`).
`checkpoint --compact` with a policy writes the checkpoint, has each witness cosign it (after
syncing the conversation to it), writes the cosignatures as attestation records, and
compacts only when k witnesses cosigned; otherwise it keeps every record, says so and exits
1. `checkpoint export CID --note` prints the C2SP signed note (§8). Registered by `register`.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from convgraph.cli import home as cli_home
from convgraph.cli import inputs
from convgraph.cli.shared import (
    TEXT,
    _emit,
    _errors,
    _replica,
    conv_option,
    err,
    json_option,
    out,
    record_json,
)
from convgraph.core import safe_text, suggestions
from convgraph.errors import ConvgraphError
from convgraph.integrity import note
from convgraph.replica import checkpointing, witness_policy
from convgraph.sync import witness_client


def register(cli: click.Group) -> None:
    """Add `witness` and `checkpoint` to the main command group."""
    _witness_commands(cli)
    _checkpoint_commands(cli)


def _witness_commands(cli: click.Group) -> None:

    def _policy_json(policy: witness_policy.WitnessPolicy) -> dict[str, Any]:
        return {"k": policy.k, "witnesses": [{"name": w.name, "key": w.key.hex(), "url": w.url}
                                             for w in policy.witnesses]}

    @cli.group()
    def witness() -> None:
        """The witnesses that cosign this replica's checkpoints, and how many must (k)."""

    @witness.command("add")
    @click.argument("name", type=TEXT)
    @click.argument("key", type=TEXT)
    @click.argument("url", type=TEXT)
    @json_option
    @click.pass_context
    @_errors
    def add(ctx: click.Context, name: str, key: str, url: str, as_json: bool) -> None:
        """Trust witness NAME (its C2SP key name) with public KEY (hex), served at URL."""
        home = cli_home.required(ctx)
        policy = witness_policy.load(home).add(witness_policy.witness(name, key, url))
        witness_policy.save(home, policy)
        if as_json:
            _emit(_policy_json(policy))
            return
        out.print(f"{safe_text.line(name)} added: {len(policy.witnesses)} witness(es), k = {policy.k}")

    @witness.command("list")
    @json_option
    @click.pass_context
    @_errors
    def list_(ctx: click.Context, as_json: bool) -> None:
        """The configured witnesses and the threshold k."""
        policy = witness_policy.load(cli_home.required(ctx))
        if as_json:
            _emit(_policy_json(policy))
            return
        for w in _policy_json(policy)["witnesses"]:
            out.print(safe_text.line(f"{w['name']}  {w['key']}  {w['url']}"))
        out.print(f"k = {policy.k} of {len(policy.witnesses)}")

    @witness.command("policy")
    @click.argument("k", type=click.IntRange(min=0))
    @json_option
    @click.pass_context
    @_errors
    def policy_cmd(ctx: click.Context, k: int, as_json: bool) -> None:
        """Require K configured witnesses to cosign a checkpoint before compacting behind it."""
        home = cli_home.required(ctx)
        policy = witness_policy.load(home).with_k(k)
        witness_policy.save(home, policy)
        if as_json:
            _emit(_policy_json(policy))
            return
        out.print(f"k = {policy.k} of {len(policy.witnesses)}")



def _checkpoint_commands(cli: click.Group) -> None:

    @cli.group(invoke_without_command=True)
    @click.option("--compact", is_flag=True,
                  help="Also drop the raw records the checkpoint covers (once witnessed, with a policy).")
    @click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True), default=60.0,
                  show_default=True, metavar="SECONDS", help="Per witness: sync and cosign within this.")
    @conv_option
    @json_option
    @click.pass_context
    @_errors
    def checkpoint(
        ctx: click.Context, compact: bool, timeout_s: float, conv: str | None, as_json: bool
    ) -> None:
        """Sign a checkpoint of the conversation's folded state (and compact behind it)."""
        if ctx.invoked_subcommand is not None:
            return
        policy = witness_policy.load(cli_home.required(ctx))
        with _replica(ctx) as r:
            target = inputs.existing(ctx.obj["home"], r, conv)  # a checkpoint never starts one
            # under a policy the checkpoint must exist before witnesses can cosign it
            rec = r.checkpoint(target, compact=compact and policy.k == 0, policy=policy)
            body: dict[str, Any] = {"cid": str(rec.cid), "count": rec.payload["count"],
                                    "snapshot": str(rec.payload["snapshot"])}
            if compact and policy.k > 0:
                outcome = witness_client.witness_checkpoint(r, rec, policy, timeout_s=timeout_s)
                if outcome.witnessed:
                    witness_client.compact_witnessed(r, rec, policy)
                body |= {"k": policy.k, "witnessed_by": sorted(outcome.witnesses),
                         "compacted": outcome.witnessed, "refused": outcome.refused}
        if as_json:
            _emit(body)
        else:
            out.print(f"{body['cid']}  ({body['count']} records)")
            for name, why in body.get("refused", {}).items():
                err.print(safe_text.line(f"witness {name} did not cosign: {why}"))
        if "k" in body and not body["compacted"]:
            err.print(f"unwitnessed: cosigned by {len(body['witnessed_by'])} of the {body['k']} witnesses "
                      "the policy asks for; every record is kept")
            sys.exit(1)

    _checkpoint_reads(checkpoint)


def _checkpoint_reads(checkpoint: click.Group) -> None:

    @checkpoint.command("status")
    @click.argument("cid")
    @json_option
    @click.pass_context
    @_errors
    def status(ctx: click.Context, cid: str, as_json: bool) -> None:
        """Check checkpoint CID (or a short one) against the records held (docs/integrity.md §7.2)."""
        with _replica(ctx) as r:
            found = inputs.cid(r, cid)
            result = r.checkpoint_status(found)
            witnessed = r.witnessed(found)
        body = {"cid": str(found), "status": result.status.value, "check": result.check,
                "detail": result.detail,
                "witnessed": witnessed}
        if as_json:
            _emit(body)
        else:
            which = f" ({result.check})" if result.check else ""
            detail = f": {result.detail}" if result.detail else ""
            out.print(safe_text.line(f"{result.status.value}{which}{detail}"))

    @checkpoint.command("export")
    @click.argument("cid")
    @click.option("--note", "as_note", is_flag=True, help="As a C2SP signed note (docs/integrity.md §8).")
    @click.option("--json", "as_json", is_flag=True, help="As JSON (what it prints without --note).")
    @click.pass_context
    @_errors
    def export(ctx: click.Context, cid: str, as_note: bool, as_json: bool) -> None:
        """Print checkpoint CID: as a C2SP signed note with --note, else as JSON."""
        if as_note and as_json:
            raise click.UsageError("give --note or --json, not both")
        with _replica(ctx) as r:
            rec = r.get(inputs.cid(r, cid))
            if rec.kind != "checkpoint":
                raise ConvgraphError(f"record {rec.cid} is a {rec.kind}, not a checkpoint: expected the CID "
                                     f"`{suggestions.CHECKPOINT}` printed")
            if not as_note:
                _emit(record_json(rec))
                return
            body = note.checkpoint_body(rec).text
            author = note.sign(r.key, note.actor_key_name(r.actor), body) if rec.actor == r.actor else None
            view = checkpointing.ConvView(r.store, rec.conv)
            held = checkpointing.cosignatures_of(view, r.state(rec.conv).entries.values(), rec.cid)
            signed = note.export_note(body, author, [c.line() for _, c in held])
        click.echo(signed.text, nl=False)
