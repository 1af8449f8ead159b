"""End-to-end tests of the HTTP contract (DESIGN §3–4) against a live reactor-server."""

import http.client
import json
import re
import signal
import threading
import time

import pytest
from faults_support import wait_for

COUNTER_INITIAL = {"alertMessage": {"count": 0, "value": None}, "isLoading": False, "value": 0}
PROBLEM = "urn:reactor-server:problem:"


def assert_problem(reply, status: int, kind: str) -> dict:
    assert reply.status == status, reply
    assert reply.header("Content-Type") == "application/problem+json", reply
    body = reply.json()
    assert set(body) == {"detail", "status", "title", "type"}
    assert body["status"] == status and body["type"] == PROBLEM + kind, body
    return body


# --- types, instances ------------------------------------------------------------------------

def test_types_lists_the_examples(server):
    reply = server.request("GET", "/types")
    assert reply.status == 200 and reply.header("Content-Type") == "application/json"
    types = {entry["name"]: entry for entry in reply.json()["types"]}
    assert list(types) == ["counter", "todo", "search", "room"]
    assert types["counter"]["initialState"] == COUNTER_INITIAL
    assert types["counter"]["exampleActions"] == ["increase", "decrease"]
    assert {"add": {"title": "Write the tests"}} in types["todo"]["exampleActions"]
    assert {"updateQuery": {"query": "swift"}} in types["search"]["exampleActions"]
    assert {"say": {"text": "hello"}} in types["room"]["exampleActions"]


def test_create_read_delete(server):
    reply = server.request("POST", "/reactors", {"type": "counter"})
    assert reply.status == 201, reply
    assert reply.body.startswith(b'{"id":"'), "keys are sorted"
    body = reply.json()
    assert list(body) == ["id", "state", "type", "version"]
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", body["id"])
    assert reply.header("Location") == f"/reactors/{body['id']}"
    assert reply.header("ETag") == '"0"'
    assert body["state"] == COUNTER_INITIAL and body["version"] == 0

    got = server.request("GET", reply.header("Location"))
    assert got.status == 200 and got.json() == body and got.header("ETag") == '"0"'
    # Weak comparison (RFC 9110 §13.1.2): a weak tag of the same version matches too.
    for tag in ('"0"', '"7", "0"', "*", 'W/"0"', '"7", W/"0"'):
        not_modified = server.request("GET", reply.header("Location"), headers={"If-None-Match": tag})
        assert not_modified.status == 304 and not_modified.body == b"", not_modified
        assert not_modified.header("ETag") == '"0"'
    for tag in ('"1"', 'W/"1"', 'W/0', 'w/"0"'):
        assert server.request("GET", reply.header("Location"), headers={"If-None-Match": tag}).status == 200, tag

    assert server.request("DELETE", reply.header("Location")).status == 204
    assert_problem(server.request("GET", reply.header("Location")), 404, "unknown-instance")
    assert_problem(server.request("DELETE", reply.header("Location")), 404, "unknown-instance")


def test_create_errors(server):
    assert_problem(server.request("POST", "/reactors", {"type": "nope"}), 400, "unknown-type")
    assert_problem(server.request("POST", "/reactors", {}), 400, "invalid-body")
    assert_problem(server.request("POST", "/reactors", "not json"), 400, "invalid-body")
    # A field the document does not name is refused (additionalProperties: false), not ignored.
    body = assert_problem(server.request("POST", "/reactors", {"type": "counter", "x": 42}), 400, "invalid-body")
    assert "'x'" in body["detail"], body
    assert_problem(server.request("POST", "/reactors", '{"type":"counter"}',
                                  headers={"Content-Type": "text/plain"}), 415, "unsupported-media-type")
    # No content type, and curl's default form type, are read as JSON.
    assert server.request("POST", "/reactors", '{"type":"counter"}').status == 201
    assert server.request("POST", "/reactors", '{"type":"counter"}',
                          headers={"Content-Type": "application/x-www-form-urlencoded"}).status == 201


def test_unknown_route_and_method(server):
    assert_problem(server.request("GET", "/nope"), 404, "not-found")
    reply = server.request("PUT", "/reactors")
    assert_problem(reply, 405, "method-not-allowed")
    assert reply.header("Allow") == "POST"
    instance = server.create()
    reply = server.request("PATCH", f"/reactors/{instance['id']}")
    assert_problem(reply, 405, "method-not-allowed")
    assert set(reply.header("Allow").split(", ")) == {"GET", "DELETE", "HEAD"}
    assert_problem(server.request("GET", "/reactors/not-an-id"), 404, "unknown-instance")


