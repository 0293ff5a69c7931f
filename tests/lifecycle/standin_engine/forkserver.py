"""A warm parent for the stand-in commands: it imports the stand-in (and, through it, the Pulumi SDK,
gRPC and llmctl's offline mocks) once, then forks one child per command.

Why: every `pulumi`, `kubectl` and `aws` call the code under test makes is a new process, and a new
Python process spends most of a stand-in command importing what it needs (about 60 % of a lifecycle
scenario's CPU went to the stand-in's processes, half of that to imports). A forked child starts
with those modules loaded and otherwise runs the command exactly as the executable would: the
caller's argv, working directory, environment and standard streams, its signals, its exit status.

The executable on PATH (standin_support.install) stays a process of its own: a small compiled client
(client.c) passes its argv, cwd, environment and file descriptors 0-2 over a Unix socket, forwards
SIGINT/SIGTERM/SIGHUP to the child that runs the command, and exits with that child's status (killed
children included). When the server is not there it runs the command in its own Python process.

Protocol, per connection: the client sends one message carrying its three descriptors (SCM_RIGHTS):
a 4-byte big-endian length, then NUL-ended fields: the module, the working directory, the argument
count, the arguments, the environment's NAME=VALUE entries. The server forks a waiter, the waiter
forks the runner and sends back the runner's pid ("pid N\\n"), then its wait status ("exit N\\n" or
"signal N\\n").
"""

from __future__ import annotations

import array
import contextlib
import gc
import importlib
import os
import signal
import socket
import struct
import sys
from typing import Any

MODULES = ("cli", "operation", "kubectl", "aws_cli")
# What the commands import lazily, from more than one thread at once: `grpc.insecure_channel` imports
# `grpc._channel` on its first call (grpc/__init__.py), and a `pulumi up` child makes that first call
# from two threads (the event stream, events.py, and the program's call, deploy.py). On 2026-11-28 a
# child hung there for good: one thread held `grpc._channel`'s import lock while it waited for
# logging's lock (grpc/_simple_stubs.py's getLogger), the other waited for that import lock. Imported
# here, in the parent, the children never import them at all.
LAZY = ("grpc._channel", "grpc.experimental", "pulumi.runtime.proto.events_pb2_grpc")


def preload() -> None:
    """Import what the commands import, with site processing (the editable finder for llmctl), and the
    modules they would import lazily from several threads (`LAZY`)."""
    from .cli import enable_site

    enable_site()
    for module in MODULES:
        importlib.import_module(f"standin_engine.{module}")
    for module in LAZY:
        importlib.import_module(module)


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    fds = array.array("i")
    data, ancdata, _flags, _addr = conn.recvmsg(65536, socket.CMSG_SPACE(3 * fds.itemsize))
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - (len(payload) % fds.itemsize)])
    (size,) = struct.unpack("!I", data[:4])
    body = data[4:]
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            raise ConnectionError("the client went away")
        body += chunk
    return parse_request(body), list(fds)


def parse_request(body: bytes) -> dict[str, Any]:
    """The client's NUL-ended fields as {module, cwd, argv, env}: bytes decoded as Python decodes its
    own argv and environment (os.fsdecode), entries without "=" skipped as os.environ skips them."""
    fields = [os.fsdecode(field) for field in body.split(b"\0")[:-1]]
    count = int(fields[2])
    argv = fields[3 : 3 + count]
    env = dict(entry.split("=", 1) for entry in fields[3 + count :] if "=" in entry)
    return {"module": fields[0], "cwd": fields[1], "argv": argv, "env": env}


def _run(request: dict[str, Any], fds: list[int]) -> None:
    """In the runner: become the command, then exit with its status."""
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    # the handlers a fresh Python starts with (SIGPIPE stays ignored, as Python sets it)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = list(request["argv"])
    code = 0
    try:
        importlib.import_module(f"standin_engine.{request['module']}").main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    except KeyboardInterrupt:  # as Python reports it: killed by the signal
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:  # a crash prints its traceback, as the executable would
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
    os._exit(code)


def _wait_and_report(conn: socket.socket) -> None:
    """In the waiter: start the runner, tell the client its pid, then how it ended."""
    request, fds = _receive(conn)
    runner = os.fork()
    if runner == 0:
        conn.close()
        _run(request, fds)
    for fd in fds:
        os.close(fd)
    conn.sendall(f"pid {runner}\n".encode())
    _pid, status = os.waitpid(runner, 0)
    if os.WIFSIGNALED(status):
        conn.sendall(f"signal {os.WTERMSIG(status)}\n".encode())
    else:
        conn.sendall(f"exit {os.WEXITSTATUS(status)}\n".encode())


def _reap(block: bool) -> None:
    """Collect finished waiters (their CPU time, the runners' included, then counts as ours)."""
    while True:
        try:
            pid, _status = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _stop(signum: int, frame: Any) -> None:
    raise SystemExit(0)


def serve(path: str) -> None:
    """Accept commands until SIGTERM; one waiter process per command."""
    preload()
    # the preloaded heap to the permanent generation: a child's collections then never walk (and so
    # never copy on write) the pages it shares with this parent
    gc.collect()
    gc.freeze()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(64)
    signal.signal(signal.SIGTERM, _stop)
    print("ready", flush=True)
    try:
        while True:
            conn, _ = server.accept()
            waiter = os.fork()
            if waiter == 0:
                server.close()
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                try:
                    _wait_and_report(conn)
                finally:
                    os._exit(0)
            conn.close()
            _reap(block=False)
    finally:
        _reap(block=True)


if __name__ == "__main__":
    serve(sys.argv[1])
