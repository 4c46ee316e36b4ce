"""The authority commands: `grant`, `revoke`, `members`, `why`, `pin`, `audit`, `device`.

A thin shell over `Replica.write` and `Replica.authority` (docs/authority.md §7). Every answer
prints the CIDs it rests on; `why` walks the chain from the genesis record by record.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, NamedTuple

import click
from rich.console import Console
from rich.table import Table

from convgraph.cli import home as cli_home
from convgraph.cli import inputs
from convgraph.core import safe_text, suggestions
from convgraph.core.keys import actor_text, fingerprint
from convgraph.core.kinds import CAPABILITIES
from convgraph.projections.authority import Answer, Authority
from convgraph.replica import Replica

_UNITS = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_SPAN = re.compile(r"(\d+)([smhd])")


def expires_at(text: str, now_ms: int) -> int:
    """`--expires`: a span from now (`90m`, `12h`, `7d`) or an absolute wall clock in ms."""
    span = _SPAN.fullmatch(text)
    if span:
        return now_ms + int(span[1]) * _UNITS[span[2]]
    if text.isdigit():
        return int(text)
    raise click.BadParameter(f"{text!r}: expected a span such as 90m, 12h or 7d, or a time in ms")


def answer_json(a: Answer) -> dict[str, Any]:
    """An answer as JSON: every CID as text."""
    return {
        "actor": actor_text(a.actor), "capability": a.capability, "allowed": a.allowed,
        "chain": [str(c) for c in a.chain], "blocked_by": [str(c) for c in a.blocked_by],
        "reason": a.reason, "until": a.until,
    }


def _chain_lines(authority: Authority, answer: Answer) -> list[str]:
    """The chain record by record, read from the projection (a compacted record has no bytes)."""
    records = authority.state.records
    lines = []
    for step, cid in enumerate(answer.chain):
        record = records[cid]
        who = fingerprint(record.actor)
        if record.kind == "genesis":
            lines.append(f"{step}. {cid}  genesis: {who} owns the conversation")
            continue
        p = record.payload
        until = f", until {p['expires_ms']} ms" if "expires_ms" in p else ""
        lines.append(f"{step}. {cid}  {who} grants {fingerprint(p['grantee'])} "
                     f"{', '.join(p['rights'])}{until}")
    for cid in answer.blocked_by:
        record = records[cid]
        lines.append(f"x  {cid}  {fingerprint(record.actor)} revoked {', '.join(record.payload['rights'])}")
    return lines


_CAPS = click.Choice(CAPABILITIES)
_SHORT_ACTOR = 12  # characters of an actor id a table shows (as git shows a short hash)
_SHORT_CID = 10  # characters of a CID's end, as `log` prints it


class _Shell(NamedTuple):
    """What the commands use of `cli.main`; main imports this module, so they are read late."""

    emit: Callable[[Any], None]
    errors: Callable[[Callable[..., None]], Callable[..., None]]
    replica: Callable[[click.Context], AbstractContextManager[Replica]]
    conv_option: Callable[[Callable[..., Any]], Callable[..., Any]]
    conversation: Callable[[click.Context, str | None], str]
    json_option: Callable[[Callable[..., Any]], Callable[..., Any]]
    out: Console


def register(cli: click.Group) -> None:
    """Add the authority commands to `cli`."""
    from convgraph.cli import shared  # noqa: PLC0415 - only these commands need it

    shell = _Shell(shared._emit, shared._errors, shared._replica, shared.conv_option, shared.conversation,
                   shared.json_option, shared.out)
    _register_changes(cli, shell)
    _register_answers(cli, shell)


def _revoke(ctx: click.Context, actor: str, rights: tuple[str, ...], reason: str | None,
            conv: str | None) -> Any:
    with cli_home.opened(ctx) as r:
        target = inputs.existing(ctx.obj["home"], r, conv)
        payload: dict[str, Any] = {"grantee": inputs.actor(r, actor, [target]), "rights": sorted(set(rights))}
        if reason:
            payload["reason"] = reason
        return r.write(target, "revocation", payload)


def _register_changes(cli: click.Group, shell: _Shell) -> None:
    _emit, _errors, _replica, conv_option, _, json_option, out = shell

    @cli.command()
    @click.argument("actor")
    @click.argument("capabilities", nargs=-1, required=True, type=_CAPS)
    @click.option("--expires", default=None, help="A span from now (90m, 12h, 7d) or a time in ms.")
    @click.option("--note", default=None, help="Why, for the record.")
    @conv_option
    @json_option
    @click.pass_context
    @_errors
    def grant(  # noqa: PLR0917 - click passes options positionally
        ctx: click.Context, actor: str, capabilities: tuple[str, ...], expires: str | None,
        note: str | None, conv: str | None, as_json: bool,
    ) -> None:
        """Give ACTOR the CAPABILITIES (read write review decide merge admin) in the conversation.

        ACTOR is the whole actor id (a key new here must be given whole), or the start of a known
        key's id or fingerprint, as `members` and `log` print them.
        """
        with _replica(ctx) as r:
            target = inputs.existing(ctx.obj["home"], r, conv)
            grantee = inputs.actor(r, actor, [target])
            payload: dict[str, Any] = {"grantee": grantee, "rights": sorted(set(capabilities) | {"read"})}
            if expires is not None:
                payload["expires_ms"] = expires_at(expires, r.clock())
            if note:
                payload["note"] = note
            record = r.write(target, "grant", payload)
        if as_json:
            _emit({"cid": str(record.cid), "rights": payload["rights"]})
        else:
            out.print(str(record.cid))

    @cli.command()
    @click.argument("actor")
    @click.argument("capabilities", nargs=-1, type=_CAPS)
    @click.option("--reason", default=None, help="Why, for the record.")
    @conv_option
    @json_option
    @click.pass_context
    @_errors
    def revoke(  # noqa: PLR0917 - click passes options positionally
        ctx: click.Context, actor: str, capabilities: tuple[str, ...], reason: str | None, conv: str | None,
        as_json: bool,
    ) -> None:
        """Take CAPABILITIES from ACTOR (an actor id, or a short one); with none, end its membership
        (revoke `read`)."""
        record = _revoke(ctx, actor, capabilities or ("read",), reason, conv)
        _emit({"cid": str(record.cid)}) if as_json else out.print(str(record.cid))

    @cli.command()
    @click.argument("target")
    @click.option("--note", default=None)
    @conv_option
    @json_option
    @click.pass_context
    @_errors
    def pin(ctx: click.Context, target: str, note: str | None, conv: str | None, as_json: bool) -> None:
        """Pin TARGET (a record or artifact CID), for example the approved code snapshot."""
        with _replica(ctx) as r:
            payload: dict[str, Any] = {"target": inputs.cid(r, target), **({"note": note} if note else {})}
            record = r.write(inputs.existing(ctx.obj["home"], r, conv), "pin", payload)
        _emit({"cid": str(record.cid)}) if as_json else out.print(str(record.cid))

    @cli.command()
    @click.argument("target")
    @click.argument("result", type=click.Choice(["pass", "fail", "inconclusive"]))
    @click.option("--notes", default=None)
    @conv_option
    @json_option
    @click.pass_context
    @_errors
    def audit(  # noqa: PLR0917 - click passes options positionally
        ctx: click.Context, target: str, result: str, notes: str | None, conv: str | None, as_json: bool,
    ) -> None:
        """Sign a statement about TARGET: pass, fail or inconclusive."""
        with _replica(ctx) as r:
            payload: dict[str, Any] = {"target": inputs.cid(r, target), "result": result,
                                       **({"notes": notes} if notes else {})}
            record = r.write(inputs.existing(ctx.obj["home"], r, conv), "audit", payload)
        _emit({"cid": str(record.cid)}) if as_json else out.print(str(record.cid))


def _register_answers(cli: click.Group, shell: _Shell) -> None:
    _emit, _errors, _replica, conv_option, conversation, json_option, out = shell

    @cli.command()
    @conv_option
    @json_option
    @click.pass_context
    @_errors
    def members(ctx: click.Context, conv: str | None, as_json: bool) -> None:
        """Every member with its capabilities, each with the grant that gives it."""
        with _replica(ctx) as r:
            authority = r.authority(inputs.existing(ctx.obj["home"], r, conv))
            found = authority.members()
        if as_json:
            _emit({"owner": actor_text(authority.owner or b""), "members": [
                {"actor": actor_text(a), "capabilities": [answer_json(x) for x in answers]}
                for a, answers in found.items()]})
            return
        # short ids, as a command takes them (`why`, `revoke`, `show`); --json has them whole
        table = Table("actor", "fingerprint", "capabilities", "granted by",
                      caption="ids cut short: --json prints them whole")
        for actor, answers in found.items():
            role = "owner" if actor == authority.owner else str(answers[0].chain[-1])[-_SHORT_CID:]
            held = " ".join(a.capability for a in answers)
            table.add_row(actor_text(actor)[:_SHORT_ACTOR], fingerprint(actor), held, role)
        out.print(table)

    @cli.command()
    @click.argument("actor")
    @click.argument("capability", type=_CAPS)
    @conv_option
    @json_option
    @click.pass_context
    @_errors
    def why(ctx: click.Context, actor: str, capability: str, conv: str | None, as_json: bool) -> None:
        """Print the chain of records by which ACTOR (an actor id, or a short one) holds CAPABILITY,
        or what it lacks."""
        with _replica(ctx) as r:
            target = inputs.existing(ctx.obj["home"], r, conv)
            authority = r.authority(target)
            answer = authority.who_can(inputs.actor(r, actor, [target]), capability)
            lines = _chain_lines(authority, answer)
        if as_json:
            _emit(answer_json(answer))
            return
        verdict = "may" if answer.allowed else "may not"
        out.print(f"{fingerprint(answer.actor)} {verdict} {capability}" +
                  ("" if answer.allowed else f" ({answer.reason})"))
        for line in lines:
            out.print(safe_text.line(line))

    @cli.group()
    def device() -> None:
        """This person's devices: each is an actor with its own key."""

    @device.command("add")
    @conv_option
    @json_option
    @click.pass_context
    @_errors
    def device_add(ctx: click.Context, conv: str | None, as_json: bool) -> None:
        """Run on the new device: print its key, and the command an admin runs to let it in."""
        with _replica(ctx) as r:
            me = actor_text(r.actor)
        target = "CONVERSATION" if conv is None else conversation(ctx, conv)
        command = suggestions.GRANT_DEVICE(actor=me, conv=target)
        if as_json:
            _emit({"actor": me, "fingerprint": fingerprint(r.actor), "grant_command": command})
            return
        out.print(f"this device: {me} ({fingerprint(r.actor)})")
        out.print(f"on a device with admin, run:\n  {command}")

    @device.command("revoke")
    @click.argument("actor")
    @click.option("--reason", default="device lost")
    @conv_option
    @json_option
    @click.pass_context
    @_errors
    def device_revoke(ctx: click.Context, actor: str, reason: str, conv: str | None, as_json: bool) -> None:
        """Shut a lost device out: revoke everything it holds (ACTOR: an actor id, or a short one)."""
        record = _revoke(ctx, actor, ("read",), reason, conv)
        _emit({"cid": str(record.cid)}) if as_json else out.print(str(record.cid))