def test_healthz_and_metrics(server):
    reply = server.request("GET", "/healthz")
    assert reply.status == 200 and reply.json() == {"status": "ok"}
    reply = server.request("GET", "/metrics")
    assert reply.status == 200 and reply.header("Content-Type").startswith("text/plain")
    for name in ("http_requests_total", "reactor_instances", "reactor_event_streams",
                 "reactor_actions_accepted_total"):
        assert name in reply.body.decode()


# --- actions ---------------------------------------------------------------------------------

def test_actions_are_accepted_and_waited_for(server):
    instance = server.create()
    path = f"/reactors/{instance['id']}/actions"
    first = server.request("POST", path, '"increase"')
    assert first.status == 202 and first.json() == {"seq": 1}
    waited = server.request("POST", path + "?wait=true", '"increase"')
    assert waited.status == 200, waited
    body = waited.json()
    # The waited action's own mutations are all reduced; the first action's delayed change may
    # still be in flight (mutations of different actions interleave, as flatMap does).
    assert body["state"]["value"] >= 1 and body["version"] >= 5
    assert waited.header("ETag") == f'"{body["version"]}"'
    assert server.request("POST", path + "?wait=false", '"decrease"').json() == {"seq": 3}
    # A case without payload also in its keyed form.
    assert server.request("POST", path, {"increase": {}}).json() == {"seq": 4}


def test_wait_timeout_answers_202(start_server):
    server = start_server("--counter-delay-ms", "5000", "--wait-timeout-ms", "100", "--stop-grace-s", "0")
    instance = server.create()
    started = time.monotonic()
    reply = server.request("POST", f"/reactors/{instance['id']}/actions?wait=true", '"increase"')
    assert reply.status == 202 and reply.json() == {"seq": 1}
    assert time.monotonic() - started < 4


def test_action_errors(server):
    instance = server.create()
    path = f"/reactors/{instance['id']}/actions"
    detail = assert_problem(server.request("POST", path, '"jump"'), 400, "invalid-action")["detail"]
    assert "jump" in detail
    # `curl -d increase`: the shell took the quotes, and the answer says how to keep them.
    detail = assert_problem(server.request("POST", path, "increase"), 400, "invalid-action")["detail"]
    assert detail.startswith("the body is not valid JSON: send the action 'increase' as a JSON string"), detail
    assert_problem(server.request("POST", path, ""), 400, "invalid-action")
    assert_problem(server.request("POST", path, "{"), 400, "invalid-action")
    assert_problem(server.request("POST", path, {"increase": {}, "decrease": {}}), 400, "invalid-action")
    assert_problem(server.request("POST", path + "?wait=maybe", '"increase"'), 400, "invalid-parameter")
    assert_problem(server.request("POST", path, '"increase"', headers={"Content-Type": "text/plain"}),
                   415, "unsupported-media-type")
    todo = server.create("todo")
    detail = assert_problem(server.request("POST", f"/reactors/{todo['id']}/actions", {"add": {}}),
                            400, "invalid-action")["detail"]
    assert "title" in detail
    # A number its field cannot hold is named as such, not as an unknown action.
    for number in ["1.5", "1e20"]:
        detail = assert_problem(server.request("POST", f"/reactors/{todo['id']}/actions",
                                               '{"move":{"from":%s,"to":0}}' % number), 400, "invalid-action")["detail"]
        assert detail.startswith("action 'move' holds a number its field cannot"), detail
    detail = assert_problem(server.request("POST", f"/reactors/{todo['id']}/actions", {"fly": {"to": 1}}),
                            400, "invalid-action")["detail"]
    assert detail == "unknown action 'fly'", detail
    assert_problem(server.request("POST", "/reactors/AAAAAAAAAAAAAAAAAAAAAA/actions", '"increase"'),
                   404, "unknown-instance")


def test_body_too_large(start_server):
    server = start_server("--max-body-bytes", "1024")
    instance = server.create()
    reply = server.request("POST", f"/reactors/{instance['id']}/actions", '"' + "x" * 4096 + '"')
    assert_problem(reply, 413, "body-too-large")


def test_too_many_instances(start_server):
    server = start_server("--max-instances", "2")
    server.create()
    server.create()
    reply = server.request("POST", "/reactors", {"type": "counter"})
    assert_problem(reply, 429, "too-many-instances")
    assert reply.header("Retry-After").isdigit()


# --- events ----------------------------------------------------------------------------------

