"""The web viewer: server-rendered pages of a replica's conversations, mounted at `/view`.

`convgraph view` serves it alone for the local replica (`standalone`); `convgraph serve`
mounts the same routes (`mount`) for any key that may read, which trades a signed request
for a session (`POST /v1/viewer/sessions`). Pages: the conversation list; a conversation
(its DAG as SVG beside its transcript, with the authority and findings badges); a record's
detail, with links along what names what (a patch to its base and result files and to the
reviews and decisions naming it, a review to what it read, a decision to its request and
subject); a file a record names, reached through that record. A conversation page follows
the server's event stream (`live.record_events`) and re-renders its live part when a record
arrives. Safety: the templates autoescape every
value (Jinja2), foreign text is made visible by `safe_text` first, links are built only from
our own paths, and every answer carries a Content-Security-Policy that runs only our own
script file and no inline code. Invariant: no page, fragment or event stream answers a
request without a live session, nor shows a conversation its session may not read (those
answer 404, as a record that does not exist does).
"""

from __future__ import annotations

import asyncio
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractContextManager, asynccontextmanager
from dataclasses import dataclass
from importlib import resources
from typing import Any, Final, Protocol, TypeVar

from convgraph.core import safe_text, suggestions
from convgraph.core.cid import CID
from convgraph.core.keys import fingerprint
from convgraph.errors import ConvgraphError, MissingExtraError

try:  # the [server] extra: without it, a typed error that says what to install
    import jinja2
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
    from starlette.routing import Mount, Route
except ModuleNotFoundError as exc:
    raise MissingExtraError("server", "the web viewer", module=exc.name) from exc

from convgraph.replica import Replica
from convgraph.sync.live import Hub, poll, record_events
from convgraph.viewer import code, views
from convgraph.viewer.sessions import Session, Sessions, cookie_name

BASE: Final = "/view"
CSP: Final = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
              "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
_HEADERS: Final = {
    "Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store", "X-Frame-Options": "DENY",
}
_STATIC: Final = {"viewer.js": "text/javascript", "viewer.css": "text/css"}
_T = TypeVar("_T")


class Reader(Protocol):
    """What a session may read."""

    def can_read(self, conv: str) -> bool: ...


class Everything:
    """The replica's own user, at `convgraph view`: every conversation it holds is theirs to read."""

    def can_read(self, _conv: str) -> bool:
        return True


@dataclass(frozen=True)
class Viewer:
    """The viewer's shared state: the replica, its sessions, and how a session becomes a reader.

    `lock` is held around every read of the replica (the server's, so its folds are read
    between ingests); `aliases` gives the local names of conversations, where there are any."""

    replica: Replica
    sessions: Sessions
    reader_of: Callable[[Session], Reader]
    hub: Hub
    lock: AbstractContextManager[Any]
    heartbeat_s: float = 15.0
    aliases: Callable[[], Mapping[str, str]] = dict


def mount(viewer: Viewer) -> Mount:
    """The viewer's routes under `/view`."""
    env = _environment()
    pages = _Pages(viewer, env)
    routes = [
        Route("/", pages.authed(pages.index), methods=["GET"]),
        Route("/c", pages.authed(pages.conversation), methods=["GET"]),
        Route("/c/live", pages.authed(pages.fragment), methods=["GET"]),
        Route("/c/events", pages.authed(pages.events), methods=["GET"]),
        Route("/r/{cid}", pages.authed(pages.record), methods=["GET"]),
        Route("/r/{cid}/a/{artifact}", pages.authed(pages.artifact), methods=["GET"]),
        Route("/static/{name}", pages.static, methods=["GET"]),
    ]
    return Mount(BASE, routes=routes)


