"""The replication commands: `serve` runs the sync server, `sync` reconciles with a peer.

`serve` serves the replica at `--home` (SQLite) or, with `--db postgresql://…`, a schema of
a PostgreSQL database that any number of instances may share. `sync TARGET` reconciles
the named conversations with a server URL or another replica's directory, within
`--timeout` seconds, and prints what moved and any new finding (docs/integrity.md §6); it
exits 3 when the run raised a finding (evidence that a peer lied), else 1 when a record was
rejected or the two sides still differ, and 2 when the sync failed (the deadline passing
included). A server URL is pinned to the key it first answered with (`sync/pins.py`).
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any, Final

import click
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.text import Text

from convgraph.cli import inputs, journal
from convgraph.cli.shared import TEXT, _emit, _errors, conversation, err, json_option, out
from convgraph.core import safe_text, short_actor, suggestions
from convgraph.core.keys import actor_text, load_key
from convgraph.errors import AccessConfigError, ConvgraphError, NoteError
from convgraph.integrity import note
from convgraph.integrity.findings import Finding, reason
from convgraph.replica import DB_FILE, KEY_FILE, Replica
from convgraph.replica import home as replica_home
from convgraph.server.access import ANY, Access
from convgraph.sync import pins
from convgraph.sync.auth import NonceLog
from convgraph.sync.deadline import DEFAULT_TIMEOUT_S, Deadline
from convgraph.sync.initiator import Initiator, Remote, SyncReport, Transport, synchronize
from convgraph.sync.messages import Fate, Reported
from convgraph.sync.peer import AdoptionPolicy, ReplicaPeer, cid_of, trusting
from convgraph.sync.responder import Responder
from convgraph.sync.witness_hooks import witness_of

Listen = Callable[[], AsyncIterator[str]]


def _server_replica(
    home: Path, db: str | None, schema: str
) -> tuple[Replica, Listen | None, NonceLog | None]:
    if db is None:  # a receipt promises the records survive power loss too (docs/integrity.md §2.3)
        return Replica.open(home, synchronous="FULL", create=False), None, None
    if not db.startswith(("postgresql://", "postgres://")):
        raise ConvgraphError(f"--db takes a postgresql:// URL, not {db!r}")
    from convgraph.server.pg_nonces import PostgresNonces  # noqa: PLC0415 - only a PostgreSQL server needs it
    from convgraph.store.postgres import PostgresStore, listen  # noqa: PLC0415

    if not (home / KEY_FILE).exists():  # `convgraph init` makes it: a mistyped --home makes nothing
        replica_home.check(home, create=False)
    replica = Replica(PostgresStore(db, schema=schema), load_key(home / KEY_FILE))
    # nonces in the shared database: a replay sent to another instance is refused there too
    return replica, lambda: listen(db, schema), PostgresNonces(db, schema)


_ACTOR_CHARS: Final = 52  # a whole actor id; anything shorter is resolved against the known keys
_BASE32: Final = re.compile(r"[a-z2-7]+")  # what else is no actor id: the rule is refused before listening


def _short_allow(rule: str) -> bool:
    """True when the `--allow` rule's actor is cut short (neither `*` nor a whole id)."""
    actor, sep, _ = rule.partition("=")
    return bool(sep) and actor != ANY and len(actor) < _ACTOR_CHARS and _BASE32.fullmatch(actor) is not None


def _whole_allow(rules: Iterable[str], replica: Replica) -> list[str]:
    """The short `--allow` rules with each actor written whole: a key the server replica knows
    (an author or a key named in a grant of a conversation it holds)."""
    known = functools.cache(lambda: inputs.known_actors(replica, replica.store.conversations()))
    whole = []
    for rule in filter(_short_allow, rules):
        actor, _, target = rule.partition("=")
        try:
            whole.append(f"{actor_text(short_actor.resolve(actor, known, 'the server replica'))}={target}")
        except ConvgraphError as exc:
            raise AccessConfigError(f"access rule {rule!r}: {exc.message}") from exc
    return whole


