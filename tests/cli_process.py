"""`python -m convgraph.cli ARGS` as a real child process, forked from a server that has already
imported the CLI: `run(...)` costs a fork (milliseconds), not an interpreter start and the
imports (0.3-0.6 s of CPU each).

Each pytest worker starts one fork server lazily: a fresh `python -c` (no pytest in it, so
none of conftest's in-process settings), which imports `convgraph.cli.main` (and the sync
clients) and then only forks. The test process never forks itself (xdist workers have
threads). A call hands the server, over a SOCK_SEQPACKET control socket, the child's stdin,
stdout and stderr and one end of a socketpair; the server forks; the child reads the request
(args, env, cwd) from the socketpair, puts those fds on 0/1/2, replaces `os.environ`, changes
directory and runs the module with `runpy` as `-m` does, so click names the program
`python -m convgraph.cli` as before. The server sends the child's pid, reaps it and sends its
exit status: own pid, own fds 0/1/2, real exit status (a signal is -N, as `subprocess` says).

What a fresh process would differ in, and how the child makes up for it:
- rich `Console`s made at import read COLUMNS, LINES, NO_COLOR, TERM, FORCE_COLOR... and
  whether stdout is a terminal when made: every Console made while preloading is made again
  (same arguments) in the child, after its env and fds are in place; `rich.get_console()`'s
  cached console is dropped. The locale (LC_CTYPE, with CPython's C-locale coercion), TZ, the
  cached temp dir, PYTHONUNBUFFERED (stdio buffering) and PYTHONDONTWRITEBYTECODE follow the
  child's env. `random` is reseeded at fork by the stdlib.
- Not made up for: the str hash seed is the server's, the same in every call; modules the
  server preloaded are in `sys.modules` already. An env whose other PYTHON* variables differ
  from the server's (they act at interpreter start) runs a real `python -m` instead, as does
  every call when CONVGRAPH_TEST_REAL_CLI=1 (to compare the two).

A few tests keep running the real interpreter on purpose (packaging, docs, TTY and signal
tests, servers under Popen).
"""

from __future__ import annotations

import atexit
import contextlib
import locale
import os
import pickle
import selectors
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, overload

# click._textwrap: what every usage error and --help imports
PRELOAD = ("convgraph.cli.main", "convgraph.sync.http", "convgraph.sync.spool", "click._textwrap")
# interpreter-start settings the child reproduces; any other PYTHON* difference runs the real thing
EMULATED = frozenset({"PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE"})
REAL_ENV = "CONVGRAPH_TEST_REAL_CLI"
_STATUS = struct.Struct("!q")


# ---------------------------------------------------------------- the test side


@overload
def run(args: Sequence[str | bytes], *, text: Literal[True], env: Mapping[str, str] | None = ...,
        cwd: str | Path | None = ..., input: str | None = ..., stdin: int | None = ...,
        timeout: float | None = ..., check: bool = ..., module: str = ...) -> subprocess.CompletedProcess[str]: ...
@overload
def run(args: Sequence[str | bytes], *, text: Literal[False] = ..., env: Mapping[str, str] | None = ...,
        cwd: str | Path | None = ..., input: bytes | None = ..., stdin: int | None = ...,
        timeout: float | None = ..., check: bool = ..., module: str = ...) -> subprocess.CompletedProcess[bytes]: ...
def run(args: Sequence[str | bytes], *, text: bool = False, env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None, input: str | bytes | None = None, stdin: int | None = None,
        timeout: float | None = None, check: bool = False, module: str = "convgraph.cli") -> Any:
    """`subprocess.run([sys.executable, "-m", module, *args], capture_output=True, ...)`: stdout
    and stderr captured, `input` on stdin (else `stdin`: None inherits ours, as subprocess does,
    or subprocess.DEVNULL), `text` decodes like subprocess. TimeoutExpired and
    CalledProcessError as subprocess raises them."""
    cmd = [sys.executable, "-m", module, *args]
    environ = dict(os.environ if env is None else env)
    if os.environ.get(REAL_ENV) == "1" or not _server().can_run(environ):
        return subprocess.run(cmd, capture_output=True, text=text, env=environ, cwd=cwd, input=input,
                              stdin=stdin, timeout=timeout, check=check)
    data = input.encode(_encoding()) if isinstance(input, str) else input
    request = {"module": module, "args": [os.fsdecode(a) for a in args], "env": environ,
               "cwd": os.path.abspath(cwd if cwd is not None else os.getcwd())}
    code, out, err = _server().call(request, data, stdin, timeout, cmd)
    stdout: str | bytes = _decode(out) if text else out
    stderr: str | bytes = _decode(err) if text else err
    if check and code:
        raise subprocess.CalledProcessError(code, cmd, stdout, stderr)
    return subprocess.CompletedProcess(cmd, code, stdout, stderr)


