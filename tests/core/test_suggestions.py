"""Every command convgraph suggests comes from `convgraph.core.suggestions` and parses as printed.

The registry is kept honest from the source: any string the package prints (docstrings and
`help=` texts aside, which describe rather than suggest) that spells `convgraph <command>`
must be made in core/suggestions.py. Each suggestion, filled as a reader would fill it, must then
parse: click finds its command and takes its arguments and options without a usage error.
tests/cli/test_suggestions_cli.py provokes each situation for real and runs what is printed.
"""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import click
import pytest

from convgraph.cli.main import cli
from convgraph.core import suggestions

SRC = Path(suggestions.__file__).parents[1]  # src/convgraph: every module is scanned
ACTOR = "a" * 52
CID_TEXT = "bafyreigdmqpykrgxyaxtlafqpqhzrb7qy2rvokbhmxsrn5ekkgjnyqqwdu"
CONV = "cg1rj6t6mrwlq7wb3o46vbkolm7pnuqta6b"

# what a reader puts for each upper-case word, and the values the callers pass for each field
PLACEHOLDERS = {"FILE": "notes.txt", "TITLE": "design review", "DIR": "proofs", "BASE": CID_TEXT,
                "NEW": "calc.py", "TEXT": "see the file", "URL": "https://example.org",
                "CONVERSATION": CONV, "NAME": "example.org/w1", "KEYHEX": "ab" * 32, "TARGET": "../phone"}
FIELDS = {"home": "/tmp/a home", "conv": CONV, "actor": ACTOR, "capability": "write", "cid": CID_TEXT,
          "name": "example.org/w1", "key": "ab" * 32, "root": "/tmp/spool dir", "url": "https://example.org",
          "rule": f"{ACTOR}={CONV}"}


def filled(s: suggestions.Suggestion) -> str:
    """`s` as printed with the callers' values, then with each placeholder filled by a reader."""
    text = s(**{f: FIELDS[f] for f in s.fields})
    return re.sub(r"\b[A-Z]{3,}\b", lambda m: shlex.quote(PLACEHOLDERS[m.group()]), text)


def convgraph_commands(line: str) -> list[list[str]]:
    """The argument vectors of the `convgraph …` commands in a shell line (`&&`, `|`, `;`, `>`)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    commands: list[list[str]] = [[]]
    for token in lexer:
        if token in ("&&", "|", ";", ">", "||"):
            commands.append([])
        else:
            commands[-1].append(token)
    return [c[1:] for c in commands if c and c[0] == "convgraph"]


def parse(argv: list[str]) -> click.Command:
    """Resolve `argv` to its command and parse its arguments as click would: UsageError if not."""
    command: click.Command = cli
    ctx = cli.make_context("convgraph", list(argv))
    while isinstance(command, click.Group):
        rest = [*ctx._protected_args, *ctx.args]  # what a group leaves to its subcommand
        if not rest and command is not cli:
            break  # a group that runs itself with no subcommand (`checkpoint`)
        name, rest = rest[0] if rest else "", rest[1:]
        found = command.get_command(ctx, name)
        if found is None:
            raise click.UsageError(f"no command {name!r} in {argv}")
        command = found
        ctx = command.make_context(name, rest, parent=ctx)
    return command


@pytest.mark.parametrize("name", sorted(suggestions.ALL))
def test_each_suggestion_parses_as_printed(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # where the files a reader names are
    for placeholder in ("FILE", "NEW"):
        (tmp_path / PLACEHOLDERS[placeholder]).write_text("x = 1\n")
    line = filled(suggestions.ALL[name])
    argvs = convgraph_commands(line)
    assert argvs, line
    for argv in argvs:
        parse(argv)


def test_a_wrong_suggestion_would_be_caught() -> None:
    """The check above can fail: an option `say` lacks, an argument missing, a command unknown."""
    for bad in ("convgraph say --ref CID_TEXT hello", "convgraph why ACTOR", "convgraph nonesuch"):
        [argv] = convgraph_commands(bad)
        with pytest.raises(click.UsageError):
            parse(argv)


def test_fields_are_shell_quoted_and_placeholders_kept() -> None:
    assert suggestions.MIGRATE(conv="it's old") == "convgraph migrate 'it'\"'\"'s old'"
    assert suggestions.INIT(home=Path("/a b")) == "convgraph init --home '/a b'"
    assert suggestions.GRANT_DEVICE(actor=ACTOR, conv="CONVERSATION").endswith("--conv CONVERSATION")
    assert str(suggestions.NEW) == "convgraph new TITLE" and suggestions.NEW.fields == ()


def _printed_strings(tree: ast.AST) -> list[tuple[int, str]]:
    """The string constants of `tree` (f-strings' literal parts too), but docstrings and the
    values of `help=`, which describe a command rather than suggest one."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            skip.add(id(body[0].value))
        if isinstance(node, ast.keyword) and node.arg == "help":
            skip.update(id(n) for n in ast.walk(node.value))
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip]


def test_no_module_spells_a_command_outside_the_registry() -> None:
    commands = "|".join(sorted(map(re.escape, cli.commands), key=len, reverse=True))
    spelled = re.compile(rf"(?:^|[`(])convgraph (?:{commands})\b")
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path.name == "suggestions.py" or path.name == "openapi.py":  # the API's own documentation
            continue
        for line, text in _printed_strings(ast.parse(path.read_text(), str(path))):
            if spelled.search(text):
                found.append(f"{path.relative_to(SRC)}:{line}: {text.strip()[:80]}")
    assert found == [], "make these commands in convgraph/core/suggestions.py:\n" + "\n".join(found)


def test_the_source_check_would_catch_a_command_spelled_elsewhere() -> None:
    tree = ast.parse('def f():\n    """`convgraph log` is fine here."""\n    '
                     'return "try `convgraph why X write`"\n')
    assert [t for _, t in _printed_strings(tree)] == ["try `convgraph why X write`"]
