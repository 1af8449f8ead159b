"""Several nodes behind nginx (Tests/python/cluster.py): routing by instance id, event streams
through the proxy, a dead node skipped. The nodes share PostgreSQL, or with CLUSTER_STORE=sqlite
each has a SQLite file of its own. CLUSTER_FULL=1 (make cluster-test) sends more requests."""

from __future__ import annotations

import time

import pytest

from cluster import Cluster, scaled, store_mode_from_environment, wait_until

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, server_logs):
    """One cluster for this module: PostgreSQL, three nodes (lease 2 s), nginx."""
    with Cluster(tmp_path_factory.mktemp("cluster"), nodes=3, lease_s=2) as instance:
        yield instance


@pytest.fixture(autouse=True)
def cluster_logs(cluster):
    """Prints the end of every log after each test; pytest shows it when the test failed."""
    yield
    print(cluster.logs())


def snapshot(cluster: Cluster, instance_id: str) -> dict:
    reply = cluster.request("GET", f"/reactors/{instance_id}")
    assert reply.status == 200, reply
    return reply.json()


def create_and_locate(cluster: Cluster) -> tuple[str, int, int]:
    """Creates a counter through the proxy. Returns its id, the node that created it (creations
    go to any node) and the node the proxy sends requests about it to first (by its id)."""
    before = len(cluster.passages("/reactors", "POST"))
    instance_id = cluster.create()["id"]
    creation = cluster.wait_for_passages(before + 1, "/reactors", "POST")[before]
    path = f"/reactors/{instance_id}"
    cluster.request("GET", path)
    read = cluster.wait_for_passages(1, path, "GET")[0]
    return instance_id, cluster.node_index(creation.upstreams[-1]), cluster.node_index(read.upstreams[0])


def instance_on_its_node(cluster: Cluster) -> tuple[str, int]:
    """`create_and_locate` repeated (bounded) until the creating node is the node the id routes
    to (about one time in three with three nodes), so that with a SQLite file per node requests
    through the proxy find the instance. Returns its id and that node."""
    for _ in range(40):
        instance_id, creator, routed = create_and_locate(cluster)
        if creator == routed:
            return instance_id, routed
    pytest.fail("40 instances created through the proxy were all on another node than their id routes to")


def test_the_proxy_and_every_node_answer(cluster):
    assert cluster.request("GET", "/healthz").status == 200
    for node in cluster.nodes:
        assert node.request("GET", "/healthz").status == 200
    assert cluster.psql("SELECT current_user || ' ' || current_database()") == "reactor reactor"


def test_nginx_accepts_the_generated_config(cluster):
    result = cluster.nginx_test()
    assert result.returncode == 0, result.stderr
    assert "hash $reactor_id consistent;" in cluster.nginx.config.read_text()


def test_requests_about_an_instance_reach_one_node(cluster):
    # Created on the node its id routes to, so that with a SQLite file per node that node has it.
    instance_id, routed = instance_on_its_node(cluster)
    path = f"/reactors/{instance_id}"
    reads = scaled(20, 200)
    for _ in range(reads):
        assert snapshot(cluster, instance_id)["id"] == instance_id
    reply = cluster.request("POST", f"{path}/actions?wait=true", '"increase"')
    assert reply.status == 200, reply
    assert reply.json()["state"]["value"] == 1
    assert snapshot(cluster, instance_id)["state"]["value"] == 1

    # The locating read, the reads and the read after the action, and the action: each went
    # straight to that node, nothing tried before it.
    passages = cluster.wait_for_passages(reads + 2, path, "GET")
    passages += cluster.wait_for_passages(1, f"{path}/actions?wait=true", "POST")
    assert {tuple(passage.upstreams) for passage in passages} == {(f"127.0.0.1:{cluster.node_ports[routed]}",)}
    assert all(passage.status == 200 for passage in passages), passages


def test_creations_spread_over_the_nodes(cluster):
    before = len(cluster.passages("/reactors", "POST"))
    created = [cluster.create()["id"] for _ in range(scaled(12, 60))]
    passages = cluster.wait_for_passages(before + len(created), "/reactors", "POST")[before:]
    assert len({cluster.node_index(passage.upstreams[-1]) for passage in passages}) > 1, passages
    if cluster.store_mode == "sqlite":
        # Each node has a store of its own: an instance is on the node that created it only.
        for instance_id in created:
            found = [index for index, node in enumerate(cluster.nodes)
                     if node.request("GET", f"/reactors/{instance_id}").status == 200]
            assert len(found) == 1, (instance_id, found)


@pytest.mark.skipif(store_mode_from_environment() != "postgres", reason="needs the shared store")
def test_an_action_reaches_an_instance_created_on_another_node(cluster):
    """Creations go to any node, requests about the instance then to the node its id routes to;
    nginx does not send a POST on to another node once one answered, so that node must serve
    the action itself rather than answer 503 instance-elsewhere. The action is the first request
    about the instance; creations are repeated (bounded) until one was made on another node."""
    for _ in range(40):
        before = len(cluster.passages("/reactors", "POST"))
        instance_id = cluster.create()["id"]
        creator = cluster.wait_for_passages(before + 1, "/reactors", "POST")[before].upstreams[-1]
        path = f"/reactors/{instance_id}/actions?wait=true"
        reply = cluster.request("POST", path, '"increase"')
        assert reply.status == 200, reply
        if cluster.wait_for_passages(1, path, "POST")[0].upstreams != [creator]:
            break
    else:
        pytest.fail("40 instances created through the proxy were all on the node their id routes to")
    assert snapshot(cluster, instance_id)["state"]["value"] == 1


