"""Fixtures for the container tests: images that Tests/containers/run built with podman, run as
containers on the host's network, each serving on 127.0.0.1 on a free port.

The images are $REACTOR_SERVER_IMAGE (docker/Dockerfile) and $STARTER_IMAGE (the starter's
Dockerfile); $CONTAINER_TEST_RUN names this run: every container and volume a test makes is named
after it and labelled with it, and removed when the test ends (Tests/containers/run removes
whatever carries the label once more at the end, even when pytest itself was interrupted).
Nothing waits by sleeping: each wait polls a condition until a bounded deadline.

The HTTP and server-sent-event clients are the end-to-end tests' (Tests/python/conftest.py).
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

# Tests/python/conftest.py, loaded under a name of its own so that pytest does not take it for
# this directory's conftest: its request() and EventStream are reused as they are.
_spec = importlib.util.spec_from_file_location("reactor_http_clients", REPO_ROOT / "Tests/python/conftest.py")
http_clients = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = http_clients
_spec.loader.exec_module(http_clients)
EventStream = http_clients.EventStream
Reply = http_clients.Reply

RUN = os.environ.get("CONTAINER_TEST_RUN", f"ct-{os.getpid()}")
LABEL = f"reactor-server-container-test={RUN}"
REACTOR_SERVER_IMAGE = os.environ.get("REACTOR_SERVER_IMAGE", "localhost/reactor-server:container-test")
STARTER_IMAGE = os.environ.get("STARTER_IMAGE", "localhost/my-service:container-test")
#: Seconds a container has to start serving, and `podman` commands to return.
START_TIMEOUT = 60.0
PODMAN_TIMEOUT = 120.0
#: The stop timeout given to `podman stop` (the compose files' stop_grace_period is 20 s).
STOP_TIMEOUT = 20

_names = itertools.count(1)


class Timeout(AssertionError):
    pass


def wait_until(condition, timeout: float, what: str, alive=lambda: True, interval: float = 0.05):
    """Polls `condition` until it holds; fails after `timeout` seconds, or at once when `alive`
    says what it waits for has gone."""
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return
        if not alive():
            raise Timeout(f"{what}: the container is no longer running")
        if time.monotonic() >= deadline:
            raise Timeout(f"{what}: not within {timeout}s")
        time.sleep(interval)


def podman(*args: str, check: bool = True, timeout: float = PODMAN_TIMEOUT, input: str | None = None) -> subprocess.CompletedProcess:
    result = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout, input=input)
    if check and result.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


def free_port() -> int:
    """A port free on 127.0.0.1 now (the container binds it a moment later)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def container_state(name: str) -> dict:
    """`podman inspect`'s State of container `name`; empty when there is no such container."""
    result = podman("inspect", "--type", "container", "--format", "{{json .State}}", name, check=False)
    return json.loads(result.stdout) if result.returncode == 0 else {}


def unique(kind: str) -> str:
    return f"{RUN}-{kind}{next(_names)}"


@dataclass(frozen=True)
class Image:
    """An image under test: its tag, its binary's name, and the counter each serves (created
    with `create`, whose "increase" adds `step`)."""

    tag: str
    binary: str
    env: tuple[str, ...]
    create: dict
    step: int


#: docker/Dockerfile's image: reactor-server's counter changes 20 ms after each action.
REACTOR_SERVER = Image(REACTOR_SERVER_IMAGE, "reactor-server", ("COUNTER_DELAY_MS=20",),
                       {"type": "counter", "parameters": {"step": 2}}, 2)
#: The starter's image: its own counter, created with a step.
STARTER = Image(STARTER_IMAGE, "my-service", (), {"type": "counter", "parameters": {"step": 3}}, 3)

#: What a hardened deployment adds: a read-only root with a tmpfs on /tmp (the address file's
#: place), no capabilities at all, no privilege gained through exec.
HARDENED = ("--read-only", "--tmpfs", "/tmp:rw,size=16m,mode=1777", "--cap-drop", "ALL",
            "--security-opt", "no-new-privileges")


