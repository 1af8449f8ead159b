"""docker/haproxy.cfg in front of two nodes sharing PostgreSQL, on 127.0.0.1: the routing by
instance id, and its health checks on GET /readyz taking a node that lost its database (alone)
out of the ring, so that its sessions go on being served by the other node, with nothing
acknowledged lost, and come back to it once it is reachable again.

Node 1 reaches PostgreSQL through a TCP relay this test can cut, as a network partition between
that node and the database would."""

from __future__ import annotations

import selectors
import socket
import threading
from pathlib import Path

import pytest

from cluster import HAProxy, Postgres, free_ports, wait_until
from conftest import Server, request

pytestmark = [pytest.mark.cluster]

LEASE_S = 2


class Relay:
    """Forwards TCP connections from a port of its own to `target_port`, until cut: then it
    closes every connection and refuses new ones, until restored on the same port."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_ports(1)[0]
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self.restore()

    def restore(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        self._thread = threading.Thread(target=self._serve, args=(listener,), daemon=True)
        self._thread.start()

    def cut(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with self._lock:
            for sock in self._sockets:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()
            self._sockets.clear()

    def _serve(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    @staticmethod
    def _pump(a: socket.socket, b: socket.socket) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(a, selectors.EVENT_READ, b)
            selector.register(b, selectors.EVENT_READ, a)
            while True:
                for key, _ in selector.select():
                    try:
                        data = key.fileobj.recv(65536)
                        if not data:
                            return
                        key.data.sendall(data)
                    except OSError:
                        return


@pytest.fixture
def haproxy_cluster(tmp_path: Path, server_logs):
    postgres = Postgres(tmp_path)
    postgres.start()
    relay = Relay(postgres.port)
    nodes: list[Server] = []
    proxy = None
    try:
        relayed = postgres.url.replace(f":{postgres.port}/", f":{relay.port}/")
        ports = free_ports(2)
        for index, store in enumerate([relayed, postgres.url]):
            nodes.append(Server("--port", str(ports[index]), "--counter-delay-ms", "0",
                                env={"NODE_ID": f"node{index + 1}", "LEASE_S": str(LEASE_S)}, store=store))
        proxy = HAProxy(tmp_path / "haproxy", ports)
        checked = proxy.test()
        assert checked.returncode == 0, checked.stdout + checked.stderr
        proxy.start()
        yield proxy, nodes, relay
    finally:
        if proxy is not None:
            proxy.stop()
        for node in nodes:
            node.stop()
        relay.cut()
        postgres.stop()


def through(proxy: HAProxy, method: str, path: str, body=None):
    return request("127.0.0.1", proxy.port, method, path, body, None, 10.0)


def test_a_node_cut_off_from_the_database_leaves_the_ring_and_its_sessions_are_served_on(haproxy_cluster):
    proxy, nodes, relay = haproxy_cluster
    # A counter whose id routes to node 1 (creations go round robin, ids hash anywhere).
    for _ in range(60):
        created = through(proxy, "POST", "/reactors", {"type": "counter"})
        assert created.status == 201, created
        counter = created.json()["id"]
        reply = through(proxy, "POST", f"/reactors/{counter}/actions?wait=true", '"increase"')
        assert reply.status == 200, reply
        if reply.header("X-Served-By") == "node1":
            break
    else:
        pytest.fail("60 counters all routed to node 2")
    assert reply.json()["state"]["value"] == 1

    relay.cut()
    wait_until(lambda: nodes[0].request("GET", "/readyz").status == 503, 10, "node 1 to report itself not ready")
    assert nodes[1].request("GET", "/readyz").status == 200

    # HAProxy takes node 1 out after two failed checks; node 2 then serves the counter, once
    # node 1's lease on it has lapsed, as last committed.
    def served_by_node_2() -> bool:
        reply = through(proxy, "GET", f"/reactors/{counter}")
        return reply.status == 200 and reply.header("X-Served-By") == "node2"
    wait_until(served_by_node_2, 20, "node 2 to serve the counter through the proxy")
    assert through(proxy, "GET", f"/reactors/{counter}").json()["state"]["value"] == 1
    reply = through(proxy, "POST", f"/reactors/{counter}/actions?wait=true", '"increase"')
    assert (reply.status, reply.header("X-Served-By")) == (200, "node2"), reply
    assert reply.json()["state"]["value"] == 2
    # New sessions go to node 2 alone.
    assert {through(proxy, "POST", "/reactors", {"type": "counter"}).header("X-Served-By") for _ in range(4)} == {"node2"}

    # Reachable again: node 1 rejoins, and the counter moves back to it with nothing lost.
    relay.restore()
    wait_until(lambda: nodes[0].request("GET", "/readyz").status == 200, 20, "node 1 to report itself ready")

    def served_by_node_1() -> bool:
        reply = through(proxy, "GET", f"/reactors/{counter}")
        return reply.status == 200 and reply.header("X-Served-By") == "node1"
    wait_until(served_by_node_1, 20, "node 1 to serve the counter again")
    assert through(proxy, "GET", f"/reactors/{counter}").json()["state"]["value"] == 2
    # The proxy's log names no instance id.
    assert counter not in proxy.log.read_text()
