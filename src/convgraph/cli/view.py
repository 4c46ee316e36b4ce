"""`convgraph view`: the web viewer of the local replica, or a link into a server's.

Locally it serves `viewer/app.py` on 127.0.0.1 only, on a free port (or `--port`), behind a
random token printed in its URL, as Jupyter does: a request without it is refused (403).
With `--server URL` it asks that server (`convgraph serve`) for a link with a signed
request: the viewer there shows what this key may read.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import webbrowser

import click

from convgraph.cli import aliases
from convgraph.cli.shared import _errors, _replica, err, json_option


def register(cli: click.Group) -> None:
    """Add `view` to the main command group."""

    @cli.command()
    @click.option("--port", default=0, show_default=True, type=click.IntRange(0, 65_535),
                  help="Port on 127.0.0.1; 0 picks a free one.")
    @click.option("--server", "server_url", default=None, metavar="URL",
                  help="Print a link into this sync server's viewer instead (a signed request).")
    @click.option("--open", "open_browser", is_flag=True, help="Open the link in a browser too.")
    @json_option
    @click.pass_context
    @_errors
    def view(
        ctx: click.Context, port: int, server_url: str | None, open_browser: bool, as_json: bool,
    ) -> None:
        """Serve a web viewer of the replica's conversations on 127.0.0.1 until interrupted."""
        if server_url is not None:
            from convgraph.sync.http import HttpRemote  # noqa: PLC0415 - only this path needs httpx

            with _replica(ctx) as replica, HttpRemote(server_url, replica.key, timeout_s=30) as remote:
                link = remote.viewer_link()
            _announce(link, open_browser, as_json=as_json)
            return
        from convgraph.server import listener  # noqa: PLC0415 - only the viewer needs uvicorn
        from convgraph.sync.live import Hub  # noqa: PLC0415
        from convgraph.viewer.app import BASE, Everything, Viewer, standalone  # noqa: PLC0415
        from convgraph.viewer.sessions import Sessions  # noqa: PLC0415

        home = ctx.obj["home"]
        with _replica(ctx) as replica:
            sock = listener.bind("127.0.0.1", port)  # loopback only: the token is the only lock
            try:
                sessions = Sessions(lambda: int(time.time() * 1000))
                token = sessions.issue(None, expires=False)
                viewer = Viewer(replica, sessions, lambda _session: Everything(), Hub(), threading.RLock(),
                                aliases=lambda: aliases.load(home))
                url = f"{listener.url_of(sock)}{BASE}/?token={token}"

                def ready() -> None:  # once pages are answered, so the link works when it is printed
                    _announce(url, open_browser, as_json=as_json)
                    err.print("serving until interrupted (Ctrl-C)")

                listener.serve(standalone(viewer), sock, on_ready=ready)
            finally:
                sock.close()


def _announce(url: str, open_browser: bool, *, as_json: bool = False) -> None:
    click.echo(json.dumps({"url": url}) if as_json else f"viewer: {url}")
    sys.stdout.flush()  # a pipe is block-buffered: whoever waits for the line gets it now
    if open_browser:
        webbrowser.open(url)