def standalone(viewer: Viewer, *, poll_s: float = 0.5) -> Starlette:
    """The viewer alone, as `convgraph view` serves it: the store is polled for writes of
    other processes (the CLI writing beside it), which wake the pages' event streams."""

    @asynccontextmanager
    async def lifespan(_: Starlette) -> Any:
        viewer.hub.bind(asyncio.get_running_loop())
        task = asyncio.create_task(poll(viewer.hub, viewer.replica.store.change_token, poll_s))
        try:
            yield
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def home(_: Request) -> Response:
        return _secured(RedirectResponse(BASE + "/", 303))

    async def no_icon(_: Request) -> Response:
        return _secured(Response(status_code=204))

    routes = [Route("/", home, methods=["GET"]), Route("/favicon.ico", no_icon, methods=["GET"]),
              mount(viewer)]
    return Starlette(routes=routes, lifespan=lifespan)


def conv_url(conv: str, branch: str | None = None, *, page: str = "c", after: int | None = None) -> str:
    """A path of ours naming `conv` (any text: it travels in the query, percent-encoded)."""
    query = {"id": conv, **({"branch": branch} if branch is not None else {}),
             **({"after": str(after)} if after is not None else {})}
    return f"{BASE}/{page}?" + urllib.parse.urlencode(query, quote_via=urllib.parse.quote)


def record_url(cid: CID) -> str:
    return f"{BASE}/r/{cid}"


def artifact_url(record: CID, artifact: CID) -> str:
    """The page of an artifact as `record` names it (it is reached only through a record)."""
    return f"{BASE}/r/{record}/a/{artifact}"


Handler = Callable[[Request, Reader], Awaitable[Response]]