def register(cli: click.Group) -> None:
    """Add `serve` and `sync` to the main command group."""

    @cli.command()
    @click.option("--host", default="127.0.0.1", show_default=True)
    @click.option("--port", default=8750, show_default=True, type=click.IntRange(0, 65_535),
                  help="TCP port; 0 picks a free one (the line `serving … on URL` names it).")
    @click.option("--db", default=None, help="postgresql://… to serve a shared PostgreSQL schema.")
    @click.option("--schema", default="convgraph", show_default=True, help="PostgreSQL schema.")
    @click.option("--access", "access_file", type=click.Path(path_type=Path, exists=True, dir_okay=False),
                  help="JSON access configuration (docs/sync.md).")
    @click.option("--allow", "rules", multiple=True, metavar="ACTOR=CONV[:read]",
                  help="Admit ACTOR to CONV (* for all); repeatable.")
    @click.option("--spool", type=click.Path(path_type=Path, file_okay=False), default=None,
                  help="Answer sync messages left in this folder instead of serving HTTP.")
    @click.option("--header-timeout", type=click.FloatRange(0.1, 300), default=5.0, show_default=True,
                  help="Seconds a connection may take to send a request head before it is closed.")
    @click.option("--witness", "as_witness", is_flag=True,
                  help="Also cosign checkpoints that extend the last one cosigned (docs/integrity.md §7.4).")
    @click.option("--witness-name", default=None, type=TEXT,
                  help="The witness's C2SP key name.  [default: convgraph/witness/<actor>]")
    @click.option("--json", "as_json", is_flag=True,
                  help="Also announce the URL (or spool) and server key as one JSON line on stdout, "
                       "once answering.")
    @click.pass_context
    @_errors
    def serve(  # noqa: PLR0917 - click passes options positionally
        ctx: click.Context, host: str, port: int, db: str | None, schema: str, access_file: Path | None,
        rules: tuple[str, ...], spool: Path | None, header_timeout: float, as_witness: bool,
        witness_name: str | None, as_json: bool,
    ) -> None:
        """Run the sync server over HTTP (or on a spool folder) until interrupted."""
        _refuse_unused(ctx, spool=spool is not None, db=db is not None, as_witness=as_witness)
        if spool is not None:
            _serve_spool(ctx.obj["home"], spool, err, as_json=as_json)
            return
        from convgraph.server import listener  # noqa: PLC0415 - only the server needs uvicorn
        from convgraph.server.app import ServerConfig, create_app  # noqa: PLC0415

        # checked before anything listens; a rule with a short actor id waits for the replica
        access = Access.from_rules(rule for rule in rules if not _short_allow(rule))
        if access_file is not None:
            access = access.merged(Access.load(access_file))
        sock = listener.bind(host, port)  # first: a port in use is said before the store is opened
        try:
            replica, listen, nonces = _server_replica(ctx.obj["home"], db, schema)
            access = access.merged(Access.from_rules(_whole_allow(rules, replica)))
        except BaseException:
            sock.close()
            raise
        where = f"PostgreSQL schema {schema}" if db else str(Path(ctx.obj["home"]) / DB_FILE)
        cosigner = None
        if as_witness:  # its memory of what it cosigned lives in the home, whatever the store
            from convgraph.server.witness import cosigner_for  # noqa: PLC0415

            cosigner = cosigner_for(Path(ctx.obj["home"]), replica.store, replica.key, name=witness_name,
                                    clock_s=lambda: int(time.time()))
        app = create_app(replica, ServerConfig(access=access), listen=listen, nonces=nonces,
                         cosigner=cosigner)

        def ready() -> None:  # once requests are answered: whoever waits for the URL may use it at once,
            # so the announcement comes last and a script that reads up to it has seen every warning too
            _warn_open(err, access, replica, cosigner)
            _announce(err, replica, listener.url_of(sock), where, as_json=as_json)

        try:
            listener.serve(app, sock, listener.ConnectionLimits(header_timeout_s=header_timeout), ready)
        finally:
            sock.close()
            replica.close()

    @cli.command("sync")
    @click.argument("target")
    @click.option("--conv", "convs", multiple=True, type=TEXT,
                  help="Conversation to sync: alias, id or legacy name (repeatable; default: all).")
    @click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True),
                  default=DEFAULT_TIMEOUT_S, show_default=True, metavar="SECONDS",
                  help="Give up when the whole sync takes longer.")
    @click.option("--accept-new-key", is_flag=True,
                  help="Accept (and pin) a server key other than the one this URL first answered with.")
    @json_option
    @click.pass_context
    @_errors
    def sync_cmd(  # noqa: PLR0917 - click passes options positionally
        ctx: click.Context, target: str, convs: tuple[str, ...], timeout_s: float, accept_new_key: bool,
        as_json: bool,
    ) -> None:
        """Reconcile with TARGET: a server URL, another replica's directory, or spool:FOLDER."""
        show = not as_json and sys.stderr.isatty()
        names = tuple(conversation(ctx, c) for c in convs)
        with Replica.open(ctx.obj["home"], create=False) as replica:
            report = _run(replica, Path(ctx.obj["home"]), target, names, show=show, timeout_s=timeout_s,
                          accept_new_key=accept_new_key)
        summary = _summary(report, target)
        journal.record_sync(Path(ctx.obj["home"]), target, summary, int(time.time() * 1000))  # for `status`
        if as_json:
            _emit(summary)
        else:
            _print(summary, out)
        if summary["findings"]:
            sys.exit(3)
        if not summary["ok"]:
            sys.exit(1)