def _encoding() -> str:  # what subprocess's text mode uses
    return "utf-8" if sys.flags.utf8_mode else locale.getencoding()


def _decode(data: bytes) -> str:
    return data.decode(_encoding()).replace("\r\n", "\n").replace("\r", "\n")


class _Server:
    def __init__(self) -> None:
        self.pid = os.getpid()
        self.environ = dict(os.environ)
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        tests = str(Path(__file__).resolve().parent)
        code = (f"import sys; sys.path.insert(0, {tests!r}); import cli_process; del sys.path[0]; "
                f"cli_process.serve({theirs.fileno()})")
        self.process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, pass_fds=[theirs.fileno()], env=self.environ)
        theirs.close()

    def can_run(self, env: Mapping[str, str]) -> bool:
        def python(e: Mapping[str, str]) -> dict[str, str]:
            return {k: v for k, v in e.items() if k.startswith("PYTHON") and k not in EMULATED}
        return self.process.poll() is None and python(env) == python(self.environ)

    def call(self, request: dict[str, Any], data: bytes | None, stdin: int | None, timeout: float | None,
             cmd: list[str]) -> tuple[int, bytes, bytes]:
        deadline = None if timeout is None else time.monotonic() + timeout
        mine, child = socket.socketpair()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        in_r = in_w = -1
        if data is not None:
            in_r, in_w = os.pipe()
            given = in_r
        elif stdin == subprocess.DEVNULL:
            given = in_r = os.open(os.devnull, os.O_RDONLY)
        elif stdin is None:  # ours, as subprocess leaves it (under pytest: its /dev/null)
            try:
                os.fstat(0)
                given = 0
            except OSError:  # closed: the child gets an empty one
                given = in_r = os.open(os.devnull, os.O_RDONLY)
        else:
            given = stdin
        try:
            socket.send_fds(self.control, [b"r"], [child.fileno(), given, out_w, err_w])
        finally:
            for fd in (out_w, err_w, in_r):
                if fd >= 0:
                    os.close(fd)
            child.close()
        try:
            mine.sendall(_frame(pickle.dumps(request)))
            pid = _read_int(mine)
            return self._communicate(mine, pid, out_r, err_r, in_w, data, deadline, timeout, cmd)
        finally:
            mine.close()
            for fd in (out_r, err_r):
                os.close(fd)

    def _communicate(self, mine: socket.socket, pid: int, out_r: int, err_r: int, in_w: int,
                     data: bytes | None, deadline: float | None, timeout: float | None,
                     cmd: list[str]) -> tuple[int, bytes, bytes]:
        chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
        with selectors.DefaultSelector() as sel:
            sel.register(out_r, selectors.EVENT_READ)
            sel.register(err_r, selectors.EVENT_READ)
            view = memoryview(data or b"")
            if in_w >= 0:
                if view:
                    os.set_blocking(in_w, False)
                    sel.register(in_w, selectors.EVENT_WRITE)
                else:
                    os.close(in_w)
            while sel.get_map():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    os.kill(pid, signal.SIGKILL)  # not reaped yet: the server sends the status only after
                    _read_int(mine)
                    raise subprocess.TimeoutExpired(cmd, timeout or 0, b"".join(chunks[out_r]),
                                                    b"".join(chunks[err_r]))
                for key, _ in sel.select(left):
                    fd = int(key.fd)
                    if fd == in_w:
                        try:
                            view = view[os.write(fd, view[:65536]):]
                        except BrokenPipeError:
                            view = view[:0]
                        if not view:
                            sel.unregister(fd)
                            os.close(fd)
                        continue
                    chunk = os.read(fd, 65536)
                    if chunk:
                        chunks[fd].append(chunk)
                    else:
                        sel.unregister(fd)
        if deadline is not None:
            mine.settimeout(max(deadline - time.monotonic(), 0.001))
        try:
            code = _read_int(mine)
        except TimeoutError:
            os.kill(pid, signal.SIGKILL)
            mine.settimeout(None)
            _read_int(mine)
            raise subprocess.TimeoutExpired(cmd, timeout or 0, b"".join(chunks[out_r]),
                                            b"".join(chunks[err_r])) from None
        return code, b"".join(chunks[out_r]), b"".join(chunks[err_r])

    def close(self) -> None:
        self.control.close()  # the server stops at end of file
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