@pytest.mark.skipif(store_mode_from_environment() != "postgres", reason="needs the shared store")
def test_sessions_an_earlier_build_stored_are_read_and_one_that_no_longer_decodes_is_kept(cluster):
    """As a deploy that changed the counter's State would find them in PostgreSQL: one state
    lacking keys the counter has now (filled from its initial state), one whose value is of
    another type (refused with 500, kept, and still deletable by its owner)."""
    older, unreadable = cluster.create()["id"], cluster.create()["id"]
    for instance_id, state in [(older, '{"value":41}'), (unreadable, '{"value":"many"}')]:
        cluster.psql(f"UPDATE reactor_sessions SET state = convert_to('{state}', 'UTF8') WHERE id = '{instance_id}'")
    assert snapshot(cluster, older)["state"] == {"alertMessage": {"count": 0, "value": None}, "isLoading": False, "value": 41}
    refused = cluster.request("GET", f"/reactors/{unreadable}")
    assert refused.status == 500 and refused.json()["type"].endswith(":stored-session-incompatible"), refused
    assert cluster.psql(f"SELECT convert_from(state, 'UTF8') FROM reactor_sessions WHERE id = '{unreadable}'") == '{"value":"many"}'
    # The node that tried it let its claim go: any other node (a newer build, in a rolling
    # deploy) may load it now rather than answer 503 until the lease ran out.
    wait_until(lambda: cluster.psql(f"SELECT owner IS NULL FROM reactor_sessions WHERE id = '{unreadable}'") == "t",
               timeout=10, what="the claim on the session that does not decode to be released")
    for node in cluster.nodes:
        answer = node.request("GET", f"/reactors/{unreadable}")
        assert answer.status == 500 and answer.json()["type"].endswith(":stored-session-incompatible"), answer
        wait_until(lambda: cluster.psql(f"SELECT owner IS NULL FROM reactor_sessions WHERE id = '{unreadable}'") == "t",
                   timeout=10, what="each node to release the session that does not decode")
    assert cluster.request("DELETE", f"/reactors/{unreadable}").status == 204
    assert cluster.request("GET", f"/reactors/{unreadable}").status == 404
    assert cluster.psql(f"SELECT count(*) FROM reactor_sessions WHERE id = '{unreadable}'") == "0"


def test_event_streams_pass_through_unbuffered_and_resume(cluster):
    instance_id, _ = instance_on_its_node(cluster)
    stream = cluster.events(instance_id)
    try:
        assert stream.status == 200
        assert stream.response_headers["Content-Type"].startswith("text/event-stream")
        assert stream.next(timeout=5).retry == 3000
        assert stream.next(timeout=5).id == "0"
        assert cluster.request("POST", f"/reactors/{instance_id}/actions", '"increase"').status == 202
        # Each state arrives while the stream stays open: nothing waits for a buffer to fill.
        states = stream.states_until(lambda state: state["alertMessage"]["count"] == 1, timeout=5)
        assert [event.id for event in states] == ["1", "2", "3", "4"]
    finally:
        stream.close()
    # Last-Event-ID reaches the node: the states after version 2 are replayed.
    resumed = cluster.events(instance_id, headers={"Last-Event-ID": "2"})
    try:
        assert resumed.next(timeout=5).retry == 3000
        assert [resumed.next(timeout=5).id for _ in range(2)] == ["3", "4"]
    finally:
        resumed.close()


def test_a_killed_node_is_skipped_and_comes_back_on_its_port(cluster):
    """Runs last: it kills a node, and restarts it before it ends."""
    victim = 0
    dead = f"127.0.0.1:{cluster.node_ports[victim]}"
    cluster.kill_node(victim)
    try:
        started = time.monotonic()
        reads_before = len(cluster.passages("/healthz"))
        reads = scaled(9, 60)
        for _ in range(reads):
            assert cluster.request("GET", "/healthz").status == 200
        # A POST that met a refused connection was never sent, so nginx tries the next node.
        creations_before = len(cluster.passages("/reactors", "POST"))
        created = [cluster.create()["id"] for _ in range(6)]
        assert time.monotonic() - started < 5, "requests waited for the dead node"
        # Round robin still offers the dead node its turn: those requests went on to another.
        for passages in (cluster.wait_for_passages(reads_before + reads, "/healthz")[reads_before:],
                         cluster.wait_for_passages(creations_before + 6, "/reactors", "POST")[creations_before:]):
            moved_on = [passage for passage in passages if passage.upstreams[0] == dead]
            assert moved_on, passages
            assert all(len(passage.upstreams) == 2 for passage in moved_on), moved_on
        if cluster.store_mode == "postgres":
            # Whichever node an id routes to, the one holding the instance answers in the end.
            for instance_id in created:
                assert snapshot(cluster, instance_id)["id"] == instance_id
    finally:
        cluster.restart_node(victim)
    assert cluster.node(victim).port == cluster.node_ports[victim]
    assert cluster.node(victim).request("GET", "/healthz").status == 200
    before = len(cluster.passages("/healthz"))
    for _ in range(6):
        assert cluster.request("GET", "/healthz").status == 200
    passages = cluster.wait_for_passages(before + 6, "/healthz")[before:]
    assert victim in {cluster.node_index(passage.upstreams[-1]) for passage in passages}