# what only serving HTTP uses: a spool has no port, no request keys and no witness endpoint
_HTTP_ONLY: Final = ("host", "port", "db", "schema", "access_file", "rules", "header_timeout", "as_witness",
                     "witness_name")


def _refuse_unused(ctx: click.Context, *, spool: bool, db: bool, as_witness: bool) -> None:
    """A `UsageError` for an option given where `serve` would ignore it, before anything is
    opened or announced: whoever waits for the announcement must never see one that then fails."""
    given = {name for name in _HTTP_ONLY
             if ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT}
    if spool and given:
        flags = ", ".join(f"--{_flag(name)}" for name in _HTTP_ONLY if name in given)
        raise click.UsageError(f"{flags}: for serving HTTP, not --spool: a spool folder has no port, no "
                               "keys and no witness (its permissions decide who syncs; docs/sync.md, Spool "
                               "folders)")
    if "schema" in given and not db:
        raise click.UsageError("--schema names a PostgreSQL schema: give --db postgresql://… too")
    if "witness_name" in given and not as_witness:
        raise click.UsageError("--witness-name names the witness: give --witness too")
    name = ctx.params.get("witness_name")
    if name is not None:
        try:
            note.check_key_name(name)
        except NoteError as exc:
            raise click.BadParameter(str(exc), param_hint="--witness-name") from exc


def _flag(name: str) -> str:
    renamed = {"access_file": "access", "rules": "allow", "as_witness": "witness"}
    return renamed.get(name, name).replace("_", "-")


def _warn_open(err: Any, access: Access, replica: Replica, cosigner: Any) -> None:
    """What a server operator should know once it answers: nobody admitted by rule, and how
    clients trust its witness."""
    if not access.writers and not access.readers:
        err.print(Text("no key may create conversations or use legacy ones (see --allow); only "
                       "members of rooted conversations held here are admitted (their grants)", "yellow"))
    if cosigner is not None:
        add = suggestions.WITNESS_ADD(name=cosigner.name, key=replica.actor.hex())
        err.print(f"witness {cosigner.name}: `{add}` trusts it")


def _announce(err: Any, replica: Replica, url: str, where: str, *, as_json: bool) -> None:
    """Say where the server listens and with which key; with `as_json`, also as a JSON line on stdout."""
    err.print(f"serving {where} on {url} as {actor_text(replica.actor)}")
    # what a client pins on first contact (docs/integrity.md §9): compare it out of band
    err.print(f"server key {replica.actor.hex()} (fingerprint {pins.fingerprint(replica.actor)})")
    if as_json:
        click.echo(json.dumps({"url": url, "actor": actor_text(replica.actor), "key": replica.actor.hex(),
                               "fingerprint": pins.fingerprint(replica.actor), "store": where}))
        sys.stdout.flush()