_lock = threading.Lock()
_servers: dict[int, _Server] = {}  # by the pid of the test process that started it


def _server() -> _Server:
    with _lock:
        server = _servers.get(os.getpid())
        if server is None or server.process.poll() is not None:
            server = _servers[os.getpid()] = _Server()
            atexit.register(server.close)
        return server


def _frame(data: bytes) -> bytes:
    return _STATUS.pack(len(data)) + data


def _read_exact(sock: socket.socket, n: int) -> bytes:
    got = b""
    while len(got) < n:
        chunk = sock.recv(n - len(got))
        if not chunk:
            raise ConnectionError("the CLI fork server closed the connection")
        got += chunk
    return got


def _read_int(sock: socket.socket) -> int:
    value: int = _STATUS.unpack(_read_exact(sock, _STATUS.size))[0]
    return value


# ---------------------------------------------------------------- the fork server


_made: list[tuple[Any, tuple[Any, ...], dict[str, Any]]] = []  # the Consoles preloading made


def _preload() -> None:
    import importlib

    from rich.console import Console

    init = Console.__init__

    def recording(self: Any, *args: Any, **kwargs: Any) -> None:
        _made.append((self, args, kwargs))
        init(self, *args, **kwargs)

    Console.__init__ = recording  # type: ignore[method-assign]
    try:
        for name in PRELOAD:
            importlib.import_module(name)
        # the commands a fresh process imports when it runs one (cli/commands.py), all of them
        from convgraph.cli.commands import load_all
        from convgraph.cli.main import cli

        load_all(cli)
    finally:
        Console.__init__ = init  # type: ignore[method-assign]


def serve(control_fd: int) -> None:
    """The server's loop: fork one child per request, report its pid, then its exit status."""
    import gc

    _preload()
    gc.collect()
    gc.freeze()  # preloaded objects stay shared with the children (no refcount copy-on-write)
    control = socket.socket(fileno=control_fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    calls: dict[int, socket.socket] = {}
    sel = selectors.DefaultSelector()
    sel.register(control, selectors.EVENT_READ)
    sel.register(wake_r, selectors.EVENT_READ)
    while True:
        for key, _ in sel.select():
            if key.fd == wake_r:
                os.read(wake_r, 4096)
                _reap(calls)
                continue
            try:
                _, fds, _, _ = socket.recv_fds(control, 16, 4)
            except ConnectionError:
                fds = []
            if len(fds) != 4:  # end of file: the test process is gone
                for fd in fds:
                    os.close(fd)
                return
            call = socket.socket(fileno=fds[0])
            pid = os.fork()
            if pid == 0:
                try:
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    sel.close()
                    for s in (control, *calls.values()):
                        s.close()
                    for fd in (wake_r, wake_w):
                        os.close(fd)
                    for target, fd in enumerate(fds[1:]):
                        os.dup2(fd, target)
                    for fd in set(fds[1:]):
                        if fd > 2:
                            os.close(fd)
                    request = pickle.loads(_read_exact(call, _read_int(call)))
                    call.close()
                except BaseException:
                    os._exit(70)
                _child(request)  # never returns
            for fd in fds[1:]:
                os.close(fd)
            calls[pid] = call
            with contextlib.suppress(OSError):  # the test process gave up on it
                call.sendall(_STATUS.pack(pid))
            _reap(calls)


def _reap(calls: dict[int, socket.socket]) -> None:
    while calls:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            return
        call = calls.pop(pid, None)
        if call is not None:
            with contextlib.suppress(OSError):
                call.sendall(_STATUS.pack(os.waitstatus_to_exitcode(status)))
            call.close()


def _child(request: dict[str, Any]) -> None:
    """In the forked child: become `python -m MODULE ARGS` in the request's env and cwd."""
    try:
        _become(request)
    except BaseException:
        import traceback

        traceback.print_exc()
        _flush()
        os._exit(70)
    import runpy

    code = 0
    try:
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        code = -signal.SIGINT
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    # Py_FinalizeEx's order: wait for threads, atexit, flush the standard streams
    with contextlib.suppress(BaseException):
        threading._shutdown()  # type: ignore[attr-defined]
    import atexit as exits

    exits._run_exitfuncs()
    if not _flush():
        code = 120
    if code == -signal.SIGINT:  # as CPython does: die of the signal
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code & 0xFF)


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    with contextlib.suppress(Exception):
        print(code, file=sys.stderr)
    return 1