def test_event_stream_sends_the_states_of_an_action(server):
    instance = server.create()
    stream = server.events(instance["id"])
    try:
        assert stream.status == 200
        assert stream.response_headers["Content-Type"].startswith("text/event-stream")
        first = stream.next()
        assert first.retry == 3000 and first.data == ""
        initial = stream.next()
        assert (initial.event, initial.id, initial.json()) == ("state", "0", COUNTER_INITIAL)
        server.request("POST", f"/reactors/{instance['id']}/actions", '"increase"')
        states = stream.states_until(lambda state: state["alertMessage"]["count"] == 1)
        versions = [int(event.id) for event in states]
        # Live subscribers may be sent only the latest of states published together.
        assert versions[-1] == 4 and versions == sorted(set(versions))
        assert states[-1].json() == {"alertMessage": {"count": 1, "value": "increased!"},
                                     "isLoading": False, "value": 1}
    finally:
        stream.close()
    # The history holds every state: one action gives exactly four.
    replay = server.events(instance["id"], headers={"Last-Event-ID": "0"})
    try:
        assert replay.next().retry == 3000
        states = [replay.next() for _ in range(4)]
        assert [event.id for event in states] == ["1", "2", "3", "4"]
        assert [(event.json()["isLoading"], event.json()["value"], event.json()["alertMessage"]["count"])
                for event in states] == [(True, 0, 0), (True, 1, 0), (False, 1, 0), (False, 1, 1)]
    finally:
        replay.close()


def test_resume_with_last_event_id(server):
    instance = server.create()
    path = f"/reactors/{instance['id']}/actions"
    # Both actions waited for in turn: the second's delayed change cannot interleave with the
    # first's (as it may when the first is still in flight), so it ends at exactly version 8.
    assert server.request("POST", path + "?wait=1", '"increase"').json()["version"] == 4
    assert server.request("POST", path + "?wait=1", '"increase"').json()["version"] == 8
    for headers, query in (({"Last-Event-ID": "5"}, ""), ({}, "?lastEventId=5")):
        stream = server.events(instance["id"], headers=headers, query=query)
        try:
            assert stream.next().retry == 3000
            assert [stream.next().id for _ in range(3)] == ["6", "7", "8"]
        finally:
            stream.close()
    # Nothing missed: no state until a new one.
    stream = server.events(instance["id"], headers={"Last-Event-ID": "8"})
    try:
        assert stream.next().retry == 3000
        server.request("POST", path, '"decrease"')
        assert stream.next().id == "9"
    finally:
        stream.close()


def test_resume_beyond_history_gets_a_fresh_snapshot(start_server):
    server = start_server("--history-size", "4")
    instance = server.create()
    server.request("POST", f"/reactors/{instance['id']}/actions?wait=true", '"increase"')
    server.request("POST", f"/reactors/{instance['id']}/actions?wait=true", '"increase"')
    stream = server.events(instance["id"], headers={"Last-Event-ID": "1"})
    try:
        assert stream.next().retry == 3000
        snapshot = stream.next()
        assert snapshot.id == "8" and snapshot.json()["value"] == 2
    finally:
        stream.close()


def test_resume_from_the_latest_version_without_a_history_sends_only_what_follows(start_server):
    server = start_server("--history-size", "0")
    instance = server.create()
    path = f"/reactors/{instance['id']}/actions?wait=true"
    assert server.request("POST", path, '"increase"').json()["version"] == 4
    stream = server.events(instance["id"], headers={"Last-Event-ID": "4"})
    try:
        assert stream.next().retry == 3000
        # Nothing is replayed: the client has version 4. The next event is the next version.
        server.request("POST", path, '"increase"')
        assert stream.next(timeout=5).id == "5"
    finally:
        stream.close()


def test_resume_from_an_unknown_future_version_is_told_so_then_gets_a_fresh_snapshot(server):
    instance = server.create()
    stream = server.events(instance["id"], headers={"Last-Event-ID": "999"})
    try:
        assert stream.next().retry == 3000
        told = stream.next(timeout=2)
        assert (told.event, told.id, told.json()) == ("rewound", None, {"lastEventId": 999, "version": 0})
        assert stream.next(timeout=2).id == "0"
    finally:
        stream.close()


