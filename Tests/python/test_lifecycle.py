"""Stopping: reactor-server runs its server in a swift-service-lifecycle ServiceGroup, which stops
it gracefully on SIGTERM or SIGINT; a second signal while it stops exits 1 at once."""

import signal
import threading
import time

import pytest

STOP_TIMEOUT = 15


def wait_for_log(server, text: str, timeout: float = STOP_TIMEOUT) -> None:
    """Waits until the server's log shows `text` (it is written before the server goes on)."""
    deadline = time.monotonic() + timeout
    while text not in server.stderr():
        if time.monotonic() > deadline or server.process.poll() is not None:
            pytest.fail(f"no {text!r} in the log:\n{server.stderr()}")
        time.sleep(0.01)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_streams_and_exits_zero(start_server, signum):
    server = start_server()
    instance = server.create()
    stream = server.events(instance["id"])
    assert stream.next().retry == 3000
    assert stream.next().id == "0"
    server.signal(signum)
    end = stream.next(timeout=STOP_TIMEOUT)
    assert (end.event, end.json()) == ("end", {"reason": "shutdown"})
    assert server.wait(timeout=STOP_TIMEOUT) == 0
    assert "stopping" in server.stderr() and "stopped" in server.stderr()


def test_a_second_signal_while_stopping_exits_one(start_server):
    # A request waiting for an action that takes a minute keeps the server stopping for as long
    # as it lets requests in flight finish.
    server = start_server("--counter-delay-ms", "60000", "--wait-timeout-ms", "60000")
    instance = server.create()
    answered = threading.Event()

    def wait_for_action():
        try:
            server.request("POST", f"/reactors/{instance['id']}/actions?wait=true", '"increase"', timeout=30)
        except OSError:
            pass
        answered.set()

    waiter = threading.Thread(target=wait_for_action, daemon=True)
    waiter.start()
    # The action is accepted before the signal: the event stream shows it started.
    stream = server.events(instance["id"])
    try:
        stream.states_until(lambda state: state["isLoading"])
    finally:
        stream.close()
    server.signal(signal.SIGTERM)
    wait_for_log(server, "stopping")
    assert server.process.poll() is None, "the server should still be letting the request finish"
    server.signal(signal.SIGTERM)
    assert server.wait(timeout=STOP_TIMEOUT) == 1
    assert "second signal while stopping" in server.stderr()
    assert answered.wait(timeout=STOP_TIMEOUT)
