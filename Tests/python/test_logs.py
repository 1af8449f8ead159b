"""Logs: --log-format json writes one JSON object per line (timestamp, level, label, message,
metadata) for container log collectors; an instance id, its owner's only credential, never
appears in the log in either format."""

import json
import socket
from datetime import datetime

import pytest

REQUIRED = {"timestamp", "level", "label", "message", "metadata"}
LEVELS = {"trace", "debug", "info", "notice", "warning", "error", "critical"}


def entries(server) -> list[dict]:
    """Every line of the server's log, each parsed as one JSON object."""
    lines = server.stderr().splitlines()
    assert lines, "nothing was logged"
    parsed = []
    for line in lines:
        entry = json.loads(line)
        assert isinstance(entry, dict), line
        assert REQUIRED <= set(entry), line
        assert entry["level"] in LEVELS, line
        assert isinstance(entry["message"], str) and isinstance(entry["metadata"], dict), line
        stamp = datetime.fromisoformat(entry["timestamp"])
        assert stamp.utcoffset() is not None and stamp.utcoffset().total_seconds() == 0, line
        parsed.append(entry)
    return parsed


def exercise(server) -> str:
    """Creates an instance, acts on it, deletes it; returns its id."""
    instance = server.create("counter")
    assert server.request("POST", f"/reactors/{instance['id']}/actions?wait=true", '"increase"').status == 200
    assert server.request("GET", "/nowhere").status == 404
    # The id in forms of a path a careless client or a scanner sends, routed or not.
    for path, status in [(f"//reactors/{instance['id']}", 404), (f"/%72eactors/{instance['id']}", 200),
                         (f"/reactors//{instance['id']}/events", 404), (f"/x/../reactors/{instance['id']}", 404)]:
        assert server.request("GET", path).status == status, path
    assert server.request("DELETE", f"/reactors/{instance['id']}").status == 204
    return instance["id"]


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_json_logs_are_one_object_per_line(start_server, how):
    if how == "flag":
        server = start_server("--log-format", "json", "--log-level", "debug")
    else:
        server = start_server(env={"LOG_FORMAT": "json", "LOG_LEVEL": "debug"})
    instance_id = exercise(server)
    assert server.stop() == 0
    log = entries(server)
    assert all(entry["label"] == "reactor-server" for entry in log)
    messages = [entry["message"] for entry in log]
    assert "listening" in messages and "stopped" in messages
    listening = next(entry for entry in log if entry["message"] == "listening")
    assert listening["metadata"]["port"] == str(server.port)
    created = next(entry for entry in log if entry["message"] == "instance created")
    assert created["level"] == "info" and created["metadata"]["type"] == "counter"
    assert created["metadata"]["instance"].startswith("#")
    requests = [entry["metadata"] for entry in log if entry["message"] == "request"]
    assert {"path": "/nowhere", "status": "404"}.items() <= next(
        metadata for metadata in requests if metadata["path"] == "/nowhere").items()
    assert any(metadata["method"] == "POST" and metadata["path"].startswith("/reactors/#") for metadata in requests)
    assert instance_id not in server.stderr()


def test_text_logs_never_show_an_instance_id(start_server):
    server = start_server("--log-level", "debug")
    instance_id = exercise(server)
    assert server.stop() == 0
    text = server.stderr()
    assert "instance created" in text and " request" in text
    assert instance_id not in text
    with pytest.raises(json.JSONDecodeError):
        json.loads(text.splitlines()[0])



def test_libmicrohttpds_own_messages_reach_the_log(start_server):
    """libmicrohttpd answers a request it cannot parse with 400 itself: the log says why (at
    debug, as a client's mistake is routine), marked as libmicrohttpd's."""
    server = start_server("--log-format", "json", "--log-level", "debug")
    with socket.create_connection((server.host, server.port), timeout=10) as raw:
        raw.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nbroken\r\n\r\n")
        assert raw.recv(64).startswith(b"HTTP/1.1 400")
    assert server.stop() == 0
    reported = [entry for entry in entries(server) if entry["metadata"].get("component") == "libmicrohttpd"]
    assert reported, server.stderr()
    assert reported[0]["level"] == "debug"
    assert reported[0]["message"].startswith("Error processing request (HTTP response code is 400"), reported