class _Pages:
    def __init__(self, viewer: Viewer, env: jinja2.Environment) -> None:
        self.viewer, self.env = viewer, env

    def authed(self, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        """Answer only a live session: `?token=` sets its cookie and redirects to the page
        without it; no token, no cookie, or a dead one is a 403."""

        async def run(request: Request) -> Response:
            sessions = self.viewer.sessions
            token = request.query_params.get("token")
            if token is not None:
                found = sessions.lookup(token)
                if found is None:
                    return self._denied()
                rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
                target = request.url.path + ("?" + urllib.parse.urlencode(rest) if rest else "")
                response = RedirectResponse(target, 303)
                # Lax, not Strict: a link opened from another site (a chat, a mail) must still get in;
                # cross-site requests other than top-level GETs carry no cookie either way
                response.set_cookie(cookie_name(token), token, httponly=True, samesite="lax", path=BASE)
                return _secured(response)
            session = sessions.from_cookies(request.cookies)
            if session is None:
                return self._denied()
            try:
                return _secured(await handler(request, self.viewer.reader_of(session)))
            except ConvgraphError as exc:
                return self._page("error.html", {"message": safe_text.line(str(exc))}, 400)

        return run

    async def _read(self, fn: Callable[..., _T], *args: Any) -> _T:
        def locked() -> _T:
            with self.viewer.lock:
                return fn(*args)

        return await run_in_threadpool(locked)

    def _page(self, name: str, context: dict[str, Any], status: int = 200) -> Response:
        return _secured(HTMLResponse(self.env.get_template(name).render(**context), status))

    def _denied(self) -> Response:
        return self._page("error.html", {"message": "This viewer wants the link with its token: open the URL "
                                                    f"`{suggestions.VIEW}` printed."}, 403)

    def _missing(self, what: str) -> Response:
        return self._page("error.html", {"message": f"No {what} that this session may read."}, 404)

    async def index(self, _: Request, reader: Reader) -> Response:
        replica = self.viewer.replica

        def rows() -> list[views.ConvRow]:
            readable = [c for c in replica.conversations() if reader.can_read(c)]
            return views.conversations(replica, readable, self.viewer.aliases())

        return self._page("index.html", {"rows": await self._read(rows)})

    async def _conv(self, request: Request, reader: Reader) -> tuple[views.ConvView, int] | None:
        conv = request.query_params.get("id")
        branch = request.query_params.get("branch") or None
        if conv is None or not await self._read(reader.can_read, conv):
            return None
        replica = self.viewer.replica

        def read() -> tuple[views.ConvView, int] | None:
            if not replica.store.count(conv):  # held nowhere here: as unknown as a forbidden one
                return None
            cursor = replica.store.cursor(conv)  # first: a record landing while we read is sent as an event
            return views.conversation(replica, conv, branch), cursor

        return await self._read(read)

    async def conversation(self, request: Request, reader: Reader) -> Response:
        found = await self._conv(request, reader)
        if found is None:
            return self._missing("conversation")
        view, cursor = found
        return self._page("conversation.html", {"v": view, "cursor": cursor})

    async def fragment(self, request: Request, reader: Reader) -> Response:
        found = await self._conv(request, reader)
        if found is None:
            return self._missing("conversation")
        return self._page("live.html", {"v": found[0]})

    async def events(self, request: Request, reader: Reader) -> Response:
        conv = request.query_params.get("id")
        if conv is None or not await self._read(reader.can_read, conv):
            return self._missing("conversation")
        # a reconnecting EventSource says where it stopped; the page's own cursor otherwise
        after = request.headers.get("last-event-id") or request.query_params.get("after")
        start = int(after) if after is not None and after.isdigit() and len(after) < 20 else None
        if start is None:
            start = await run_in_threadpool(self.viewer.replica.store.cursor, conv)

        async def refusal() -> dict[str, Any] | None:
            if await self._read(reader.can_read, conv):
                return None
            return {"error": "forbidden", "detail": "this session may no longer read the conversation"}

        stream = record_events(self.viewer.replica.store.since, self.viewer.hub, conv, start,
                               disconnected=request.is_disconnected, refusal=refusal,
                               heartbeat_s=self.viewer.heartbeat_s)
        return StreamingResponse(stream, media_type="text/event-stream", headers={"X-Accel-Buffering": "no"})

    async def record(self, request: Request, reader: Reader) -> Response:
        try:
            cid = CID.parse(request.path_params["cid"])
        except ConvgraphError:
            return self._missing("record")
        replica = self.viewer.replica

        def read() -> views.RecordView | None:
            metas = replica.store.metas([cid])
            if cid not in metas or not reader.can_read(metas[cid].conv):
                return None
            return views.record(replica, cid)

        view = await self._read(read)
        if view is None:
            return self._missing("record")
        return self._page("record.html", {"r": view})

    async def artifact(self, request: Request, reader: Reader) -> Response:
        try:
            cid, named = CID.parse(request.path_params["cid"]), CID.parse(request.path_params["artifact"])
        except ConvgraphError:
            return self._missing("file")
        replica = self.viewer.replica

        def read() -> code.ArtifactView | None:
            metas = replica.store.metas([cid])
            if cid not in metas or not reader.can_read(metas[cid].conv):
                return None
            return code.artifact_page(replica, cid, named)

        view = await self._read(read)
        if view is None:
            return self._missing("file")
        return self._page("artifact.html", {"a": view})

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in _STATIC:
            return _secured(Response("not found", 404, media_type="text/plain"))
        body = resources.files("convgraph.viewer").joinpath("static", name).read_bytes()
        return _secured(Response(body, media_type=_STATIC[name]))


def _secured(response: Response) -> Response:
    response.headers.update(_HEADERS)
    return response


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("convgraph.viewer", "templates"),
        autoescape=True,  # every template, SVG included: nothing renders a value unescaped
        undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True,
    )
    env.globals.update(conv_url=conv_url, record_url=record_url, artifact_url=artifact_url, base=BASE,
                       short=views.short, turn_text=views.turn_text, utc=views.utc)
    env.filters["line"] = safe_text.line
    env.filters["fp"] = _fingerprint
    return env


def _fingerprint(actor: bytes) -> str:
    return fingerprint(actor)[:8]
