"""One live owner per session across nodes sharing PostgreSQL (Tests/python/cluster.py): the
lease and its fencing epoch, kill -9 of a node under load, SIGTERM's hand-off with resumed event
streams, and the room's messages crossing nodes. CLUSTER_FULL=1 (make cluster-test) runs the
loads longer and adds a rolling restart of every node under load."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from cluster import FULL, Cluster, child_pids, scaled, store_mode_from_environment, wait_until

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(store_mode_from_environment() != "postgres",
                       reason="ownership needs the shared PostgreSQL store (CLUSTER_STORE=postgres)"),
]

LEASE_S = 2
PROBLEM = "urn:reactor-server:problem:"


@pytest.fixture
def cluster(tmp_path, server_logs):
    """A cluster of its own for each test (they kill and stop nodes): PostgreSQL, three nodes
    with a 2 s lease and a 20 ms counter delay, nginx."""
    with Cluster(tmp_path, nodes=3, lease_s=LEASE_S) as instance:
        yield instance
        print(instance.logs())


def owner(cluster: Cluster, instance_id: str) -> str:
    """The node id the database names as the session's owner ('' when none holds it)."""
    return cluster.psql(f"SELECT coalesce(owner, '') FROM reactor_sessions WHERE id = '{instance_id}'")


def node_index(cluster: Cluster, node_id: str) -> int:
    return cluster.node_ids.index(node_id)


def value(cluster: Cluster, instance_id: str) -> dict:
    reply = cluster.request("GET", f"/reactors/{instance_id}")
    assert reply.status == 200, reply
    return reply.json()


def next_event(stream):
    """The stream's next event, past the `retry:` hint that opens it."""
    event = stream.next()
    while event is not None and event.retry is not None and not event.data:
        event = stream.next()
    return event


def is_problem(reply, kind: str) -> bool:
    return (reply.status == 503 and reply.header("Content-Type") == "application/problem+json"
            and reply.json()["type"] == PROBLEM + kind)


def routed_owner(cluster: Cluster, instance_id: str) -> str:
    """Reads the instance through the proxy (which claims it for the node its id routes to, if
    no node holds it) and returns the node the database names as its owner."""
    wait_until(lambda: cluster.request("GET", f"/reactors/{instance_id}").status == 200, 10,
               "the instance served through the proxy")
    return owner(cluster, instance_id)


def test_a_new_session_is_claimed_by_the_node_its_id_routes_to(cluster):
    instance_id = cluster.create()["id"]
    # Stored unclaimed: whichever node created it, the first request claims it.
    assert owner(cluster, instance_id) == ""
    assert cluster.request("GET", f"/reactors/{instance_id}").status == 200
    passages = cluster.wait_for_passages(1, f"/reactors/{instance_id}", "GET")
    routed_to = cluster.node_ids[cluster.node_index(passages[0].upstreams[-1])]
    assert owner(cluster, instance_id) == routed_to


def test_a_session_follows_the_requests_to_the_node_they_reach(cluster):
    instance_id = cluster.create()["id"]
    held_by = routed_owner(cluster, instance_id)
    other = next(index for index, node_id in enumerate(cluster.node_ids) if node_id != held_by)
    # Asked by the node the request reached, the owner hands the session over; the request
    # waits for it rather than failing.
    reply = cluster.node(other).request("GET", f"/reactors/{instance_id}")
    assert reply.status == 200, reply
    assert owner(cluster, instance_id) == cluster.node_ids[other]
    # And back, as the proxy routes the id to its node.
    assert cluster.request("GET", f"/reactors/{instance_id}").status == 200
    assert owner(cluster, instance_id) == held_by
    assert value(cluster, instance_id)["version"] == 0


def test_a_node_whose_session_was_claimed_elsewhere_writes_nothing_and_its_streams_move(cluster):
    instance_id = cluster.create()["id"]
    node = cluster.node(node_index(cluster, routed_owner(cluster, instance_id)))
    reply = node.request("POST", f"/reactors/{instance_id}/actions?wait=true", '"increase"')
    assert reply.status == 200 and reply.json()["state"]["value"] == 1, reply
    version = reply.json()["version"]
    stream = node.events(instance_id)
    assert next_event(stream).id == str(version)
    # Another node claims it, as one would once this node's lease had lapsed.
    cluster.psql(f"UPDATE reactor_sessions SET owner = 'elsewhere', epoch = epoch + 1, "
                 f"lease_until = now() + interval '1 hour' WHERE id = '{instance_id}'")

    refused = node.request("POST", f"/reactors/{instance_id}/actions", '"increase"')
    assert is_problem(refused, "instance-elsewhere"), refused
    end = stream.next()
    assert (end.event, end.json()) == ("end", {"reason": "moved"})
    assert stream.next() is None
    # Nothing of the refused action reached the store, and the node now sends clients on.
    row = cluster.psql(f"SELECT version, owner FROM reactor_sessions WHERE id = '{instance_id}'")
    assert row == f"{version}|elsewhere"
    assert cluster.psql(f"SELECT count(*) FROM reactor_actions WHERE id = '{instance_id}'") == "0"
    # Its owner never lets go: after waiting (--lease-s + 2 s) the request is sent on.
    reply = node.request("GET", f"/reactors/{instance_id}", timeout=15)
    assert is_problem(reply, "instance-elsewhere") and reply.header("Retry-After") == "1", reply