class Container:
    """One container this run started from an image under test, on the host's network and
    serving on 127.0.0.1:`port`."""

    def __init__(self, image: Image, *args: str, volume: str | None = None, options: tuple[str, ...] = (),
                 env: tuple[str, ...] = (), name: str | None = None, port: int | None = None) -> None:
        self.image = image
        self.name = name or unique("c")
        self.port = port or free_port()
        command = ["run", "--detach", "--name", self.name, "--label", LABEL, "--network", "host",
                   "--env", "HOST=127.0.0.1", "--env", f"PORT={self.port}"]
        for assignment in (*image.env, *env):
            command += ["--env", assignment]
        if volume is not None:
            command += ["--volume", f"{volume}:/data"]
        podman(*command, *options, image.tag, *args)
        self.wait_serving()

    # The container

    def state(self) -> dict:
        return container_state(self.name)

    def running(self) -> bool:
        return bool(self.state().get("Running"))

    def exit_code(self) -> int:
        return int(self.state()["ExitCode"])

    def serves(self) -> bool:
        """Whether /healthz answers 200 now."""
        try:
            return self.request("GET", "/healthz", timeout=2).status == 200
        except OSError:
            return False

    def wait_serving(self, timeout: float = START_TIMEOUT) -> None:
        try:
            wait_until(self.serves, timeout, f"{self.name} serving on port {self.port}", alive=self.running, interval=0.1)
        except Timeout as error:
            raise Timeout(f"{error}\n{self.logs()}") from None

    def wait_exited(self, timeout: float) -> int:
        wait_until(lambda: not self.running(), timeout, f"{self.name} exiting", interval=0.1)
        return self.exit_code()

    def logs(self) -> str:
        result = podman("logs", self.name, check=False)
        return result.stdout + result.stderr

    def exec(self, *command: str, check: bool = False) -> subprocess.CompletedProcess:
        return podman("exec", self.name, *command, check=check)

    def stop(self, timeout: int = STOP_TIMEOUT) -> float:
        """`podman stop` (the image's STOPSIGNAL, SIGKILL after `timeout` seconds): the seconds it took."""
        started = time.monotonic()
        podman("stop", "--time", str(timeout), self.name, timeout=timeout + 30)
        return time.monotonic() - started

    def remove(self) -> None:
        # --volumes: the image's VOLUME /data is an anonymous volume when no named one is given.
        podman("rm", "--force", "--volumes", "--time", "0", self.name, check=False)

    # HTTP

    def request(self, method: str, path: str, body=None, headers: dict[str, str] | None = None,
                timeout: float = 10.0) -> Reply:
        return http_clients.request("127.0.0.1", self.port, method, path, body, headers, timeout)

    def events(self, instance_id: str, headers: dict[str, str] | None = None) -> EventStream:
        return EventStream("127.0.0.1", self.port, f"/reactors/{instance_id}/events", headers or {})

    def create(self) -> str:
        reply = self.request("POST", "/reactors", self.image.create)
        assert reply.status == 201, reply
        return reply.json()["id"]

    def act(self, instance_id: str) -> dict:
        """Sends "increase" and waits for its state: {id, type, version, state}."""
        reply = self.request("POST", f"/reactors/{instance_id}/actions?wait=true", '"increase"')
        assert reply.status == 200, reply
        return reply.json()

    def session(self, instance_id: str) -> dict:
        reply = self.request("GET", f"/reactors/{instance_id}")
        assert reply.status == 200, reply
        return reply.json()


class Published(Container):
    """A container that something else started (podman-compose), reached on the port it
    publishes on 127.0.0.1."""

    def __init__(self, name: str, port: int, image: Image = REACTOR_SERVER) -> None:  # noqa: super().__init__ starts a container
        self.image, self.name, self.port = image, name, port


class Containers:
    """Starts containers and makes named volumes; removes both when the test ends."""

    def __init__(self) -> None:
        self.started: list[Container] = []
        self.volumes: list[str] = []
        self.names: list[str] = []

    def run(self, image: Image, *args: str, **options) -> Container:
        name = options.pop("name", None) or unique("c")
        self.names.append(name)  # removed even if it never served
        container = Container(image, *args, name=name, **options)
        self.started.append(container)
        return container

    def volume(self) -> str:
        name = unique("v")
        podman("volume", "create", "--label", LABEL, name)
        self.volumes.append(name)
        return name

    def cleanup(self) -> None:
        for name in reversed(self.names):
            podman("rm", "--force", "--volumes", "--time", "0", name, check=False)
        for volume in self.volumes:
            podman("volume", "rm", "--force", volume, check=False)


@pytest.fixture
def containers():
    made = Containers()
    try:
        yield made
    finally:
        made.cleanup()


def first_state(stream: EventStream) -> http_clients.Event:
    """The first state event of a stream (after the reconnection hint that opens it)."""
    while True:
        event = stream.next(timeout=10)
        assert event is not None, "the stream ended before its first state"
        if event.event == "state":
            return event
