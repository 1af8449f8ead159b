"""`GET /reactors/{id}/events?format=patch`: each version as an RFC 6902 patch from the state of
the stream's previous event, applied here with an independent implementation (PyPI `jsonpatch`)
and compared, byte for byte after sorting keys, with the state the server serves."""

from __future__ import annotations

import json
import random
import socket
import time

import jsonpatch
import pytest

from conftest import Event, Server


@pytest.fixture(scope="module")
def server(server_logs):
    """A server of this module's own that keeps sessions in memory: these tests are about the
    stream, and large states written to a store on every version only slow them down."""
    instance = Server(store="memory")
    yield instance
    instance.stop()


def canonical(document) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def served(server: Server, instance_id: str) -> tuple[int, bytes]:
    """The instance's version and its state's bytes as `GET` serves them."""
    reply = server.request("GET", f"/reactors/{instance_id}")
    assert reply.status == 200, reply
    snapshot = reply.json()
    # The state's bytes exactly as sent: the snapshot's keys are sorted, and `state` is one.
    return snapshot["version"], canonical(snapshot["state"])


class Rebuilt:
    """A client's copy of the state, kept up to date from `state` and `patch` events."""

    def __init__(self) -> None:
        self.document = None
        self.version = -1
        self.kinds: list[str] = []
        self.patches: list[list[dict]] = []

    def apply(self, event: Event) -> None:
        if event.event not in ("state", "patch"):
            return
        version = int(event.id)
        assert version > self.version, f"version {version} after {self.version}"
        if event.event == "state":
            self.document = json.loads(event.data)
        else:
            # A patch is always from the version just before.
            assert version == self.version + 1, f"a patch to {version} after {self.version}"
            patch = json.loads(event.data)
            self.patches.append(patch)
            self.document = jsonpatch.apply_patch(self.document, patch)
        self.version = version
        self.kinds.append(event.event)

    def follow(self, stream, until_version: int, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while self.version < until_version:
            event = stream.next(timeout=max(0.01, deadline - time.monotonic()))
            assert event is not None, "the stream ended"
            self.apply(event)


def send(server: Server, instance_id: str, action, wait: bool = True) -> dict:
    reply = server.request("POST", f"/reactors/{instance_id}/actions" + ("?wait=true" if wait else ""), action)
    assert reply.status in (200, 202), reply
    return reply.json()


def todo_with_tasks(server: Server, count: int) -> tuple[str, list[str]]:
    instance_id = server.create("todo")["id"]
    for index in range(count):
        send(server, instance_id, {"add": {"title": f"task {index}"}})
    _, state = served(server, instance_id)
    return instance_id, [task["id"] for task in json.loads(state)["tasks"]]


def random_action(chooser: random.Random, ids: list[str]):
    kind = chooser.choice(["toggle", "toggle", "toggle", "edit", "add", "delete", "move"])
    if kind == "add" or not ids:
        return {"add": {"title": chooser.choice(["ünïcödé ✓", "a/b~c", "新しい", "plain"]) + str(chooser.random())}}
    if kind == "toggle":
        return {"toggle": {"id": chooser.choice(ids)}}
    if kind == "edit":
        return {"edit": {"id": chooser.choice(ids), "title": "edited \"quoted\" \\ " + str(chooser.random())}}
    if kind == "delete":
        return {"delete": {"id": chooser.choice(ids)}}
    return {"move": {"from": chooser.randrange(len(ids)), "to": chooser.randrange(len(ids))}}


def test_a_thousand_task_list_under_random_changes_rebuilds_every_version_from_patches(server):
    instance_id, ids = todo_with_tasks(server, 1000)
    stream = server.events(instance_id, query="?format=patch")
    copy = Rebuilt()
    version, _ = served(server, instance_id)
    copy.follow(stream, version)
    assert copy.kinds == ["state"]
    chooser = random.Random(7)
    for _ in range(150):
        send(server, instance_id, random_action(chooser, ids))
        version, state = served(server, instance_id)
        ids = [task["id"] for task in json.loads(state)["tasks"]]
        copy.follow(stream, version)
        # Every version came, and the copy is the served state, byte for byte.
        assert copy.version == version
        assert canonical(copy.document) == state
    stream.close()
    assert set(copy.kinds) == {"state", "patch"} and copy.kinds.count("state") == 1, copy.kinds[:10]
    # Tasks are matched by id: a toggle is one replace of one field, not a rewrite of the list.
    toggles = [patch for patch in copy.patches
               if len(patch) == 1 and patch[0]["op"] == "replace" and patch[0]["path"].endswith("/isDone")]
    assert toggles, copy.patches[:5]


def read_raw_events(sock: socket.socket, timeout: float) -> list[Event]:
    """Everything the server has sent on a raw socket until it has been quiet for a moment."""
    sock.settimeout(timeout)
    chunks = []
    while True:
        try:
            chunk = sock.recv(1 << 20)
        except socket.timeout:
            break
        if not chunk:
            break
        chunks.append(chunk)
    data = b"".join(chunks)
    body_start = data.index(b"\r\n\r\n") + 4
    # Undo the chunked transfer coding.
    pieces, position = [], body_start
    while position < len(data):
        line_end = data.index(b"\r\n", position)
        size = int(data[position:line_end], 16)
        if size == 0:
            break
        pieces.append(data[line_end + 2:line_end + 2 + size])
        position = line_end + 2 + size + 2
    events, current = [], Event()
    for line in b"".join(pieces).decode().split("\n"):
        if line == "":
            if current.data or current.event != "message":
                events.append(current)
            current = Event()
        elif line.startswith(":"):
            events.append(Event(event="comment", comment=line[1:].strip()))
        else:
            name, _, value = line.partition(": ")
            if name == "event":
                current.event = value
            elif name == "id":
                current.id = value
            elif name == "data":
                current.data = value
    return events


def test_a_slow_subscriber_is_conflated_to_a_state_then_patched_again(server):
    instance_id, ids = todo_with_tasks(server, 20)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # A small window, set before connecting: the server's writes back up after a few KB.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((server.host, server.port))
    sock.sendall(f"GET /reactors/{instance_id}/events?format=patch HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    try:
        # The client reads nothing while 90 versions of 100 KB patches each are published: the
        # kernel's buffers take about 4 MB, then the server's writes back up, and once it can
        # write again this subscriber is more than 32 versions behind: it is sent the latest
        # state rather than every version.
        for index in range(90):
            send(server, instance_id, {"edit": {"id": ids[0], "title": f"{index} " + "x" * 100_000}}, wait=False)
        send(server, instance_id, {"toggle": {"id": ids[0]}})
        version, state = served(server, instance_id)
        events = read_raw_events(sock, timeout=2.0)
    finally:
        sock.close()
    copy = Rebuilt()
    for event in events:
        copy.apply(event)
    assert copy.version == version
    assert canonical(copy.document) == state
    # Conflated: versions were skipped, with a full state after the gap, never a patch across it.
    assert copy.kinds.count("state") >= 2, copy.kinds
    assert any(event.event == "comment" and event.comment == "snapshot" for event in events)


def test_resuming_with_last_event_id_starts_from_a_whole_state(server):
    instance_id, ids = todo_with_tasks(server, 50)
    first = server.events(instance_id, query="?format=patch")
    copy = Rebuilt()
    for task in ids[:3]:
        send(server, instance_id, {"toggle": {"id": task}})
    version, _ = served(server, instance_id)
    copy.follow(first, version)
    first.close()
    assert copy.kinds == ["state", "patch", "patch", "patch"]

    for task in ids[3:6]:
        send(server, instance_id, {"toggle": {"id": task}})
    resumed = server.events(instance_id, headers={"Last-Event-ID": str(version)}, query="?format=patch")
    again = Rebuilt()
    latest, state = served(server, instance_id)
    again.follow(resumed, latest)
    resumed.close()
    # The missed versions, the first whole (there is no earlier state on this connection).
    assert again.kinds == ["state", "patch", "patch"]
    assert again.version == latest and canonical(again.document) == state


def test_pulse_fields_patch_with_their_counts(server):
    instance_id = server.create("counter")["id"]
    stream = server.events(instance_id, query="?format=patch")
    copy = Rebuilt()
    copy.follow(stream, 0)
    for _ in range(2):
        send(server, instance_id, '"increase"')
    version, state = served(server, instance_id)
    copy.follow(stream, version)
    stream.close()
    assert canonical(copy.document) == state
    # The same alert assigned again: only its count changes.
    assert [{"op": "replace", "path": "/alertMessage/count", "value": 2}] in copy.patches, copy.patches


def test_an_unknown_format_is_refused(server):
    instance_id = server.create("counter")["id"]
    reply = server.request("GET", f"/reactors/{instance_id}/events?format=xml")
    assert reply.status == 400 and reply.json()["type"].endswith("invalid-parameter"), reply