def _print(summary: dict[str, Any], out: Any) -> None:
    """The summary as lines for people; findings stand out."""
    for name, conv in summary["conversations"].items():
        there = conv["there"]
        adopted = f"adopted {conv['adopted']} from a checkpoint, " if conv["adopted"] else ""
        out.print(f"{safe_text.line(name)}: received {conv['accepted_here']} "
                  f"(of {conv['received']}), sent {conv['sent']} ({there['accepted']} accepted, "
                  f"{there['released']} released, {there['duplicate']} duplicate), "
                  f"{adopted}{safe_text.line(conv['statement'])}")
        for rejection in conv["rejected_here"] + conv["rejected_there"]:
            which = rejection["cid"] or f"a record with no CID ({rejection['no_cid']})"
            out.print(f"  rejected {which}: {safe_text.line(rejection['rule'])}")
        for waiting in conv["waiting_there"]:
            out.print(f"  {waiting['fate']} at the peer {waiting['cid']}: {waiting['detail']}")
        for cid in conv["unconfirmed"]:
            out.print(f"  unconfirmed {cid}: reported stored, but no receipt names it")
        for why in conv["pending"]:
            out.print(f"  pending: {safe_text.line(why)}")
        art = conv["artifacts"]
        if art["blocks_received"] or art["blocks_sent"]:
            out.print(f"  artifacts: {art['blocks_received']} block(s) received, {art['blocks_sent']} sent")
        for refused in art["refused_here"]:
            out.print(f"  refused artifact block {refused['cid']}: {refused['rule']}")
        for cid in art["missing_here"]:
            out.print(f"  missing artifact block {cid}: a record names it; the peer did not send it")
    for finding in summary["findings"]:
        said = reason(finding["kind"], finding["summary"])  # the kind is said once, first
        out.print(Text(f"FINDING {finding['kind']} in {safe_text.line(finding['conv'])}: "
                       f"{safe_text.line(said)} ({finding['id']})", "bold red"))
    out.print(f"{summary['round_trips']} round trips, {summary['bytes_sent']} bytes sent, "
              f"{summary['bytes_received']} received")


def _serve_spool(home: Path, spool: Path, err: Any, *, as_json: bool) -> None:
    import threading  # noqa: PLC0415

    from convgraph.sync.spool import answer_spool, prepare  # noqa: PLC0415

    stop = threading.Event()
    replica, _, _ = _server_replica(home, None, "")  # it signs receipts as `serve` does
    with replica:
        prepare(spool)  # before the announcement: a client that waited for it finds the folders
        err.print(f"answering sync messages in {spool} for {Path(home) / DB_FILE}")
        if as_json:
            click.echo(json.dumps({"spool": str(spool), "actor": actor_text(replica.actor),
                                   "key": replica.actor.hex(), "store": str(Path(home) / DB_FILE)}))
            sys.stdout.flush()
        try:
            responder = Responder(ReplicaPeer(replica), key=replica.key, clock=replica.clock,
                                  witness=witness_of(replica))
            answer_spool(responder.receive, spool, stop=stop)
        except KeyboardInterrupt:
            stop.set()


def _run(
    replica: Replica, home: Path, target: str, convs: tuple[str, ...], *, show: bool, timeout_s: float,
    accept_new_key: bool = False,
) -> SyncReport:
    if target.startswith("spool:"):
        from convgraph.sync.spool import SpoolTransport  # noqa: PLC0415

        names = list(convs) or replica.conversations()
        if not names:
            raise ConvgraphError("name the conversations to fetch with --conv: this replica holds none")
        spool = SpoolTransport(Path(target.removeprefix("spool:")))
        return _with_progress(replica, spool, names, show, timeout_s, adopt_from=trusting([replica.actor]))
    if target.startswith(("http://", "https://")):
        from convgraph.sync.http import HttpRemote  # noqa: PLC0415 - only this path needs httpx

        with HttpRemote(target, replica.key) as remote:
            names = list(convs) or replica.conversations()
            if not names:
                raise ConvgraphError("name the conversations to fetch with --conv: this replica holds none")
            # trust on first use: the key this URL first answered with, or PeerKeyChangedError
            deadline = Deadline.after(timeout_s, time.monotonic)
            server_key = remote.identity(deadline=deadline)
            held = pins.load(home)
            pinned = pins.pin(held, target, server_key, accept_new=accept_new_key)
            if pinned != held:
                pins.save(home, pinned)
            return _with_progress(replica, remote, names, show, timeout_s, adopt_from=lambda _conv, signer: (
                signer in (replica.actor, server_key)), peer_key=server_key)
    path = Path(target)
    if not (path / DB_FILE).exists():
        raise ConvgraphError(f"{target} is neither a URL nor a replica directory (no {DB_FILE})")
    with Replica.open(path, create=False) as other:
        names = list(convs) or sorted({*replica.conversations(), *other.conversations()})
        forgot = replica.store.forgotten(names)  # forgotten here: never asked for again
        names = [n for n in names if n not in forgot]
        both = trusting([replica.actor, other.actor])
        responder = Responder(ReplicaPeer(other, adopt_from=both), key=other.key, clock=other.clock,
                              witness=witness_of(other))
        transport = functools.partial(responder.receive, initiator=replica.actor)
        return _with_progress(replica, transport, names, show, timeout_s, adopt_from=both,
                              peer_key=other.actor)