def test_a_node_that_takes_over_from_a_dead_async_node_never_reuses_a_version_it_showed(tmp_path, server_logs):
    # A flush interval longer than the test: what the owner shows is never committed before it dies.
    with Cluster(tmp_path, nodes=2, lease_s=LEASE_S,
                 node_args=("--durability", "async", "--flush-interval-ms", "60000")) as cluster:
        instance_id = cluster.create()["id"]
        owner_index = node_index(cluster, routed_owner(cluster, instance_id))
        # Claiming it, the owner commits at once that it shows the session's versions ahead of the store.
        wait_until(lambda: cluster.psql(f"SELECT published_ahead FROM reactor_sessions WHERE id = '{instance_id}'") == "t",
                   10, "the owner's mark")
        node = cluster.node(owner_index)
        stream = node.events(instance_id)
        for _ in range(2):
            assert node.request("POST", f"/reactors/{instance_id}/actions", '"increase"').status == 202
        shown = stream.states_until(lambda state: state["value"] == 2 and state["alertMessage"]["count"] == 2
                                    and not state["isLoading"])
        stream.close()
        last_seen = max(int(event.id) for event in shown)
        cluster.kill_node(owner_index)

        # The other node serves it once the lease lapses: its committed state, numbered past
        # every version the dead node may have shown.
        wait_until(lambda: cluster.request("GET", f"/reactors/{instance_id}", timeout=15).status == 200,
                   LEASE_S + 20, "the session served by the other node")
        assert owner(cluster, instance_id) == cluster.node_ids[1 - owner_index]
        taken_over = value(cluster, instance_id)
        assert taken_over["state"]["value"] == 0
        assert taken_over["version"] > last_seen
        reply = cluster.request("POST", f"/reactors/{instance_id}/actions?wait=true", '"decrease"')
        assert reply.status == 200 and reply.json()["version"] > taken_over["version"], reply


def test_a_dump_restored_with_its_sessions_marked_never_shows_a_version_number_twice(tmp_path, server_logs):
    """The README's way to back up and restore the PostgreSQL store: pg_dump while the nodes run;
    pg_restore with them stopped, then every session marked as served ahead of the store."""
    with Cluster(tmp_path, nodes=1, lease_s=LEASE_S) as cluster:
        postgres = cluster.postgres
        connection = ["-h", "127.0.0.1", "-p", str(postgres.port), "-U", postgres.role]
        counter = cluster.create()["id"]
        assert cluster.request("POST", f"/reactors/{counter}/actions?wait=true", '"increase"').status == 200
        at_dump = value(cluster, counter)
        dump = tmp_path / "reactor.dump"
        dumped = subprocess.run([str(postgres.bin / "pg_dump"), *connection, "--format=custom", "--table=reactor_*",
                                 f"--file={dump}", postgres.database], capture_output=True, text=True, timeout=60)
        assert dumped.returncode == 0, dumped.stderr
        assert cluster.request("POST", f"/reactors/{counter}/actions?wait=true", '"increase"').status == 200
        later = value(cluster, counter)["version"]

        assert cluster.stop_node(0) == 0
        restored = subprocess.run([str(postgres.bin / "pg_restore"), *connection, "--clean", "--if-exists",
                                   f"--dbname={postgres.database}", str(dump)], capture_output=True, text=True, timeout=60)
        assert restored.returncode == 0, restored.stderr
        postgres.psql("UPDATE reactor_sessions SET published_ahead = true")
        cluster.start_node(0)
        # Back at the dump's state, numbered past any version shown since.
        now = value(cluster, counter)
        assert now["state"] == at_dump["state"]
        assert now["version"] == at_dump["version"] + 65_537 > later


