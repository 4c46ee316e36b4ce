"""The `convgraph` console script: Ctrl-C is handled before anything heavy is imported.

This module imports only `sys` and `os`, so the `try` that turns `KeyboardInterrupt` into
exit 130 (as a shell reports a command killed by SIGINT, and as git exits) is in place before
click, rich and the replica are loaded: Ctrl-C while the command starts prints no traceback.
Click runs outside its standalone mode so that Ctrl-C inside a command, where the lazy
commands and the replica are imported, exits 130 too rather than "Aborted!" and 1; everything
else it reports as standalone mode would. Invariant: Ctrl-C exits 130 and writes only a newline.
"""

import os
import sys

# test hook (tests/cli/test_entry.py): print this marker on stderr and wait to be interrupted,
# at the point where the heavy imports would begin
PAUSE_ENV = "CONVGRAPH_TEST_PAUSE_AT_START"
READY = "convgraph: starting\n"
INTERRUPTED = 130  # 128 + SIGINT


def main() -> None:
    """Run the command line; Ctrl-C anywhere, start-up included, exits 130 quietly."""
    try:
        if os.environ.get(PAUSE_ENV):
            sys.stderr.write(READY)
            sys.stderr.flush()
            import time  # noqa: PLC0415 - the test hook only

            time.sleep(60)
        _run()
    except KeyboardInterrupt:
        sys.stderr.write("\n")
        sys.exit(INTERRUPTED)


def _run() -> None:
    import click  # noqa: PLC0415 - the heavy part, inside main's try

    from convgraph.cli.main import cli  # noqa: PLC0415

    try:
        code = cli.main(obj={}, standalone_mode=False)
    except click.Abort as exc:
        if isinstance(exc.__cause__, KeyboardInterrupt):  # click has written the newline
            sys.exit(INTERRUPTED)
        click.echo("Aborted!", err=True)  # end of input at a prompt, as standalone click says
        sys.exit(1)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    sys.exit(code if isinstance(code, int) else 0)  # what `ctx.exit(n)` returned, else success
