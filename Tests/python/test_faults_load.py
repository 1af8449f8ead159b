"""Load faults: slowloris, many idle connections, event-stream churn, overload, loss under
reconnects, and SIGTERM with thousands of open streams.

Every test starts its own server on 127.0.0.1, is bounded in count and time, and ends only the
processes it started (by PID, through the conftest fixtures). Sizes default to what a 2-core
machine runs in seconds; the environment scales them up to the full figures (see
Tests/faults/README.md):

    FAULTS_SLOWLORIS=2000 FAULTS_SLOWLORIS_SECONDS=30 FAULTS_IDLE=10000 \
    FAULTS_CHURN_RATE=2000 FAULTS_CHURN_SECONDS=30 FAULTS_CLIENTS=64 FAULTS_ACTIONS=1000 \
        .venv/bin/python -m pytest -s Tests/python/test_faults_load.py

Timing figures are printed (run with -s); only the limits the service promises are asserted:
answers keep coming, RSS back within 10% of its starting level, no file descriptor leak,
exit 0 within 2 s of SIGTERM.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import resource
import selectors
import signal
import socket
import statistics
import threading
import time

import pytest

from conftest import Server
from faults_support import fd_count, rss_kib, wait_for

HOST = "127.0.0.1"


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def raise_fd_limit(wanted: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        pytest.skip(f"needs {wanted} open files, the hard limit allows {soft}")


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


class Probe(threading.Thread):
    """Another client: GETs an instance and sends it actions on one keep-alive connection until
    stopped, timing each request."""

    def __init__(self, server: Server, instance_id: str) -> None:
        super().__init__(daemon=True)
        self.server, self.instance_id = server, instance_id
        self.latencies: list[float] = []
        self.errors: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        connection = http.client.HTTPConnection(HOST, self.server.port, timeout=10)
        toggle = False
        while not self.stop.is_set():
            toggle = not toggle
            started = time.perf_counter()
            try:
                if toggle:
                    connection.request("GET", f"/reactors/{self.instance_id}")
                else:
                    connection.request("POST", f"/reactors/{self.instance_id}/actions", body=b'"increase"',
                                       headers={"Content-Type": "application/json"})
                response = connection.getresponse()
                response.read()
                if response.status not in (200, 202):
                    self.errors.append(f"status {response.status}")
            except (OSError, http.client.HTTPException) as error:
                self.errors.append(repr(error))
                connection.close()
                connection = http.client.HTTPConnection(HOST, self.server.port, timeout=10)
                continue
            self.latencies.append(time.perf_counter() - started)
        connection.close()

    def finish(self) -> dict:
        self.stop.set()
        self.join(timeout=15)
        return {"requests": len(self.latencies), "errors": len(self.errors),
                "p50_ms": round(percentile(self.latencies, 0.50) * 1000, 2),
                "p99_ms": round(percentile(self.latencies, 0.99) * 1000, 2),
                "max_ms": round(max(self.latencies, default=0) * 1000, 2)}


class Baseline:
    """The server's RSS and descriptor count after a warm-up, and the checks that it returns there."""

    def __init__(self, server: Server) -> None:
        self.server = server
        # An existing session, with its history of states already full: the other client
        # (the probe) talks to it while the tests attack the server. Enough actions, too, for the
        # store's journal to pass its window (8,192 rows, a row or two per action here) and be
        # folded: from then on the store's page cache holds the pages it keeps working on. Sent by
        # 8 clients on a connection each, so that the store commits them in groups (one after
        # another, each waiting for its own commit, they took about 10 s).
        self.instance = instance = server.create("counter")["id"]

        def send_actions(count: int) -> None:
            connection = http.client.HTTPConnection(HOST, server.port, timeout=10)
            try:
                for _ in range(count):
                    connection.request("POST", f"/reactors/{instance}/actions", body=b'"increase"',
                                       headers={"Content-Type": "application/json"})
                    response = connection.getresponse()
                    response.read()
                    assert response.status == 202, response.status
            finally:
                connection.close()
        senders = [threading.Thread(target=send_actions, args=(1050,)) for _ in range(8)]
        for sender in senders:
            sender.start()
        for sender in senders:
            sender.join(timeout=60)
        wait_for(lambda: server.request("GET", f"/reactors/{instance}").json()["state"]["value"] == 8400, 10,
                 "the warm-up's 8,400 actions to be applied")
        # Streams opened and closed from several threads at once, as the tests below do: the
        # first concurrent connections grow the allocator's per-thread arenas once, and that is
        # working memory, not something the tests should count as not returned.
        def cycle_streams() -> None:
            for _ in range(50):
                stream = server.events(instance)
                stream.next()
                stream.close()
        threads = [threading.Thread(target=cycle_streams) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        wait_for(lambda: server.metric("reactor_event_streams") == 0, 10, "warm-up streams to close")
        self.pid = server.process.pid
        self.fds = fd_count(self.pid)
        # Freed heap goes back to the system every 2 s; the lowest reading over 3 s is the level
        # the server settles at.
        readings = []
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            readings.append(rss_kib(self.pid))
            time.sleep(0.25)
        self.rss = min(readings)

    def settle(self, label: str) -> dict:
        """Waits (bounded) for descriptors to return to the baseline and RSS to come within 10%."""
        fds = wait_for(lambda: (lambda n: n if n <= self.fds else 0)(fd_count(self.pid)), 20,
                       f"{label}: descriptors back to {self.fds} (now {fd_count(self.pid)})")
        # The server looks for freed heap to return every 2 s, and up to 20 s apart after a costly
        # look (MemoryTrim.longestPeriod): the bound covers the longest spacing.
        try:
            rss = wait_for(lambda: (lambda r: r if r <= self.rss * 1.10 else 0)(rss_kib(self.pid)), 25,
                           f"{label}: RSS back within 10%")
        except AssertionError:
            rss = rss_kib(self.pid)
        figures = {"fds_before": self.fds, "fds_after": fds, "rss_before_kib": self.rss, "rss_after_kib": rss}
        assert rss <= self.rss * 1.10, f"{label}: RSS {self.rss} KiB before, {rss} KiB after: {figures}"
        return figures


def report(label: str, **figures) -> None:
    print(f"\n[faults] {label}: " + json.dumps(figures, sort_keys=True))


# --------------------------------------------------------------------------------------------


def test_slowloris_does_not_starve_other_clients(start_server):
    count = env_int("FAULTS_SLOWLORIS", 300)
    seconds = env_int("FAULTS_SLOWLORIS_SECONDS", 6)
    raise_fd_limit(count + 256)
    server = start_server("--heartbeat-s", "1", "--max-connections", str(count + 200), "--connection-timeout-s", "5",
                          "--counter-delay-ms", "0")
    baseline = Baseline(server)
    probe = Probe(server, baseline.instance)
    sockets = []
    for index in range(count):
        sock = socket.create_connection((HOST, server.port), timeout=10)
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        sockets.append(sock)
    probe.start()
    # One header byte per connection per second (each within the 5 s inactivity timeout), spread
    # over the second, for `seconds`.
    started = time.monotonic()
    sent = 0
    closed_by_server = 0
    while time.monotonic() - started < seconds:
        tick = time.monotonic()
        for index, sock in enumerate(sockets):
            if sock is None:
                continue
            try:
                sock.sendall(b"a")
                sent += 1
            except OSError:
                closed_by_server += 1
                sock.close()
                sockets[index] = None
        time.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
    figures = probe.finish()
    for sock in sockets:
        if sock is not None:
            sock.close()
    assert server.process.poll() is None
    settled = baseline.settle("slowloris")
    report("slowloris", connections=count, seconds=seconds, bytes_trickled=sent,
           closed_by_server=closed_by_server, probe=figures, **settled)
    assert figures["errors"] == 0 and figures["requests"] > 0, figures


def test_ten_thousand_idle_connections(start_server):
    count = env_int("FAULTS_IDLE", 10_000)
    raise_fd_limit(count + 512)
    server = start_server("--heartbeat-s", "1", "--max-connections", str(count + 200), "--counter-delay-ms", "0")
    baseline = Baseline(server)
    probe = Probe(server, baseline.instance)
    sockets = []
    opened = time.perf_counter()
    for _ in range(count):
        sockets.append(socket.create_connection((HOST, server.port), timeout=10))
    # The warm-up's last connections may still be closing while these open: allow for a few.
    wait_for(lambda: fd_count(server.process.pid) >= baseline.fds + count - 4, 30,
             f"the server to accept {count} connections (holds {fd_count(server.process.pid)} descriptors)")
    opened = time.perf_counter() - opened
    rss_held = rss_kib(server.process.pid)
    probe.start()
    wait_for(lambda: len(probe.latencies) >= 2000 or probe.errors, 60, "2,000 probe requests")
    figures = probe.finish()
    for sock in sockets:
        sock.close()
    assert server.process.poll() is None
    settled = baseline.settle("idle connections")
    report("idle connections", connections=count, open_seconds=round(opened, 2), rss_held_kib=rss_held,
           probe=figures, **settled)
    assert figures["errors"] == 0, probe.errors[:5]


def test_idle_connections_are_closed_after_the_connection_timeout(start_server):
    server = start_server("--connection-timeout-s", "1")
    sockets = [socket.create_connection((HOST, server.port), timeout=10) for _ in range(50)]
    started = time.monotonic()
    for sock in sockets:
        sock.settimeout(10)
        assert sock.recv(1) == b""  # the server closed it
        sock.close()
    report("connection timeout", connections=50, closed_after_s=round(time.monotonic() - started, 2))


def test_event_stream_churn(start_server):
    rate = env_int("FAULTS_CHURN_RATE", 2000)
    seconds = env_int("FAULTS_CHURN_SECONDS", 5)
    workers = 4
    raise_fd_limit(4096)
    server = start_server("--heartbeat-s", "1", "--counter-delay-ms", "0")
    baseline = Baseline(server)
    instances = [server.create("counter")["id"] for _ in range(8)]
    probe = Probe(server, baseline.instance)
    probe.start()
    cycles = [0] * workers
    failures: list[str] = []
    deadline = time.monotonic() + seconds

    def churn(worker: int) -> None:
        interval = workers / rate
        next_start = time.monotonic()
        rng = random.Random(worker)
        while time.monotonic() < deadline:
            instance = instances[rng.randrange(len(instances))]
            try:
                sock = socket.create_connection((HOST, server.port), timeout=10)
                sock.sendall(f"GET /reactors/{instance}/events HTTP/1.1\r\nHost: x\r\n\r\n".encode())
                received = b""
                while b"event: state" not in received or not received.endswith(b"\n\n\r\n"):
                    chunk = sock.recv(65536)
                    if not chunk:
                        raise OSError(f"closed before the first state: {received[:200]!r}")
                    received += chunk
                if rng.random() < 0.5:  # half abort with a reset, half close politely
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                sock.close()
                cycles[worker] += 1
            except OSError as error:
                failures.append(repr(error))
            next_start += interval
            pause = next_start - time.monotonic()
            if pause > 0:
                time.sleep(pause)

    threads = [threading.Thread(target=churn, args=(index,), daemon=True) for index in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=seconds + 30)
    figures = probe.finish()
    assert server.process.poll() is None
    wait_for(lambda: server.metric("reactor_event_streams") == 0, 20, "every churned stream to close")
    settled = baseline.settle("stream churn")
    total = sum(cycles)
    report("stream churn", target_rate=rate, seconds=seconds, cycles=total,
           achieved_rate=round(total / seconds), failures=len(failures), probe=figures, **settled)
    assert not failures, failures[:5]
    assert figures["errors"] == 0, probe.errors[:5]


def test_overload_answers_429_and_503_with_retry_after(start_server):
    server = start_server("--heartbeat-s", "1", "--max-instances", "4", "--max-streams", "4", "--max-streams-per-instance", "2",
                          "--counter-delay-ms", "0")
    ids = [server.create("counter")["id"] for _ in range(4)]
    refused = server.request("POST", "/reactors", {"type": "counter"})
    assert refused.status == 429 and refused.header("Retry-After"), refused
    assert refused.header("Content-Type").startswith("application/problem+json")

    streams = [server.events(ids[0]), server.events(ids[0])]
    assert all(stream.status == 200 for stream in streams)
    for stream in streams:
        stream.next()
    third = server.events(ids[0])
    assert third.status == 429 and third.response_headers["Retry-After"], third.body
    streams += [server.events(ids[1]), server.events(ids[1])]
    for stream in streams[2:]:
        assert stream.status == 200
        stream.next()
    over_server = server.events(ids[2])
    assert over_server.status == 503 and over_server.response_headers["Retry-After"], over_server.body
    assert json.loads(over_server.body)["type"].endswith("too-many-streams")

    # Existing sessions are unaffected: actions are accepted and every open stream sees them.
    for instance_id in ids[:2]:
        assert server.request("POST", f"/reactors/{instance_id}/actions", '"increase"',
                              headers={"Content-Type": "application/json"}).status == 202
    for stream in streams:
        stream.states_until(lambda state: state["value"] == 1)
    assert server.request("GET", f"/reactors/{ids[3]}").status == 200

    # Capacity freed is capacity regained.
    streams[0].close()
    wait_for(lambda: server.events(ids[2]).status == 200, 10, "a stream slot to free up")
    assert server.request("DELETE", f"/reactors/{ids[3]}").status == 204
    assert server.request("POST", "/reactors", {"type": "counter"}).status == 201
    for stream in streams:
        stream.close()


class ResumingSubscriber(threading.Thread):
    """Reads an instance's stream, reconnecting at random with Last-Event-ID; records every
    state version it sees and whether it followed a reconnect."""

    def __init__(self, server: Server, instance_id: str, seed: int, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.server, self.instance_id, self.stop_flag = server, instance_id, stop
        self.rng = random.Random(seed)
        self.seen: list[tuple[int, bool, bool]] = []  # (version, first after (re)connect, marked snapshot)
        self.reconnects = 0
        self.errors: list[str] = []
        self.last: int | None = None

    def run(self) -> None:
        while not self.stop_flag.is_set():
            headers = {} if self.last is None else {"Last-Event-ID": str(self.last)}
            connection = http.client.HTTPConnection(HOST, self.server.port, timeout=10)
            try:
                connection.request("GET", f"/reactors/{self.instance_id}/events", headers=headers)
                response = connection.getresponse()
                if response.status != 200:
                    self.errors.append(f"status {response.status}")
                    return
                budget = self.rng.randrange(5, 400)
                first, marked, event, version = True, False, None, None
                while budget > 0 and not self.stop_flag.is_set():
                    line = response.readline()
                    if not line:
                        break
                    line = line.rstrip(b"\r\n")
                    if line == b"":
                        if event == b"state" and version is not None:
                            self.seen.append((version, first, marked))
                            self.last = version
                            first, marked = False, False
                            budget -= 1
                        event, version = None, None
                    elif line.startswith(b": snapshot"):
                        marked = True
                    elif line.startswith(b"id: "):
                        version = int(line[4:])
                    elif line.startswith(b"event: "):
                        event = line[7:]
            except (OSError, http.client.HTTPException) as error:
                if not self.stop_flag.is_set():
                    self.errors.append(repr(error))
            finally:
                connection.close()
            self.reconnects += 1


def test_no_loss_with_reconnecting_subscribers(start_server):
    clients = env_int("FAULTS_CLIENTS", 64)
    actions = env_int("FAULTS_ACTIONS", 150)
    per_instance = 8
    server = start_server("--counter-delay-ms", "0", "--history-size", "256")
    instances = [server.create("counter")["id"] for _ in range(max(1, clients // per_instance))]
    stop_subscribers = threading.Event()
    subscribers = [ResumingSubscriber(server, instance, seed, stop_subscribers)
                   for seed, instance in enumerate(instances * 2)]
    for subscriber in subscribers:
        subscriber.start()
    accepted: dict[str, list[int]] = {instance: [] for instance in instances}
    lock = threading.Lock()
    failures: list[str] = []

    def client(index: int) -> None:
        instance = instances[index % len(instances)]
        connection = http.client.HTTPConnection(HOST, server.port, timeout=30)
        sequences = []
        for _ in range(actions):
            try:
                connection.request("POST", f"/reactors/{instance}/actions", body=b'"increase"',
                                   headers={"Content-Type": "application/json"})
                response = connection.getresponse()
                body = response.read()
            except (OSError, http.client.HTTPException) as error:
                failures.append(repr(error))  # not 202'd: not promised
                connection.close()
                connection = http.client.HTTPConnection(HOST, server.port, timeout=30)
                continue
            if response.status == 202:
                sequences.append(json.loads(body)["seq"])
            else:
                failures.append(f"status {response.status}")
        connection.close()
        with lock:
            accepted[instance].extend(sequences)

    started = time.monotonic()
    threads = [threading.Thread(target=client, args=(index,), daemon=True) for index in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    elapsed = time.monotonic() - started
    final = {}
    for instance in instances:
        # A 202 means queued: the reactor threads may still be applying the last actions, so read
        # once the instance reached the version its accepted actions add up to (never past it:
        # the assertions below check that).
        def settled(instance=instance):
            snapshot = server.request("GET", f"/reactors/{instance}").json()
            return snapshot if snapshot["version"] >= 4 * len(accepted[instance]) else None
        final[instance] = wait_for(settled, 10, f"{instance} to apply its accepted actions")
    # Each subscriber eventually reaches its instance's final version.
    for subscriber in subscribers:
        target = final[subscriber.instance_id]["version"]
        wait_for(lambda: subscriber.last is not None and subscriber.last >= target or subscriber.errors, 30,
                 f"a subscriber to reach version {target}")
    stop_subscribers.set()
    for subscriber in subscribers:
        subscriber.join(timeout=15)

    total_accepted = sum(len(sequences) for sequences in accepted.values())
    for instance, sequences in accepted.items():
        state = final[instance]
        # Exactly once: each 202 has its own sequence number, and the counter moved once per 202.
        assert len(set(sequences)) == len(sequences), f"{instance}: duplicate sequence numbers"
        assert state["state"]["value"] == len(sequences), (instance, state, len(sequences))
        # Each increase publishes four states (loading, value, not loading, alert).
        assert state["version"] == 4 * len(sequences), (instance, state["version"], len(sequences))

    jumps = unmarked = replayed = 0
    for subscriber in subscribers:
        assert not subscriber.errors, subscriber.errors[:3]
        previous = None
        for version, first, marked in subscriber.seen:
            if previous is not None:
                assert version > previous, f"versions went back: {previous} -> {version}"
                if version != previous + 1:
                    jumps += 1
                    if not marked:
                        unmarked += 1
                elif first:
                    replayed += 1
            previous = version
    report("no loss", clients=clients, actions_per_client=actions, accepted=total_accepted,
           not_accepted=len(failures), seconds=round(elapsed, 1),
           actions_per_second=round(total_accepted / elapsed), subscribers=len(subscribers),
           reconnects=sum(s.reconnects for s in subscribers), resumed_gap_free=replayed,
           jumps=jumps, unmarked_jumps=unmarked)
    assert total_accepted == clients * actions, failures[:5]
    assert unmarked == 0, f"{unmarked} of {jumps} version jumps were not marked as snapshots"


def test_sigterm_with_open_streams_and_load(start_server):
    """SIGTERM with 2,000 open streams, 20 deferred actions in flight and a stream of new
    requests: exit 0 within 2 s, every stream ends with `event: end` and the chunked terminator,
    every deferred action (certainly accepted: its first state was published) is answered, and
    no response is cut short. A plain request on a connection opened just before the signal can
    be reset with no answer; from the client's side it cannot be told whether the server had
    accepted it, so those are counted and printed, not asserted."""
    streams_wanted = env_int("FAULTS_SIGTERM_STREAMS", 2000)
    raise_fd_limit(streams_wanted + 1024)
    server = start_server("--max-connections", str(streams_wanted + 500), "--counter-delay-ms", "300")
    instances = [server.create("counter")["id"] for _ in range(20)]

    # Open the streams and read each one's first state.
    selector = selectors.DefaultSelector()
    buffers: dict[socket.socket, bytearray] = {}
    for index in range(streams_wanted):
        sock = socket.create_connection((HOST, server.port), timeout=10)
        sock.sendall(f"GET /reactors/{instances[index % 20]}/events HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        sock.setblocking(False)
        buffers[sock] = bytearray()
        selector.register(sock, selectors.EVENT_READ)
    ended: set[socket.socket] = set()

    def pump(until, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not until() and time.monotonic() < deadline:
            for key, _ in selector.select(timeout=0.1):
                sock = key.fileobj
                try:
                    chunk = sock.recv(65536)
                except BlockingIOError:
                    continue
                except OSError:
                    chunk = b""
                if chunk:
                    buffers[sock] += chunk
                else:
                    selector.unregister(sock)
                    ended.add(sock)

    pump(lambda: all(b"event: state" in buffer for buffer in buffers.values()), 60)
    assert all(b"event: state" in buffer for buffer in buffers.values()), "not every stream opened"

    # Deferred requests the server has certainly accepted: wait=true actions whose first state
    # (loading) every observer has seen; they settle only after the 300 ms counter delay.
    waiting_instance = instances[0]
    waiting_results: list[int | str] = []

    def waiting_action() -> None:
        try:
            reply = server.request("POST", f"/reactors/{waiting_instance}/actions?wait=true", '"increase"',
                                   headers={"Content-Type": "application/json"}, timeout=10)
            waiting_results.append(reply.status)
        except (OSError, http.client.HTTPException) as error:
            waiting_results.append(repr(error))

    waiting = [threading.Thread(target=waiting_action, daemon=True) for _ in range(20)]
    for thread in waiting:
        thread.start()
    wait_for(lambda: server.request("GET", f"/reactors/{waiting_instance}").json()["version"] >= 20, 10,
             "the deferred actions to be accepted")

    # Background load of plain actions, each on a fresh connection.
    outcomes: list[tuple[float, str]] = []
    stop_load = threading.Event()

    def load(worker: int) -> None:
        while not stop_load.is_set():
            sent_at = time.monotonic()
            try:
                with socket.create_connection((HOST, server.port), timeout=10) as sock:
                    body = b'"increase"'
                    sock.sendall(f"POST /reactors/{instances[1 + worker]}/actions HTTP/1.1\r\nHost: x\r\n"
                                 f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                                 "Connection: close\r\n\r\n".encode() + body)
                    data = b""
                    while True:
                        try:
                            chunk = sock.recv(4096)
                        except ConnectionResetError:
                            break
                        if not chunk:
                            break
                        data += chunk
                if not data:
                    # Reset with no byte of an answer: the connection was still in the listen
                    # backlog (never accepted by the server) or accepted but unread when the
                    # server stopped; from outside the two look the same (see the docstring).
                    outcomes.append((sent_at, "reset"))
                elif b"\r\n\r\n" in data and data.split(b" ")[1] in (b"202", b"503"):
                    outcomes.append((sent_at, "answered"))
                else:
                    outcomes.append((sent_at, f"truncated {data[:80]!r}"))
            except ConnectionRefusedError:
                outcomes.append((sent_at, "refused"))
                return
            except OSError as error:
                outcomes.append((sent_at, f"error {error!r}"))
                return

    loaders = [threading.Thread(target=load, args=(index,), daemon=True) for index in range(4)]
    for thread in loaders:
        thread.start()
    wait_for(lambda: len(outcomes) >= 200, 30, "load to get going")

    signalled = time.monotonic()
    server.signal(signal.SIGTERM)
    code = server.process.wait(timeout=15)
    exit_seconds = time.monotonic() - signalled
    stop_load.set()
    pump(lambda: len(ended) == len(buffers), 10)
    for thread in loaders + waiting:
        thread.join(timeout=15)

    complete = sum(1 for buffer in buffers.values()
                   if b"event: end" in buffer and buffer.endswith(b"0\r\n\r\n"))
    before_signal = [kind for sent_at, kind in outcomes if sent_at < signalled]
    resets_ms = sorted(round((sent_at - signalled) * 1000, 1) for sent_at, kind in outcomes if kind == "reset")
    report("sigterm", streams=len(buffers), streams_ended_cleanly=complete, exit_code=code, resets_sent_at_ms=resets_ms,
           exit_seconds=round(exit_seconds, 3), load_requests=len(outcomes),
           load_outcomes={kind: sum(1 for _, k in outcomes if k == kind) for kind in {k for _, k in outcomes}},
           deferred=waiting_results)
    assert code == 0
    assert exit_seconds < 2.0, f"exit took {exit_seconds:.2f}s"
    incomplete = [buffer[-300:] for buffer in buffers.values()
                  if not (b"event: end" in buffer and buffer.endswith(b"0\r\n\r\n"))]
    assert complete == len(buffers), f"{len(buffers) - complete} streams ended without their final bytes: {incomplete[:3]!r}"
    assert all(result in (200, 202) for result in waiting_results), waiting_results
    assert not [kind for kind in before_signal if kind.startswith(("truncated", "error"))], before_signal[-5:]
    assert before_signal.count("answered") > 0
    assert not [kind for _, kind in outcomes if kind.startswith("truncated")]
    for sock in buffers:
        sock.close()