class Load:
    """Clients sending `increase` through the proxy to random counters until stopped, counting
    per counter the actions acknowledged (202) and those whose fate is unknown (no answer, or
    the proxy's own error: the node may have died after taking it). A node's problem+json 503 is
    a refusal: nothing was done."""

    def __init__(self, cluster: Cluster, counters: list[str], clients: int) -> None:
        self.cluster = cluster
        self.counters = counters
        self.acknowledged: Counter[str] = Counter()
        self.unanswered: Counter[str] = Counter()
        self.refused = 0
        self.last_success: dict[str, float] = {}
        self.longest_gap: dict[str, float] = {}
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.pool = ThreadPoolExecutor(max_workers=clients)
        self.futures = [self.pool.submit(self._client, seed) for seed in range(clients)]

    def _client(self, seed: int) -> None:
        chooser = random.Random(seed)
        deadline = time.monotonic() + 120  # bounded even if never stopped
        while not self.stopping.is_set() and time.monotonic() < deadline:
            instance_id = chooser.choice(self.counters)
            try:
                reply = self.cluster.request("POST", f"/reactors/{instance_id}/actions", '"increase"', timeout=5)
            except OSError:
                with self.lock:
                    self.unanswered[instance_id] += 1
                continue
            now = time.monotonic()
            with self.lock:
                if reply.status == 202:
                    self.acknowledged[instance_id] += 1
                    previous = self.last_success.get(instance_id)
                    if previous is not None:
                        self.longest_gap[instance_id] = max(self.longest_gap.get(instance_id, 0), now - previous)
                    self.last_success[instance_id] = now
                elif reply.header("Content-Type") == "application/problem+json" and reply.status in (429, 503):
                    self.refused += 1
                else:
                    self.unanswered[instance_id] += 1
            if reply.status != 202:
                time.sleep(0.05)  # a refused client backs off before it retries (not a sync point)

    def stop(self) -> None:
        self.stopping.set()
        for future in self.futures:
            future.result(timeout=30)
        self.pool.shutdown()


def settled_values(cluster: Cluster, counters: list[str], timeout: float) -> dict[str, int]:
    """Each counter's committed value once every counter answers through the proxy (so its
    recovery, if any, ran) and the store holds no unsettled action for it and a state that is not
    loading: every acknowledged action has then been applied and committed."""
    values: dict[str, int] = {}

    def all_settled() -> bool:
        for instance_id in counters:
            if cluster.request("GET", f"/reactors/{instance_id}", timeout=5).status != 200:
                return False
            row = cluster.psql(
                f"SELECT (SELECT count(*) FROM reactor_actions a WHERE a.id = s.id), convert_from(s.state, 'UTF8') "
                f"FROM reactor_sessions s WHERE s.id = '{instance_id}'")
            pending, _, state = row.partition("|")
            state = json.loads(state)
            if pending != "0" or state["isLoading"]:
                return False
            values[instance_id] = state["value"]
        return True

    wait_until(all_settled, timeout, "every counter served, its actions settled and committed")
    return values


def check_counts(load: Load, values: dict[str, int]) -> None:
    for instance_id, found in values.items():
        acknowledged = load.acknowledged[instance_id]
        unanswered = load.unanswered[instance_id]
        assert acknowledged <= found <= acknowledged + unanswered, (
            f"counter {instance_id[:6]}…: value {found}, acknowledged {acknowledged}, unanswered {unanswered}")


def test_kill_9_under_load_moves_sessions_after_the_lease_and_loses_no_acknowledged_action(cluster):
    counters = [cluster.create()["id"] for _ in range(12)]
    owners = Counter(routed_owner(cluster, instance_id) for instance_id in counters)
    victim = node_index(cluster, owners.most_common(1)[0][0])
    victims = [instance_id for instance_id in counters if owner(cluster, instance_id) == cluster.node_ids[victim]]

    load = Load(cluster, counters, clients=8)
    try:
        wait_until(lambda: sum(load.acknowledged.values()) >= 100, 30, "100 acknowledged actions")
        killed_at = time.monotonic()
        cluster.kill_node(victim)
        # The victim's sessions come back on the other nodes once their leases lapse.
        wait_until(lambda: all(load.last_success.get(i, 0) > killed_at for i in victims), LEASE_S + 20,
                   "every session of the killed node acknowledging actions again")
        failover = max(load.last_success[i] for i in victims) - killed_at
        after = sum(load.acknowledged.values())
        wait_until(lambda: sum(load.acknowledged.values()) >= after + scaled(100, 2000), 60,
                   "more acknowledged actions after the fail-over")
    finally:
        load.stop()
    values = settled_values(cluster, counters, timeout=30)
    check_counts(load, values)
    assert all(owner(cluster, i) != cluster.node_ids[victim] for i in victims)
    # The proxy met the dead node (it shows in the access log: a 502 from one node, then the
    # next node's answer), and its error log names no instance.
    assert any("502" in passage.upstream_statuses and len(passage.upstreams) > 1 for passage in cluster.passages())
    errors = cluster.nginx.error_log.read_text(errors="replace")
    named = [instance_id[:6] for instance_id in counters if instance_id in errors]
    assert not named, f"nginx's error log names whole instance ids ({named}):\n{errors[-2000:]}"
    print(f"failover: {len(victims)} sessions served again {failover:.2f} s after kill -9 "
          f"(lease {LEASE_S} s); {sum(load.acknowledged.values())} acknowledged, {load.refused} refused")


