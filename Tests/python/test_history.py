"""GET /reactors/{id}/history end to end: the kept versions with the action behind each, the
recent actions, and what a restart on a durable store keeps of them (the versions and which
action produced each; the actions themselves and the times live in memory). The store keeps every
version of a commit while the session has an event stream open; without one, only the commit's
last (nobody can have been shown the others). A stored version whose JSON is damaged is never sent
again, nor any before it."""

import json
import sqlite3
import struct

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


def watched_counter(start_server, actions: int):
    """A server on a new store, and a counter there that took `actions` increases while an event
    stream was open (so the store kept every version)."""
    store = new_store("reactor-history-")
    server = start_server(store=store)
    counter = server.create("counter")["id"]
    stream = server.events(counter)
    try:
        for _ in range(actions):
            assert server.request("POST", f"/reactors/{counter}/actions?wait=true", '"increase"').status == 200
    finally:
        stream.close()
    return store, server, counter


def test_after_a_restart_the_versions_keep_their_action_and_new_actions_are_named(start_server):
    store, first, counter = watched_counter(start_server, 1)
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


def damage_stored_version(path: str, instance_id: str, version: int, json_bytes: bytes) -> int:
    """Replaces one stored version's JSON in a stopped server's SQLite store, in the history rows
    and the journal's (which hold a session's versions as chunks: for each, its version, the action
    that produced it and its state's length as 8 + 8 + 4 bytes little-endian, then the state).
    Returns how many rows held it."""
    def entries(blob: bytes) -> list[tuple[int, int, bytes]]:
        found, offset = [], 0
        while offset < len(blob):
            number, produced_by, length = struct.unpack_from("<QQI", blob, offset)
            found.append((number, produced_by, blob[offset + 20:offset + 20 + length]))
            offset += 20 + length
        return found

    changed = 0
    with sqlite3.connect(path) as database:
        for table, key in (("history", "first_version"), ("journal", "slot")):
            rows = database.execute(
                f"SELECT {key}, versions FROM {table} WHERE id = ? AND first_version <= ? AND last_version >= ?",
                (instance_id, version, version)).fetchall()
            for row_key, blob in rows:
                chunk = b"".join(struct.pack("<QQI", number, produced_by, len(state if number != version else json_bytes))
                                 + (state if number != version else json_bytes)
                                 for number, produced_by, state in entries(blob))
                database.execute(f"UPDATE {table} SET versions = ? WHERE id = ? AND {key} = ?", (chunk, instance_id, row_key))
                changed += 1
    return changed


def test_a_damaged_stored_version_is_not_sent_again_nor_any_before_it(start_server):
    store, first, counter = watched_counter(start_server, 2)
    before = history(first, counter)["versions"]
    assert [entry["version"] for entry in before] == list(range(9))
    assert first.stop() == 0

    # Version 3, damaged so that sent as stored it would end its event early and add one.
    assert damage_stored_version(store.removeprefix("sqlite:"), counter, 3,
                                 b'{}\n\nevent: end\ndata: {"reason":"deleted"}') >= 1
    second = start_server(store=store)
    # The versions after it are sent again as they were.
    replayed = second.events(counter, headers={"Last-Event-ID": "4"})
    try:
        retry, *sent = [replayed.next() for _ in range(5)]
    finally:
        replayed.close()
    assert retry.retry is not None
    assert [(event.event, int(event.id), event.json()) for event in sent] == \
        [("state", entry["version"], entry["state"]) for entry in before[5:]]
    # From before it, the client gets the latest state, then what follows; never the damage.
    resumed = second.events(counter, headers={"Last-Event-ID": "1"})
    try:
        assert second.request("POST", f"/reactors/{counter}/actions?wait=true", '"increase"').status == 200
        events = []
        while not events or events[-1].event != "state" or int(events[-1].id) < 12:
            event = resumed.next(include_comments=True)
            assert event is not None, events
            events.append(event)
    finally:
        resumed.close()
    assert [event.comment for event in events if event.event == "comment"][:1] == ["snapshot"]
    states = [event for event in events if event.event != "comment" and event.retry is None]
    assert {event.event for event in states} == {"state"}, states
    assert [int(event.id) for event in states] == list(range(8, 13))
    assert states[0].json() == before[8]["state"]
    # The history route leaves them out too, and its answer parses.
    assert [entry["version"] for entry in history(second, counter)["versions"]] == list(range(4, 13))
    log = second.stderr()
    assert "the stored history of a session is damaged" in log and "damaged-version=3" in log, log
    assert counter not in log
