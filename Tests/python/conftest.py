"""Fixtures for the end-to-end tests: a live reactor-server on 127.0.0.1 and small HTTP and
server-sent-event clients built on the standard library.

The server binary is $REACTOR_SERVER_BIN, or .build/debug/reactor-server below the repository
root. Every server a test starts is stopped by its PID (SIGTERM, then a bounded wait). A test may
start another service built with ReactorServerKit instead (`App`): the starter package's
executable is $STARTER_BIN, or .build/debug/my-service (`make starter` builds it there).
"""

from __future__ import annotations

import http.client
import json
import os
import queue
import re
import selectors
import signal
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
LISTENING = re.compile(r"(\S+) listening on http://([^:/\s]+):(\d+)")
START_TIMEOUT = 30.0
STOP_TIMEOUT = 15.0


def server_binary() -> Path:
    return configured_binary("REACTOR_SERVER_BIN", ".build/debug/reactor-server")


def configured_binary(variable: str, default: str) -> Path:
    path = Path(os.environ.get(variable, default))
    if not path.is_absolute():
        path = REPO_ROOT / path
    return path


@dataclass(frozen=True)
class App:
    """A service built with ReactorServerKit, as the tests start it: its binary, the options of
    its own, and how to make the counter each serves (created with `create`, whose `"increase"`
    adds `step` to the state's `value`)."""

    name: str
    binary_variable: str
    default_binary: str
    options: tuple[str, ...]
    create: dict
    step: int

    @property
    def binary(self) -> Path:
        return configured_binary(self.binary_variable, self.default_binary)


#: reactor-server, the example reactors: the counter's change 20 ms after each action, by the
#: step it is created with.
REACTOR_SERVER = App("reactor-server", "REACTOR_SERVER_BIN", ".build/debug/reactor-server",
                     ("--counter-delay-ms", "20", "--search-latency-ms", "20"),
                     {"type": "counter", "parameters": {"step": 2}}, 2)
#: The starter package's service: its own counter, created with a step.
STARTER = App("my-service", "STARTER_BIN", ".build/debug/my-service", (),
              {"type": "counter", "parameters": {"step": 3}}, 3)