def test_sigterm_hands_sessions_over_at_once_and_streams_resume_gap_free(cluster):
    counters = [cluster.create()["id"] for _ in range(9)]
    for instance_id in counters:
        reply = cluster.request("POST", f"/reactors/{instance_id}/actions?wait=true", '"increase"')
        assert reply.status == 200, reply
    owners = Counter(owner(cluster, instance_id) for instance_id in counters)
    leaving = node_index(cluster, owners.most_common(1)[0][0])
    moving = [i for i in counters if owner(cluster, i) == cluster.node_ids[leaving]]
    streams = {instance_id: cluster.events(instance_id) for instance_id in moving}
    last_seen = {}
    for instance_id, stream in streams.items():
        first = next_event(stream)
        assert first.event == "state"
        last_seen[instance_id] = int(first.id)

    assert cluster.stop_node(leaving) == 0
    for instance_id, stream in streams.items():
        event = stream.next()
        assert (event.event, event.json()) == ("end", {"reason": "moved"}), event
        # Released before the stream ended: another node takes it on the first try.
        resumed = cluster.events(instance_id, headers={"Last-Event-ID": str(last_seen[instance_id])})
        assert resumed.status == 200, (resumed.status, getattr(resumed, "body", b""))
        streams[instance_id] = resumed
        assert owner(cluster, instance_id) not in ("", cluster.node_ids[leaving])

    for instance_id, stream in streams.items():
        reply = cluster.request("POST", f"/reactors/{instance_id}/actions?wait=true", '"increase"')
        assert reply.status == 200 and reply.json()["state"]["value"] == 2, reply
        ids = [int(event.id) for event in stream.states_until(lambda state: state["value"] == 2 and not state["isLoading"])]
        # Every version after the last one seen, in order: nothing lost, nothing twice.
        assert ids == list(range(last_seen[instance_id] + 1, ids[-1] + 1)), ids
        stream.close()


def test_a_message_said_on_one_node_reaches_the_room_on_every_node(cluster):
    rooms: dict[str, str] = {}
    for _ in range(30):
        instance_id = cluster.create("room")["id"]
        rooms.setdefault(routed_owner(cluster, instance_id), instance_id)
        if len(rooms) == len(cluster.nodes):
            break
    assert len(rooms) >= 2, "30 rooms created through the proxy all landed on one node"
    streams = {node_id: cluster.events(instance_id) for node_id, instance_id in rooms.items()}
    for stream in streams.values():
        assert next_event(stream).event == "state"
    speaker_node, speaker = next(iter(rooms.items()))
    text = f"hello from {speaker_node} ✓"
    reply = cluster.request("POST", f"/reactors/{speaker}/actions", {"say": {"text": text}})
    assert reply.status == 202, reply
    for node_id, stream in streams.items():
        states = stream.states_until(lambda state: any(m["text"] == text for m in state["messages"]))
        heard = [m for m in states[-1].json()["messages"] if m["text"] == text]
        assert len(heard) == 1, (node_id, heard)
        stream.close()


@pytest.mark.skipif(not FULL, reason="the rolling restart runs in make cluster-test (CLUSTER_FULL=1)")
def test_a_rolling_restart_under_load_loses_nothing(cluster):
    counters = [cluster.create()["id"] for _ in range(24)]
    load = Load(cluster, counters, clients=8)
    try:
        for index in range(len(cluster.nodes)):
            before = sum(load.acknowledged.values())
            wait_until(lambda: sum(load.acknowledged.values()) >= before + 200, 30, "200 more acknowledged actions")
            cluster.restart_node(index)
        wait_until(lambda: sum(load.acknowledged.values()) >= before + 400, 30, "load going on after the restarts")
    finally:
        load.stop()
    values = settled_values(cluster, counters, timeout=30)
    check_counts(load, values)
    gaps = sorted(load.longest_gap.values())
    print(f"rolling restart: {sum(load.acknowledged.values())} acknowledged, {load.refused} refused; "
          f"longest pause between acknowledged actions per session: median {gaps[len(gaps) // 2]:.3f} s, "
          f"max {gaps[-1]:.3f} s")


