"""The commands that live in modules of their own, imported only when one of them runs.

`convgraph --help` lists every command from `LAZY` without importing any of their modules,
and `convgraph log` imports none of them: each module pulls in what only its commands need
(the sync client, the witness policy, the authority fold...). Invariant: a command's summary
here is the one its own help gives (tests/cli/test_commands.py compares them), and a command
runs exactly as if its module had been registered at start-up, `--home` included.
"""

from __future__ import annotations

import importlib
from typing import Final

import click
from click.shell_completion import CompletionItem

# module under convgraph.cli: its commands, each with the first sentence of its help
_SUMMARIES: Final[dict[str, dict[str, str]]] = {
    "artifacts": {
        "ask": (
            "Write a decision_request asking QUESTION about --subject (rooted conversations: the "
            "reviews a decision needs first, docs/authority.md §8.4)."
        ),
        "cat": (
            "Write the artifact CID's bytes to stdout, streamed, each block checked before it is "
            "written (a block that fails stops the stream: exit 2 after what was written)."
        ),
        "decide": "Decide REQUEST (a decision_request's CID, or a short one) with CHOICE.",
        "patch": "Apply the unified DIFF (a file, or - for stdin) to --base and record the patch.",
        "put": "Store FILE (- reads stdin) as an artifact, streamed, and print its CID.",
        "review": "Review TARGET, the exact code_snapshot or patch record (a CID or a short one).",
        "snapshot": (
            "Snapshot the files under PATHS as a code_snapshot (symlinks are reported, not followed)."
        ),
    },
    "authority": {
        "audit": "Sign a statement about TARGET: pass, fail or inconclusive.",
        "device": "This person's devices: each is an actor with its own key.",
        "grant": "Give ACTOR the CAPABILITIES (read write review decide merge admin) in the conversation.",
        "members": "Every member with its capabilities, each with the grant that gives it.",
        "pin": "Pin TARGET (a record or artifact CID), for example the approved code snapshot.",
        "revoke": "Take CAPABILITIES from ACTOR (an actor id, or a short one); with none, end its membership "
                  "(revoke `read`).",
        "why": "Print the chain of records by which ACTOR (an actor id, or a short one) holds CAPABILITY, "
               "or what it lacks.",
    },
    "car": {
        "export": "Write the conversations' records to FILE as a CARv1, their heads as roots.",
        "import": "Verify and ingest the records of the CARv1 FILE (docs/sync.md, CAR files).",
    },
    "conversation": {
        "branch": "Fork the conversation at record --at as branch NAME (then `say --branch NAME`).",
        "merge": "Merge branch NAME into main: join every head, recording what was accepted.",
        "say": "Append one turn (TEXT; - reads stdin, @FILE a file) to the conversation as --role.",
        "system": 'Set the conversation\'s system prompt to TEXT ("" clears it); without TEXT, print it.',
        "transcript": "The conversation's transcript: turns in canonical order, repaired for a provider.",
    },
    "evidence": {
        "verify-evidence": (
            "Check the evidence bundle FILE using nothing but its bytes (docs/integrity.md §6.3)."
        ),
    },
    "findings": {
        "findings": (
            "The findings this replica holds (of one conversation with --conv): rollbacks, deletions, "
            "withholding, split views and record equivocations, each with its proof."
        ),
    },
    "imports": {
        "import-from": "Import a history kept elsewhere into a conversation (again: only what is new).",
    },
    "rooted": {
        "alias": "List the aliases, point NAME at CONV (an alias or a rooted id), or --remove NAME.",
        "conversations": (
            "Every conversation held here: aliases, title, record count and last activity (UTC)."
        ),
        "migrate": "Copy legacy conversation OLD (its literal name) into a rooted one owned by this key.",
        "new": "Start a rooted conversation owned by this replica's key and print its id.",
    },
    "status": {
        "status": (
            "One screen that sums up the replica: conversations, held records, findings, witnesses, peers."
        ),
    },
    "sync": {
        "serve": "Run the sync server over HTTP (or on a spool folder) until interrupted.",
        "sync": "Reconcile with TARGET: a server URL, another replica's directory, or spool:FOLDER.",
    },
    "view": {
        "view": "Serve a web viewer of the replica's conversations on 127.0.0.1 until interrupted.",
    },
    "witness": {
        "checkpoint": "Sign a checkpoint of the conversation's folded state (and compact behind it).",
        "witness": "The witnesses that cosign this replica's checkpoints, and how many must (k).",
    },
}
# command: its module under convgraph.cli and the first sentence of its help
LAZY: Final = {name: (module, text) for module, texts in _SUMMARIES.items() for name, text in texts.items()}


def load(group: click.Group, module: str) -> None:
    """Register the commands of `convgraph.cli.<module>` on `group`, each with its `--home`."""
    from convgraph.cli import home  # noqa: PLC0415 - home imports nothing of the commands

    importlib.import_module(f"convgraph.cli.{module}").register(group)
    home.add_everywhere(group)


def load_all(group: click.Group) -> None:
    """Register every lazy command now (for tools that walk the whole command tree)."""
    for module in sorted({m for m, _ in LAZY.values()}):
        load(group, module)


class LazyGroup(click.Group):
    """A group whose commands in `LAZY` are registered when first asked for by name."""

    def list_commands(self, ctx: click.Context) -> list[str]:  # noqa: ARG002 - click's signature
        return sorted({*self.commands, *LAZY})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:  # noqa: ARG002
        if cmd_name not in self.commands and cmd_name in LAZY:
            load(self, LAZY[cmd_name][0])
        return self.commands.get(cmd_name)

    def _visible(self, ctx: click.Context) -> list[str]:
        return [n for n in self.list_commands(ctx) if n not in self.commands or not self.commands[n].hidden]

    def _summary(self, name: str, limit: int) -> str:
        # a stand-in Command cuts a summary short exactly as the real one's help would be
        return (self.commands.get(name) or click.Command(name, help=LAZY[name][1])).get_short_help_str(limit)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """As `click.Group` lists them, but a command not yet loaded by its summary in `LAZY`."""
        names = self._visible(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(n) for n in names)
        with formatter.section("Commands"):
            formatter.write_dl([(n, self._summary(n, limit)) for n in names])

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        """As `click.Group` completes a command name (zsh and fish show each one's summary), but
        without importing the commands that match: a Tab press costs what `--help` does."""
        names = [n for n in self._visible(ctx) if n.startswith(incomplete)]
        # click.Command's: the group's own options, when `incomplete` starts with a dash
        return [CompletionItem(n, help=self._summary(n, 45)) for n in names] + \
            click.Command.shell_complete(self, ctx, incomplete)
