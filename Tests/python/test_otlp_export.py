"""`--traces otlp`: a server built with the OTLP trait sends each action's spans to an
OpenTelemetry collector over OTLP/HTTP. The collector here is a real HTTP endpoint on 127.0.0.1
that keeps what it is sent; the spans travel as protobuf, whose strings are plain UTF-8 in the
body, so the operation and attribute names are read from the bytes.

The OTLP build takes minutes (swift-otel and its dependencies), so it is not part of
`make test`: `make otlp-check` builds it and runs this file with $REACTOR_SERVER_OTLP_BIN set.
Without it, the only test here that runs checks that a build without the trait refuses the flag.
"""

import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import Server, server_binary

OTLP_BINARY = os.environ.get("REACTOR_SERVER_OTLP_BIN")


class Collector:
    """An OTLP/HTTP endpoint: keeps the body of every POST to /v1/traces."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.arrived = threading.Condition()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with collector.arrived:
                    if self.path == "/v1/traces":
                        collector.bodies.append(body)
                    collector.arrived.notify_all()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def wait_for(self, predicate, timeout: float) -> bytes:
        with self.arrived:
            self.arrived.wait_for(lambda: predicate(b"".join(self.bodies)), timeout=timeout)
            return b"".join(self.bodies)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_build_without_the_trait_refuses_the_flag():
    result = subprocess.run([str(server_binary()), "--traces", "otlp"], capture_output=True, text=True, timeout=30)
    if "needs a build with the OTLP trait" not in result.stderr:
        pytest.skip("this server binary was built with the OTLP trait")
    assert result.returncode != 0
    assert "--traces otlp" in result.stderr.replace("(TRACES) ", "")


@pytest.mark.skipif(not OTLP_BINARY, reason="needs the OTLP build: make otlp-check")
def test_spans_of_an_action_reach_the_collector(monkeypatch):
    collector = Collector()
    monkeypatch.setenv("REACTOR_SERVER_BIN", OTLP_BINARY)
    server = Server("--traces", "otlp", env={
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    })
    try:
        created = server.create("counter")
        reply = server.request("POST", f"/reactors/{created['id']}/actions?wait=true", '"increase"')
        assert reply.status == 200
        names = [b"reactor.action", b"decode", b"queue", b"mutate", b"reduce", b"reactor.action.seq", b"counter"]
        received = collector.wait_for(lambda body: all(name in body for name in names), timeout=20)
        missing = [name for name in names if name not in received]
        assert not missing, f"spans not received: {missing}"
        assert b"reactor-server" in received  # the service name
        assert created["id"].encode() not in received, "a span names the instance id"
    finally:
        server.stop()
        collector.close()