def _flush() -> bool:
    """Flush stdout and stderr as the interpreter does at exit; False when stdout could not be
    (the interpreter then says so on stderr and exits 120)."""
    ok = True
    try:
        sys.stdout.flush()
    except Exception:
        ok = False
        with contextlib.suppress(Exception):
            print(f"Exception ignored in: {sys.stdout!r}", file=sys.stderr)
            sys.excepthook(*sys.exc_info())
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    return ok


def _become(request: dict[str, Any]) -> None:
    import codecs
    import io
    import tempfile

    os.chdir(request["cwd"])
    env: dict[str, str] = request["env"]
    os.environ.clear()
    os.environ.update(env)
    try:  # what the interpreter does first: LC_CTYPE from the environment
        where = locale.setlocale(locale.LC_CTYPE, "")
    except locale.Error:  # a locale this system lacks leaves C
        where = locale.setlocale(locale.LC_CTYPE, "C")
    legacy = where in ("C", "POSIX")  # which turns on UTF-8 mode (PEP 540) and is coerced (PEP 538)
    if legacy and env.get("PYTHONCOERCECLOCALE") != "0" and not env.get("LC_ALL"):
        os.environ["LC_CTYPE"] = "C.UTF-8"
        where = locale.setlocale(locale.LC_CTYPE, "C.UTF-8")
    time.tzset()
    tempfile.tempdir = None
    sys.dont_write_bytecode = bool(env.get("PYTHONDONTWRITEBYTECODE"))
    unbuffered = bool(env.get("PYTHONUNBUFFERED"))
    utf8 = bool(sys.flags.utf8_mode) or legacy
    encoding = "utf-8" if utf8 else codecs.lookup(locale.getencoding()).name
    errors = "surrogateescape" if utf8 or where in ("C.UTF-8", "C.utf8", "UTF-8") else "strict"

    def stream(fd: int, write: bool, errs: str, line: bool) -> io.TextIOWrapper:
        raw = io.FileIO(fd, "w" if write else "r", closefd=False)
        buffered: Any = raw if write and unbuffered else (io.BufferedWriter(raw) if write else io.BufferedReader(raw))
        return io.TextIOWrapper(buffered, encoding=encoding, errors=errs, line_buffering=line,
                                write_through=write and unbuffered)

    sys.stdin = sys.__stdin__ = stream(0, False, errors, False)
    sys.stdout = sys.__stdout__ = stream(1, True, errors, os.isatty(1) and not unbuffered)
    sys.stderr = sys.__stderr__ = stream(2, True, "backslashreplace", not unbuffered)
    sys.path[0] = os.getcwd()  # `-m` puts the working directory first
    sys.orig_argv = [sys.executable, "-m", request["module"], *request["args"]]
    sys.argv = [sys.orig_argv[0], *request["args"]]  # runpy puts the module's file in argv[0]
    import rich

    rich._console = None  # type: ignore[attr-defined]
    for console, args, kwargs in _made:  # made again, reading this env and these fds
        type(console).__init__(console, *args, **kwargs)
