"""A hot session under more load than its reactor can apply: the server slows the senders down
(their acknowledgements wait) instead of queueing without end until the instance is taken for
stalled. With async durability, where every action is acknowledged before its commit, 64
connections posting to one counter for 10 s get only 202s, and the log has no stall."""

import socket
import threading
import time

import pytest

CONNECTIONS = 64
SECONDS = 10.0


def hammer(server, instance_id: str, seconds: float, connections: int) -> dict[int, int]:
    """POSTs "increase" to the instance on `connections` keep-alive connections, one request in
    flight on each, for `seconds`; returns how many answers each status got."""
    request = (f"POST /reactors/{instance_id}/actions HTTP/1.1\r\nHost: {server.host}\r\n"
               "Content-Type: application/json\r\nContent-Length: 10\r\n\r\n\"increase\"").encode()
    statuses: dict[int, int] = {}
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def post_until_deadline() -> None:
        counted: dict[int, int] = {}
        with socket.create_connection((server.host, server.port), timeout=30) as connection:
            buffer = b""
            while time.monotonic() < deadline:
                connection.sendall(request)
                while b"\r\n\r\n" not in buffer:
                    chunk = connection.recv(65536)
                    assert chunk, "the server closed a keep-alive connection"
                    buffer += chunk
                head, _, rest = buffer.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(rest) < length:
                    chunk = connection.recv(65536)
                    assert chunk, "the server closed a keep-alive connection"
                    rest += chunk
                buffer = rest[length:]
                status = int(head.split(b" ", 2)[1])
                counted[status] = counted.get(status, 0) + 1
        with lock:
            for status, count in counted.items():
                statuses[status] = statuses.get(status, 0) + count

    threads = [threading.Thread(target=post_until_deadline) for _ in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return statuses


@pytest.mark.parametrize("durability", ["async", "sync"])
def test_a_hot_session_under_load_is_never_reported_stalled(start_server, durability):
    server = start_server("--counter-delay-ms", "0", "--durability", durability)
    instance_id = server.create("counter")["id"]

    statuses = hammer(server, instance_id, SECONDS, CONNECTIONS)

    answered = sum(statuses.values())
    assert answered > 0
    assert set(statuses) == {202}, f"every action acknowledged, none refused: {statuses}"
    assert server.metric("reactor_stalls_total") == 0
    # Every acknowledged action is applied exactly once: the counter's value counts them.
    reply = server.request("POST", f"/reactors/{instance_id}/actions?wait=true", '"decrease"')
    assert reply.status == 200, reply
    assert reply.json()["state"]["value"] == answered - 1
    assert server.stop() == 0
    log = server.stderr()
    assert "stalled" not in log, log[-2000:]
