"""GET /reactors/{id}/history end to end: the kept versions with the action behind each, the
recent actions, and what a restart on a durable store keeps of them (the versions and which
action produced each; the actions themselves and the times live in memory). The store keeps every
version of a commit while the session has an event stream open; without one, only the commit's
last (nobody can have been shown the others)."""

import json

from conftest import new_store


def history(server, instance_id: str, after: int | None = None) -> dict:
    query = "" if after is None else f"?after={after}"
    reply = server.request("GET", f"/reactors/{instance_id}/history{query}")
    assert reply.status == 200, reply
    assert reply.header("Cache-Control") == "no-store"
    return reply.json()


def test_versions_name_their_action_and_match_the_stream(server):
    counter = server.create("counter")["id"]
    stream = server.events(counter)
    try:
        for action in ['"increase"', '"decrease"']:
            assert server.request("POST", f"/reactors/{counter}/actions?wait=true", action).status == 200
        streamed = stream.states_until(lambda state: state["alertMessage"]["count"] == 2)
    finally:
        stream.close()
    kept = history(server, counter)
    assert kept["version"] == 8
    versions = kept["versions"]
    assert [entry["version"] for entry in versions] == list(range(9))
    assert [entry["seq"] for entry in versions] == [None, 1, 1, 1, 1, 2, 2, 2, 2]
    # The states are the ones the stream sent, byte for byte once re-encoded the same way.
    by_version = {int(event.id): json.loads(event.data) for event in streamed}
    for entry in versions:
        if entry["version"] in by_version:
            assert entry["state"] == by_version[entry["version"]]
    assert [(action["seq"], action["action"]) for action in kept["actions"]] == [(1, "increase"), (2, "decrease")]
    # Times are in order: an action is accepted before the versions it produced are published.
    first_action_at = kept["actions"][0]["at"]
    assert all(entry["at"] >= first_action_at for entry in versions[1:5])
    assert [entry["version"] for entry in history(server, counter, after=6)["versions"]] == [7, 8]


def test_a_refused_action_is_not_in_the_history(server):
    todo = server.create("todo")["id"]
    assert server.request("POST", f"/reactors/{todo}/actions", '"fly"').status == 400
    assert server.request("POST", f"/reactors/{todo}/actions?wait=true", {"add": {"title": "milk"}}).status == 200
    kept = history(server, todo)
    assert [action["action"] for action in kept["actions"]] == [{"add": {"title": "milk"}}]


def test_after_a_restart_the_versions_keep_their_action_and_new_actions_are_named(start_server):
    store = new_store("reactor-history-")
    first = start_server(store=store)
    counter = first.create("counter")["id"]
    stream = first.events(counter)
    try:
        assert first.request("POST", f"/reactors/{counter}/actions?wait=true", '"increase"').status == 200
    finally:
        stream.close()
    before = history(first, counter)
    assert [entry["version"] for entry in before["versions"]] == list(range(5))
    assert first.stop() == 0

    second = start_server(store=store)
    restored = history(second, counter)
    assert [(entry["version"], entry["seq"], entry["state"]) for entry in restored["versions"]] == \
        [(entry["version"], entry["seq"], entry["state"]) for entry in before["versions"]]
    # When each was published, and the actions themselves, are kept in memory only.
    assert all(entry["at"] is None for entry in restored["versions"])
    assert restored["actions"] == []
    assert second.request("POST", f"/reactors/{counter}/actions?wait=true", '"increase"').status == 200
    after = history(second, counter, after=before["version"])
    assert [entry["seq"] for entry in after["versions"]] == [2, 2, 2, 2]
    assert [action["seq"] for action in after["actions"]] == [2]


def test_after_a_restart_an_unwatched_session_keeps_the_last_version_of_each_commit(start_server):
    store = new_store("reactor-history-")
    first = start_server("--counter-delay-ms", "0", store=store)
    counter = first.create("counter")["id"]
    # Without a delay an action's four states are published together; where a commit holds all
    # of them and the action's end, it keeps the last only (which commits do depends on timing:
    # PendingVersionTests pins the rule itself). Twenty actions make such commits certain.
    for _ in range(19):
        assert first.request("POST", f"/reactors/{counter}/actions", '"increase"').status == 202
    assert first.request("POST", f"/reactors/{counter}/actions?wait=true", '"increase"').status == 200
    before = [entry["version"] for entry in history(first, counter)["versions"]]
    assert before == list(range(81))
    assert first.stop() == 0

    second = start_server("--counter-delay-ms", "0", store=store)
    restored = history(second, counter)["versions"]
    kept = [entry["version"] for entry in restored]
    assert kept[0] == 0 and kept[-1] == 80 and set(kept) < set(before), kept
    assert restored[-1]["state"]["value"] == 20 and restored[-1]["seq"] == 20
    # A stream resuming from a version the store did not keep is sent only kept versions after
    # it (the history's, when they reach the latest without a gap before it; else the latest).
    dropped = max(set(before) - set(kept))
    # Read up to the latest version itself: a kept version before it may already show value 20.
    stream = second.events(counter, headers={"Last-Event-ID": str(dropped)})
    sent: list[int] = []
    try:
        while not sent or sent[-1] < kept[-1]:
            event = stream.next(timeout=10.0)
            assert event is not None, f"stream ended after {sent}"
            if event.event == "state":
                sent.append(int(event.id))
    finally:
        stream.close()
    assert sent[-1] == 80 and all(version in kept and version > dropped for version in sent), (dropped, sent, kept)