def test_bad_last_event_id(server):
    instance = server.create()
    for value in ("abc", "-1", "1.5", "99999999999999999999999"):
        reply = server.request("GET", f"/reactors/{instance['id']}/events", headers={"Last-Event-ID": value})
        assert_problem(reply, 400, "invalid-parameter")
    assert_problem(server.request("GET", f"/reactors/{instance['id']}/events?lastEventId=x"),
                   400, "invalid-parameter")
    # A version fits 64 bits, as openapi.yaml's bounds say: the largest one opens a stream.
    assert_problem(server.request("GET", f"/reactors/{instance['id']}/events?lastEventId=18446744073709551616"),
                   400, "invalid-parameter")
    for headers, query in (({"Last-Event-ID": "18446744073709551615"}, ""), ({}, "?lastEventId=18446744073709551615")):
        stream = server.events(instance["id"], headers=headers, query=query)
        try:
            assert stream.status == 200, (headers, query)
        finally:
            stream.close()
    # lastEventId must be digits (an integer in openapi.yaml), empty included, even when the header wins.
    for query in ("", "+5", "%205"):
        assert_problem(server.request("GET", f"/reactors/{instance['id']}/events?lastEventId={query}"),
                       400, "invalid-parameter")
        assert_problem(server.request("GET", f"/reactors/{instance['id']}/events?lastEventId={query}",
                                      headers={"Last-Event-ID": "0"}), 400, "invalid-parameter")
    # An empty header counts as absent: the stream starts with the current state.
    stream = server.events(instance["id"], headers={"Last-Event-ID": ""})
    try:
        assert stream.status == 200
        assert stream.next().retry == 3000
        assert stream.next().id == "0"
    finally:
        stream.close()
    assert_problem(server.request("GET", "/reactors/AAAAAAAAAAAAAAAAAAAAAA/events"), 404, "unknown-instance")


def test_delete_ends_streams(server):
    instance = server.create()
    stream = server.events(instance["id"])
    try:
        assert stream.next().retry == 3000
        assert stream.next().id == "0"
        assert server.request("DELETE", f"/reactors/{instance['id']}").status == 204
        end = stream.next()
        assert (end.event, end.json()) == ("end", {"reason": "deleted"})
        assert stream.next() is None
    finally:
        stream.close()


def test_stream_limits(start_server):
    server = start_server("--max-streams", "2", "--max-streams-per-instance", "1")
    first, second = server.create(), server.create()
    streams = [server.events(first["id"])]
    try:
        assert streams[0].next().retry == 3000
        reply = server.request("GET", f"/reactors/{first['id']}/events")
        assert_problem(reply, 429, "too-many-streams")
        assert reply.header("Retry-After").isdigit()
        streams.append(server.events(second["id"]))
        assert streams[1].next().retry == 3000
        third = server.create()
        reply = server.request("GET", f"/reactors/{third['id']}/events")
        assert_problem(reply, 503, "too-many-streams")
        assert reply.header("Retry-After").isdigit()
    finally:
        for stream in streams:
            stream.close()


def test_a_stream_its_client_left_frees_its_place_at_once(start_server):
    # An idle stream's only write is its heartbeat (a minute here): the server notices the client
    # leave without it, so a reloaded page finds the instance's one place free again.
    server = start_server("--max-streams-per-instance", "1", "--heartbeat-s", "60")
    instance = server.create()
    for _ in range(3):
        stream = server.events(instance["id"])
        try:
            assert stream.status == 200, stream.body
            assert stream.next().retry == 3000
            assert stream.next().id == "0"
        finally:
            stream.close()
        wait_for(lambda: server.metric("reactor_event_streams") == 0, 5, "the server to end the stream its client left")


def test_heartbeat_comments(start_server):
    server = start_server("--heartbeat-s", "1")
    instance = server.create()
    stream = server.events(instance["id"])
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            event = stream.next(timeout=5, include_comments=True)
            if event.event == "comment":
                assert event.comment == "heartbeat"
                break
        else:
            pytest.fail("no heartbeat within 5 s")
    finally:
        stream.close()


# --- the other examples ----------------------------------------------------------------------

def test_todo_and_its_mutation_errors(server):
    todo = server.create("todo")
    assert todo["state"] == {"tasks": []}
    path = f"/reactors/{todo['id']}/actions"
    stream = server.events(todo["id"])
    try:
        stream.next()
        stream.next()
        added = server.request("POST", path + "?wait=true", {"add": {"title": "milk"}}).json()
        task = added["state"]["tasks"][0]
        assert task["title"] == "milk" and task["isDone"] is False
        server.request("POST", path, {"toggle": {"id": task["id"]}})
        server.request("POST", path, {"toggle": {"id": "missing"}})
        events = []
        while not events or events[-1].event != "error":
            events.append(stream.next())
        error = events[-1].json()
        assert error["type"] == PROBLEM + "mutation-failed" and error["action"] == 3
        assert "missing" in error["detail"]
        assert server.request("GET", f"/reactors/{todo['id']}").json()["state"]["tasks"][0]["isDone"] is True
    finally:
        stream.close()