def test_a_database_that_goes_away_gives_clear_errors_and_service_resumes_with_nothing_lost(cluster):
    counters = [cluster.create()["id"] for _ in range(4)]
    acknowledged: Counter[str] = Counter()
    for instance_id in counters:
        routed_owner(cluster, instance_id)
        reply = cluster.request("POST", f"/reactors/{instance_id}/actions?wait=true", '"increase"')
        assert reply.status == 200, reply
        acknowledged[instance_id] += 1

    assert all(node.request("GET", "/readyz").status == 200 for node in cluster.nodes)

    cluster.postgres.pause()
    # Every node finds out by itself, before any request needs the database, and says it is
    # not ready (a proxy that probes /readyz then routes around it).
    for node in cluster.nodes:
        wait_until(lambda: is_problem(node.request("GET", "/readyz"), "not-ready"), 10,
                   "each node to report itself not ready while the database is away")
    # Nothing hangs, and nothing is acknowledged that the store did not take.
    for instance_id in counters:
        reply = cluster.request("POST", f"/reactors/{instance_id}/actions", '"increase"', timeout=10)
        assert reply.status == 503 and is_problem(reply, "store-unavailable"), reply
        assert reply.header("Retry-After") is not None
    cluster.postgres.resume()
    for node in cluster.nodes:
        wait_until(lambda: node.request("GET", "/readyz").status == 200, 30,
                   "each node to report itself ready once the database is back")

    for instance_id in counters:
        def accepted() -> bool:
            reply = cluster.request("POST", f"/reactors/{instance_id}/actions", '"increase"', timeout=10)
            if reply.status == 202:
                acknowledged[instance_id] += 1
            return reply.status == 202
        wait_until(accepted, 30, "actions accepted again once the database is back")
    assert settled_values(cluster, counters, timeout=30) == dict(acknowledged)


def test_a_database_that_stops_answering_holds_up_only_the_requests_that_need_it(tmp_path, server_logs):
    """A request that must wait for the store (here to bring an instance back) waits off the
    event loop: with a single loop, and PostgreSQL frozen with SIGSTOP mid-request, the health
    check and an instance already in memory still answer at once. The waiting request fails
    after --store-timeout-s with a 503, and the next one, once the database answers, succeeds."""
    timeout_s = 3
    with Cluster(tmp_path, nodes=1, lease_s=LEASE_S,
                 node_args=("--threads", "1", "--store-timeout-s", str(timeout_s))) as cluster:
        node = cluster.node(0)
        in_memory = node.create()["id"]
        # The first request claims the new session for this node: in memory from then on.
        assert node.request("GET", f"/reactors/{in_memory}").status == 200
        stored = node.create()["id"]  # stored, and in no node's memory
        postgres = cluster.postgres.process.pid
        frozen = [postgres, *child_pids(postgres)]
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
        try:
            with ThreadPoolExecutor(max_workers=1) as pool:
                sent = time.monotonic()
                waiting = pool.submit(node.request, "GET", f"/reactors/{stored}", None, None, 30)
                wait_until(lambda: node.metric("reactor_requests_waiting_for_store") == 1, 10,
                           "the request for the stored instance waiting for the store")
                started = time.monotonic()
                health = node.request("GET", "/healthz", timeout=5)
                snapshot = node.request("GET", f"/reactors/{in_memory}", timeout=5)
                elapsed = time.monotonic() - started
                assert health.status == 200 and snapshot.status == 200, (health, snapshot)
                assert snapshot.json()["id"] == in_memory
                assert elapsed < 2, f"requests that need no store waited {elapsed:.1f} s"
                assert not waiting.done(), "the stored instance came back while the database was frozen"
                # Still frozen: the store call gives up after its timeout, and the request says so.
                reply = waiting.result(timeout=30)
                waited = time.monotonic() - sent
                assert is_problem(reply, "store-unavailable"), reply
                assert timeout_s - 0.5 < waited < timeout_s + 5, f"answered after {waited:.1f} s"
        finally:
            for pid in frozen:
                os.kill(pid, signal.SIGCONT)
        # Once the database answers again, a new connection serves the stored instance.
        wait_until(lambda: node.request("GET", f"/reactors/{stored}").status == 200, 30,
                   "the stored instance served once the database answers")
        # The pool thread counts its job done just after it has answered, so the gauge may lag
        # the reply by a moment; it must come back to 0 (nothing left waiting for the store).
        wait_until(lambda: node.metric("reactor_requests_waiting_for_store") == 0, 10,
                   "no request left waiting for the store")