def _with_progress(
    replica: Replica, transport: Transport | Remote, names: list[str], show: bool, timeout_s: float, *,
    adopt_from: AdoptionPolicy, peer_key: bytes | None = None,
) -> SyncReport:
    """Run the sync; a base is adopted only when `adopt_from` trusts its signer (our key, and
    the peer we chose: the server's pinned key, or the other replica's). Every statement must
    be signed by `peer_key` when it is known; the replica's memory judges them."""
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  transient=True, disable=not show) as progress:
        task = progress.add_task("syncing", total=None)

        def tick(session: Initiator) -> None:
            got = sum(r.received for r in session.reports.values())
            sent = sum(r.sent for r in session.reports.values())
            progress.update(task, description=f"round {session.rounds}: {got} records in, {sent} out")

        return synchronize(ReplicaPeer(replica, adopt_from=adopt_from), transport, names,
                           salts=lambda: os.urandom(8), on_round=tick, timeout_s=timeout_s,
                           witness=witness_of(replica), peer_key=peer_key, clock=replica.clock)


def _waiting(e: Reported) -> dict[str, Any]:
    if e.fate is Fate.HELD:
        return {"fate": "held", "cid": str(cid_of(e.digest)), "retry_ms": e.retry_ms,
                "detail": f"its clock is ahead of the peer's; offered again after {e.retry_ms} ms"}
    parents = [str(cid_of(p)) for p in e.parents]
    return {"fate": "quarantined", "cid": str(cid_of(e.digest)), "parents": parents,
            "detail": "waiting for " + ", ".join(parents)}


_NO_CID: Final = "larger than the record limit, so never hashed"


def _rejections(items: list[tuple[bytes | None, str]]) -> list[dict[str, Any]]:
    """Each rejected record once (a second session that is sent it again is refused again), by
    CID; one too large to hash has none, and says so."""
    seen: dict[tuple[bytes | None, str], dict[str, Any]] = {}
    for digest, rule in items:
        if (digest, rule) not in seen:
            seen[digest, rule] = ({"cid": str(cid_of(digest)), "rule": rule} if digest else
                                  {"cid": None, "rule": rule, "no_cid": _NO_CID})
    return list(seen.values())


def _summary(report: SyncReport, target: str) -> dict[str, Any]:
    rejections = _rejections

    convs = {
        name: {
            "received": r.received, "accepted_here": r.accepted_here, "quarantined_here": r.quarantined_here,
            "sent": r.sent, "sent_bytes": r.sent_bytes, "accepted_there": r.accepted_there,
            "adopted": r.adopted,
            "rejected_here": rejections([(d, rule) for d, rule, _ in r.rejected_here]),
            "rejected_there": rejections([(x.digest, x.rule) for x in r.rejected_there]),
            "there": {"accepted": r.accepted_there, "released": r.released_there,
                      "duplicate": r.duplicate_there, "evicted": [str(cid_of(d)) for d in r.evicted_there]},
            "waiting_there": [_waiting(e) for e in r.waiting_there.values()],
            "gone": [str(cid_of(d)) for d in r.gone], "converged": r.converged, "statement": r.statement(),
            "statements": r.statements, "unconfirmed": [str(cid_of(d)) for d in r.unconfirmed],
            "pending": list(r.pending), "gossip_dropped": r.gossip_dropped,
            "artifacts": {  # docs/sync.md, Artifacts: never part of `converged`
                "blocks_received": r.blocks_received, "blocks_sent": r.blocks_sent,
                "refused_here": [{"cid": str(c), "rule": rule} for c, rule, _ in r.blocks_refused_here],
                "refused_there": [str(c) for c in r.refused_there],
                "missing_here": [str(c) for c in r.missing_here],
                "missing_there": [str(c) for c in r.missing_there],
            },
        }
        for name, r in sorted(report.convs.items())
    }
    findings = [_finding(f) for f in report.findings]
    ok = report.converged and not findings and not any(
        c["rejected_here"] or c["rejected_there"] for c in convs.values())
    return {"target": target, "sessions": report.sessions, "round_trips": report.round_trips,
            "bytes_sent": report.bytes_sent, "bytes_received": report.bytes_received,
            "peer_key": report.peer_key.hex() if report.peer_key is not None else None,
            "conversations": convs, "findings": findings, "ok": ok}


def _finding(f: Finding) -> dict[str, Any]:
    """A new finding as the summary shows it; the bundle itself: `convgraph findings`."""
    return {"id": str(f.id), "kind": f.kind, "conv": f.conv, "summary": f.summary}