def test_search(server):
    search = server.create("search")
    path = f"/reactors/{search['id']}/actions"
    reply = server.request("POST", path + "?wait=true", {"updateQuery": {"query": "swift"}})
    state = reply.json()["state"]
    assert state["query"] == "swift" and len(state["results"]) == 20 and state["nextPage"] == 2
    state = server.request("POST", path + "?wait=true", '"loadNextPage"').json()["state"]
    assert len(state["results"]) > 20 and state["isLoadingNextPage"] is False


def test_room_message_reaches_other_instances(server):
    alice, bob = server.create("room"), server.create("room")
    stream = server.events(bob["id"])
    try:
        server.request("POST", f"/reactors/{alice['id']}/actions?wait=true", {"setName": {"name": "alice"}})
        server.request("POST", f"/reactors/{alice['id']}/actions", {"say": {"text": "hello bob"}})
        states = stream.states_until(lambda state: any(message["text"] == "hello bob"
                                                       for message in state["messages"]))
        message = [m for m in states[-1].json()["messages"] if m["text"] == "hello bob"][0]
        assert message["author"] == "alice"
    finally:
        stream.close()


# --- load, expiry, shutdown ------------------------------------------------------------------

def test_concurrent_clients_apply_every_action_once_in_order(start_server):
    clients, actions = 32, 200
    server = start_server("--counter-delay-ms", "0")
    instance = server.create()
    expected_version = clients * actions * 4
    subscribers = [server.events(instance["id"]) for _ in range(4)]
    seen: list[list[int]] = [[] for _ in subscribers]

    def follow(index: int) -> None:
        while True:
            event = subscribers[index].next(timeout=120)
            if event is None or event.event == "end":
                return
            if event.event == "state":
                seen[index].append(int(event.id))
                if int(event.id) == expected_version:
                    return

    def send_all(failures: list) -> None:
        connection = http.client.HTTPConnection(server.host, server.port, timeout=30)
        try:
            for _ in range(actions):
                connection.request("POST", f"/reactors/{instance['id']}/actions", body=b'"increase"')
                response = connection.getresponse()
                response.read()
                if response.status != 202:
                    failures.append(response.status)
        finally:
            connection.close()

    followers = [threading.Thread(target=follow, args=(index,)) for index in range(len(subscribers))]
    failures: list = []
    senders = [threading.Thread(target=send_all, args=(failures,)) for _ in range(clients)]
    try:
        for thread in followers + senders:
            thread.start()
        for thread in senders + followers:
            thread.join(timeout=180)
        assert not failures
        final = server.request("GET", f"/reactors/{instance['id']}").json()
        assert final["state"]["value"] == clients * actions
        assert final["version"] == expected_version
        for versions in seen:
            assert versions and versions[-1] == expected_version
            assert all(a < b for a, b in zip(versions, versions[1:]))
    finally:
        for stream in subscribers:
            stream.close()


def test_idle_instances_expire(start_server):
    server = start_server("--idle-timeout-s", "1")
    instance = server.create()
    deadline = time.monotonic() + 10
    while server.metric("reactor_instances") != 0:
        assert time.monotonic() < deadline, "the idle instance did not expire within 10 s"
        time.sleep(0.1)
    assert_problem(server.request("GET", f"/reactors/{instance['id']}"), 404, "unknown-instance")


def test_sigterm_ends_streams_and_exits_zero(start_server):
    server = start_server()
    instance = server.create()
    stream = server.events(instance["id"])
    assert stream.next().retry == 3000
    assert stream.next().id == "0"
    server.signal(signal.SIGTERM)
    end = stream.next(timeout=15)
    assert (end.event, end.json()) == ("end", {"reason": "shutdown"})
    assert stream.next(timeout=15) is None
    assert server.wait(timeout=15) == 0


def test_each_request_is_logged_at_debug_level_only(start_server):
    quiet = start_server("--log-level", "info")
    chatty = start_server("--log-level", "debug")
    for instance in (quiet, chatty):
        assert instance.request("GET", "/healthz").status == 200
        assert instance.request("GET", "/nowhere").status == 404
    lines = [line for line in chatty.stderr().splitlines() if line.endswith(" request")]
    assert any("path=/healthz" in line and "status=200" in line for line in lines), chatty.stderr()
    assert any("path=/nowhere" in line and "status=404" in line for line in lines), chatty.stderr()
    assert "path=/healthz" not in quiet.stderr()