def new_store_directory(prefix: str = "reactor-store-") -> Path:
    """A new directory for a store, among this test run's temporary files rather than loose in
    /tmp."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=Server.store_directory))


def new_store(prefix: str = "reactor-store-") -> str:
    """A `--store` value for a new SQLite file in a directory of its own (`new_store_directory`)."""
    return f"sqlite:{new_store_directory(prefix) / 'sessions.sqlite'}"


class Server:
    """One reactor-server process this test run started."""

    #: Where servers write their logs, and where `new_store` makes stores: set for each test run
    #: by `server_logs`, inside pytest's own temporary directory (which keeps only the last few
    #: runs).
    log_directory: Path | None = None
    store_directory: Path | None = None

    def __init__(self, *args: str, env: dict[str, str] | None = None, store: str | None = None,
                 preexec_fn=None, app: App = REACTOR_SERVER) -> None:
        """Starts a server (`app`'s, by default reactor-server). It keeps its sessions in `store`
        (a `--store` value) when given, else in a new SQLite file of its own (unless `args` or
        `env` name a store). `preexec_fn` runs in the child before the server is executed (to put
        it in a cgroup, say)."""
        binary = app.binary
        if not binary.is_file():
            pytest.fail(f"no {app.name} binary at {binary}: build it (make test does) or set {app.binary_variable}")
        self.app = app
        self.log = tempfile.NamedTemporaryFile(prefix=f"{app.name}-", suffix=".log", delete=False,
                                               dir=Server.log_directory)
        command = [str(binary), "--host", "127.0.0.1", "--port", "0", *app.options, *args]
        process_env = {key: value for key, value in os.environ.items()
                       if key not in {"HOST", "PORT", "COUNTER_DELAY_MS"}}
        if store is None and "--store" not in args and "STORE" not in (env or {}):
            store = new_store()
        if store is not None:
            process_env["STORE"] = store
        process_env.update(env or {})
        self.store = process_env.get("STORE")
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=self.log,
                                        stdin=subprocess.DEVNULL, env=process_env, preexec_fn=preexec_fn)
        self.host, self.port = self._read_address()
        self.base = f"http://{self.host}:{self.port}"

    def _read_address(self) -> tuple[str, int]:
        deadline = time.monotonic() + START_TIMEOUT
        buffer = b""
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            while b"\n" not in buffer:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.process.poll() is not None:
                    self.stop()
                    pytest.fail(f"reactor-server did not report its port: {buffer!r}\n{self.stderr()}")
                if selector.select(timeout=remaining):
                    chunk = os.read(self.process.stdout.fileno(), 4096)
                    if not chunk:
                        continue
                    buffer += chunk
        match = LISTENING.search(buffer.decode(errors="replace"))
        if not match or match.group(1) != self.app.name:
            self.stop()
            pytest.fail(f"unexpected first line from {self.app.name}: {buffer!r}")
        return match.group(2), int(match.group(3))

    def stderr(self) -> str:
        return Path(self.log.name).read_text(errors="replace")

    def signal(self, signum: int) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signum)

    def wait(self, timeout: float) -> int:
        return self.process.wait(timeout=timeout)

    def stop(self) -> int | None:
        """SIGTERM, then wait; SIGKILL (this process only) if it does not exit in time."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=STOP_TIMEOUT)
        if self.process.stdout:
            self.process.stdout.close()
        self.log.close()
        return self.process.returncode

    # HTTP

    def request(self, method: str, path: str, body=None, headers: dict[str, str] | None = None,
                timeout: float = 10.0) -> "Reply":
        return request(self.host, self.port, method, path, body, headers, timeout)

    def create(self, type_name: str = "counter") -> dict:
        reply = self.request("POST", "/reactors", {"type": type_name})
        assert reply.status == 201, reply
        return reply.json()

    def metric(self, name: str) -> float:
        """The value of the unlabelled metric `name` (or its first series) in /metrics."""
        text = self.request("GET", "/metrics").body.decode()
        match = re.search(rf"^{name}(?:{{[^}}]*}})? ([0-9.e+-]+)$", text, flags=re.M)
        assert match, f"{name} not in /metrics:\n{text}"
        return float(match.group(1))

    def events(self, instance_id: str, headers: dict[str, str] | None = None, query: str = "") -> "EventStream":
        return EventStream(self.host, self.port, f"/reactors/{instance_id}/events{query}", headers or {})


@dataclass
class Reply:
    status: int
    headers: http.client.HTTPMessage
    body: bytes

    def json(self):
        return json.loads(self.body)

    def header(self, name: str) -> str | None:
        return self.headers.get(name)

    def __repr__(self) -> str:
        return f"Reply({self.status}, {dict(self.headers)!r}, {self.body[:500]!r})"


def request(host: str, port: int, method: str, path: str, body=None,
            headers: dict[str, str] | None = None, timeout: float = 10.0) -> Reply:
    headers = dict(headers or {})
    if body is not None and not isinstance(body, (bytes, str)):
        body = json.dumps(body)
        headers.setdefault("Content-Type", "application/json")
    if isinstance(body, str):
        body = body.encode()
    connection = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        return Reply(response.status, response.headers, response.read())
    finally:
        connection.close()


@dataclass
class Event:
    """One server-sent event (or comment) as a client sees it."""

    event: str = "message"
    data: str = ""
    id: str | None = None
    retry: int | None = None
    comment: str | None = None

    def json(self):
        return json.loads(self.data)


@dataclass
class EventStream:
    """Reads a text/event-stream on a background thread into a queue of `Event`s."""

    host: str
    port: int
    path: str
    headers: dict[str, str]
    timeout: float = 30.0
    status: int = 0
    response_headers: http.client.HTTPMessage | None = None
    events: "queue.Queue[Event | None]" = field(default_factory=queue.Queue)
    closed: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.connection = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        self.connection.request("GET", self.path, headers=self.headers)
        self.response = self.connection.getresponse()
        self.status = self.response.status
        self.response_headers = self.response.headers
        if self.status != 200:
            self.body = self.response.read()
            self.connection.close()
            self.closed.set()
            return
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        current = Event()
        has_fields = False
        try:
            while True:
                raw = self.response.readline()
                if not raw:
                    break
                line = raw.decode().rstrip("\r\n")
                if line == "":
                    if has_fields:
                        self.events.put(current)
                    current, has_fields = Event(), False
                    continue
                if line.startswith(":"):
                    self.events.put(Event(event="comment", comment=line[1:].strip()))
                    continue
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                has_fields = True
                if name == "event":
                    current.event = value
                elif name == "data":
                    current.data = value if not current.data else current.data + "\n" + value
                elif name == "id":
                    current.id = value
                elif name == "retry":
                    current.retry = int(value)
        except Exception:  # the connection was closed under the reader, or broke
            pass
        finally:
            self.closed.set()
            self.events.put(None)

    def next(self, timeout: float = 10.0, include_comments: bool = False) -> Event | None:
        """The next event; None once the stream has ended. Fails after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                pytest.fail(f"no event on {self.path} within {timeout}s")
            try:
                event = self.events.get(timeout=remaining)
            except queue.Empty:
                pytest.fail(f"no event on {self.path} within {timeout}s")
            if event is None:
                self.events.put(None)
                return None
            if event.event == "comment" and not include_comments:
                continue
            return event

    def states_until(self, predicate, timeout: float = 10.0) -> list[Event]:
        """Collects `state` events until one's state satisfies `predicate`."""
        deadline = time.monotonic() + timeout
        collected = []
        while True:
            event = self.next(timeout=max(0.0, deadline - time.monotonic()) or 0.001)
            assert event is not None, f"stream ended before the expected state; got {collected}"
            if event.event != "state":
                continue
            collected.append(event)
            if predicate(event.json()):
                return collected

    def close(self) -> None:
        try:
            if self.connection.sock is not None:
                self.connection.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.connection.close()


@pytest.fixture(scope="session", autouse=True)
def server_logs(tmp_path_factory):
    """Keeps the servers' logs and stores with this run's temporary files rather than loose in /tmp."""
    Server.log_directory = tmp_path_factory.mktemp("server-logs")
    Server.store_directory = tmp_path_factory.mktemp("stores")


@pytest.fixture(scope="session")
def server(server_logs):
    """One reactor-server for the whole run (counter delay 20 ms, search latency 20 ms)."""
    instance = Server()
    yield instance
    instance.stop()


@pytest.fixture
def start_server():
    """Starts extra servers with other flags; each is stopped when the test ends."""
    started: list[Server] = []

    def start(*args: str, env: dict[str, str] | None = None, store: str | None = None, preexec_fn=None,
              app: App = REACTOR_SERVER) -> Server:
        instance = Server(*args, env=env, store=store, preexec_fn=preexec_fn, app=app)
        started.append(instance)
        return instance

    yield start
    for instance in started:
        instance.stop()
