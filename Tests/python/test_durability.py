"""Durable sessions end to end: real servers on one SQLite store, restarted cleanly or killed
with SIGKILL, and real clients counting what was acknowledged."""

from __future__ import annotations

import http.client
import json
import os
import re
import resource
import signal
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import Server, new_store, new_store_directory, request, server_binary
from faults_support import wait_for


def fresh_store() -> str:
    return new_store("reactor-durable-")


def kill(server: Server) -> None:
    """SIGKILL, as a crash: nothing gets to run in the server."""
    os.kill(server.process.pid, signal.SIGKILL)
    server.process.wait(timeout=10)
    server.stop()


def state_of(server: Server, instance_id: str) -> dict:
    reply = server.request("GET", f"/reactors/{instance_id}")
    assert reply.status == 200, reply
    return reply.json()


def settled_state(server: Server, instance_id: str) -> dict:
    """The instance's snapshot once it stops loading (bounded): a counter's value changes before
    its loading state ends."""
    return wait_for(lambda: (lambda snapshot: snapshot if not snapshot["state"]["isLoading"] else None)(
        state_of(server, instance_id)), timeout=15, what=f"instance {instance_id[:4]}… to stop loading")


def test_a_clean_restart_keeps_versions_states_and_history(start_server):
    store = fresh_store()
    first = start_server(store=store)
    counter = first.create("counter")["id"]
    stream = first.events(counter)
    for _ in range(3):
        reply = first.request("POST", f"/reactors/{counter}/actions?wait=true", '"increase"')
        assert reply.status == 200, reply
    before = state_of(first, counter)
    seen = stream.states_until(lambda state: state["value"] == 3 and state["alertMessage"]["count"] == 3)
    stream.close()
    deleted = first.create("counter")["id"]
    assert first.request("DELETE", f"/reactors/{deleted}").status == 204
    deleted_while_stored = first.create("counter")["id"]
    assert first.stop() == 0

    second = start_server(store=store)
    assert state_of(second, counter) == before
    assert second.request("GET", f"/reactors/{deleted}").status == 404
    # One kept only in the store, not in memory, is deleted from the store too.
    assert second.request("DELETE", f"/reactors/{deleted_while_stored}").status == 204
    assert second.request("GET", f"/reactors/{deleted_while_stored}").status == 404
    # Last-Event-ID replays the versions after it from the stored history, byte for byte.
    resumed = second.events(counter, headers={"Last-Event-ID": "1"})
    replayed = resumed.states_until(lambda state: state["alertMessage"]["count"] == 3)
    resumed.close()
    assert [(event.id, event.data) for event in replayed] == [(event.id, event.data) for event in seen if int(event.id) > 1]
    # New actions continue the same versions.
    reply = second.request("POST", f"/reactors/{counter}/actions?wait=true", '"decrease"')
    assert reply.status == 200 and reply.json()["version"] == before["version"] + 4
    assert reply.json()["state"]["value"] == 2
    assert second.stop() == 0
    third = start_server(store=store)
    assert third.request("GET", f"/reactors/{deleted_while_stored}").status == 404


def test_a_state_stored_by_an_earlier_build_is_read_and_one_that_no_longer_decodes_is_kept(start_server):
    store = fresh_store()
    first = start_server("--counter-delay-ms", "0", store=store)
    older, unreadable = first.create("counter")["id"], first.create("counter")["id"]
    assert first.request("POST", f"/reactors/{older}/actions?wait=true", '"increase"').status == 200
    version = state_of(first, older)["version"]
    assert first.stop() == 0
    # As an earlier build of the counter stored them: one with only a value, one whose value
    # was a string then. (The session's newest state is in its row, as the journal's rows are
    # once folded.)
    path = store.removeprefix("sqlite:")
    with sqlite3.connect(path) as database:
        database.execute("DELETE FROM journal")
        database.execute("UPDATE sessions SET state = ?, version = ? WHERE id = ?", (b'{"value":41}', version, older))
        database.execute("UPDATE sessions SET state = ? WHERE id = ?", (b'{"value":"many"}', unreadable))
    database.close()

    second = start_server("--counter-delay-ms", "0", store=store)
    # The keys the stored state lacks come from the initial state; the version stays.
    assert state_of(second, older) == {"id": older, "type": "counter", "version": version, "state": {
        "alertMessage": {"count": 0, "value": None}, "isLoading": False, "value": 41}}
    reply = second.request("POST", f"/reactors/{older}/actions?wait=true", '"increase"')
    assert reply.status == 200 and reply.json()["state"]["value"] == 42, reply
    # One that still does not decode is refused, clearly, for reads and actions alike.
    for method, route, body in [("GET", "", None), ("POST", "/actions", '"increase"'), ("GET", "/events", None)]:
        refused = second.request(method, f"/reactors/{unreadable}{route}", body)
        assert refused.status == 500 and refused.header("Content-Type") == "application/problem+json", refused
        problem = refused.json()
        assert problem["type"] == "urn:reactor-server:problem:stored-session-incompatible", problem
        assert "wrong type at 'value'" in problem["detail"]
        assert refused.header("Retry-After") is None
    assert second.request("GET", "/healthz").status == 200
    assert second.metric("reactor_store_incompatible_activations_total") == 3
    assert second.stop() == 0
    log = second.stderr()
    assert "no longer decodes" in log and unreadable not in log
    # It is kept exactly as it was, and the refused action was not accepted.
    with sqlite3.connect(path) as database:
        assert database.execute("SELECT state FROM sessions WHERE id = ?", (unreadable,)).fetchone() == (b'{"value":"many"}',)
        assert database.execute("SELECT count(*) FROM actions WHERE id = ?", (unreadable,)).fetchone() == (0,)
    database.close()
    # Its owner can still delete it.
    third = start_server("--counter-delay-ms", "0", store=store)
    assert third.request("DELETE", f"/reactors/{unreadable}").status == 204
    assert third.request("GET", f"/reactors/{unreadable}").status == 404


class Hammer(threading.Thread):
    """Posts increases to its counters until stopped; counts what was acknowledged (202) and what
    got no answer (the server died under it)."""

    def __init__(self, server: Server, counters: list[str], stop: threading.Event, seed: int) -> None:
        super().__init__(daemon=True)
        self.server, self.counters, self.stop_event, self.seed = server, counters, stop, seed
        self.acknowledged = {counter: 0 for counter in counters}
        self.unanswered = {counter: 0 for counter in counters}
        self.sent = 0

    def run(self) -> None:
        index = self.seed
        connection = http.client.HTTPConnection(self.server.host, self.server.port, timeout=5)
        while not self.stop_event.is_set() and self.sent < 20_000:
            counter = self.counters[index % len(self.counters)]
            index += 7
            self.sent += 1
            try:
                connection.request("POST", f"/reactors/{counter}/actions", body=b'"increase"')
                response = connection.getresponse()
                response.read()
                if response.status == 202:
                    self.acknowledged[counter] += 1
                else:
                    raise AssertionError(f"unexpected {response.status}")
            except (OSError, http.client.HTTPException):
                self.unanswered[counter] += 1
                return


def hammer_until_killed(server: Server, counters: list[str], clients: int, acknowledged: int) -> list[Hammer]:
    """Has `clients` hammers post to `counters` until `acknowledged` actions were acknowledged
    (bounded), then kills the server (SIGKILL) and stops them. Returns them, with their counts."""
    stop = threading.Event()
    hammers = [Hammer(server, counters, stop, seed) for seed in range(clients)]
    for hammer in hammers:
        hammer.start()
    wait_for(lambda: sum(sum(h.acknowledged.values()) for h in hammers) >= acknowledged, timeout=30,
             what=f"{acknowledged:,} acknowledged actions")
    kill(server)
    stop.set()
    for hammer in hammers:
        hammer.join(timeout=10)
    return hammers


def first_error(stream):
    """The stream's first `error` event (None if it ends first)."""
    report = stream.next()
    while report is not None and report.event != "error":
        report = stream.next()
    return report


def restored_actions(server: Server, outcome: str) -> float:
    """reactor_store_restored_actions_total for one outcome."""
    text = server.request("GET", "/metrics").body.decode()
    match = re.search(rf'^reactor_store_restored_actions_total{{outcome="{outcome}"}} ([0-9.e+-]+)$', text, flags=re.M)
    assert match, f"no restored_actions series for {outcome}:\n{text}"
    return float(match.group(1))


def test_each_pending_action_an_activation_finds_is_counted_by_what_became_of_it(start_server):
    """The records a crash leaves in the store, as the store holds them: an action that had not
    started, one cut off mid-flight, one a restart was already running again when the process
    ended again, one that no longer decodes. Each activation reports them and counts them in
    /metrics by outcome; only the first is sent."""
    store = fresh_store()
    first = start_server("--counter-delay-ms", "0", store=store)
    counters = [first.create("counter")["id"] for _ in range(4)]
    for counter in counters:
        assert first.request("POST", f"/reactors/{counter}/actions?wait=true", '"increase"').status == 200
    assert first.stop() == 0
    unstarted, cut_off, attempted, undecodable = counters
    with sqlite3.connect(store.removeprefix("sqlite:")) as database:
        database.executemany("INSERT INTO actions(id, seq, action, attempts) VALUES (?, ?, ?, ?)", [
            (unstarted, 2, b'"increase"', 0),
            (cut_off, 1, b'"increase"', 0),
            (attempted, 2, b'"increase"', 1),
            (undecodable, 2, b'"explode"', 0),
        ])
    database.close()

    second = start_server("--counter-delay-ms", "0", store=store)
    for outcome in ("sent_again", "interrupted", "abandoned", "undecodable"):
        assert restored_actions(second, outcome) == 0
    streams = {counter: second.events(counter) for counter in counters}
    for counter, error_type in ((cut_off, "InterruptedAction"), (attempted, "AbandonedAction"),
                                (undecodable, "UndecodableAction")):
        report = first_error(streams[counter])
        assert report is not None and report.json()["errorType"] == error_type, report
    for stream in streams.values():
        stream.close()
    assert {outcome: restored_actions(second, outcome) for outcome in ("sent_again", "interrupted", "abandoned", "undecodable")} \
        == {"sent_again": 1, "interrupted": 1, "abandoned": 1, "undecodable": 1}
    assert settled_state(second, unstarted)["state"]["value"] == 2
    for counter in (attempted, undecodable):
        assert state_of(second, counter)["state"]["value"] == 1
    # Each record is settled: the next start finds nothing pending.
    assert second.stop() == 0
    third = start_server("--counter-delay-ms", "0", store=store)
    for counter in counters:
        state_of(third, counter)
    assert sum(restored_actions(third, outcome) for outcome in ("sent_again", "interrupted", "abandoned", "undecodable")) == 0


def test_an_action_that_ends_the_process_ends_it_at_most_twice(start_server):
    """Real traps in a real server: a counter whose value (as a long-lived one could hold) is at
    Int.max overflows in `reduce` when its value goes up, which ends the process.
    - One acknowledged as the process serves ends it; the next start hands the cut-off action to
      the recovery hook, which makes the same change and ends the process again; then the
      session serves on (its record is dropped as the hook is called, so nothing is left to
      run, or, had that drop not reached the disk first, the action is abandoned).
    - One a start sends again (acknowledged, never started) ends that start; the start after it
      abandons the action: reported, counted, not run; and serves on, that session included."""
    store = fresh_store()
    first = start_server("--counter-delay-ms", "0", store=store)
    served, resent = first.create("counter")["id"], first.create("counter")["id"]
    for counter in (served, resent):
        assert first.request("POST", f"/reactors/{counter}/actions?wait=true", '"increase"').status == 200
    versions = {counter: state_of(first, counter)["version"] for counter in (served, resent)}
    assert first.stop() == 0
    path = store.removeprefix("sqlite:")
    with sqlite3.connect(path) as database:
        database.execute("DELETE FROM journal")
        for counter, version in versions.items():
            database.execute("UPDATE sessions SET state = ?, version = ?, started_through = 1 WHERE id = ?",
                             (b'{"value":9223372036854775807}', version, counter))
        # Accepted, never started: the next activation sends it again.
        database.execute("INSERT INTO actions(id, seq, action) VALUES (?, 2, ?)", (resent, b'"increase"'))
    database.close()

    def no_core_file() -> None:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    def ends(server: Server, what: str) -> None:
        assert server.process.wait(timeout=60) < 0, f"{what} did not end the process"
        server.stop()

    def request_until_it_ends(server: Server, route: str) -> None:
        try:
            server.request("GET", route)
        except OSError:
            pass  # the process may end before it answers

    # Acknowledged, shows its loading state; 300 ms later its change overflows.
    second = start_server("--counter-delay-ms", "300", store=store, preexec_fn=no_core_file)
    stream = second.events(served)
    assert second.request("POST", f"/reactors/{served}/actions", '"increase"').status == 202
    stream.states_until(lambda state: state["isLoading"])
    ends(second, "the overflow")
    # The recovery hook makes the same change.
    third = start_server("--counter-delay-ms", "300", store=store, preexec_fn=no_core_file)
    request_until_it_ends(third, f"/reactors/{served}")
    ends(third, "the recovery hook's overflow")
    # The action sent again makes it too.
    fourth = start_server("--counter-delay-ms", "300", store=store, preexec_fn=no_core_file)
    request_until_it_ends(fourth, f"/reactors/{resent}")
    ends(fourth, "the overflow of the action sent again")

    fifth = start_server("--counter-delay-ms", "0", store=store)
    errors = fifth.events(resent)
    report = first_error(errors)
    assert report is not None and report.json()["errorType"] == "AbandonedAction" and report.json()["action"] == 2, report
    errors.close()
    for counter in (resent, served):
        assert state_of(fifth, counter)["state"]["value"] == 9223372036854775807
        reply = fifth.request("POST", f"/reactors/{counter}/actions?wait=true", '"decrease"')
        assert reply.status == 200 and reply.json()["state"]["value"] == 9223372036854775806, reply
    counted = restored_actions(fifth, "abandoned")
    assert counted in (1, 2)
    assert restored_actions(fifth, "sent_again") == restored_actions(fifth, "interrupted") == 0
    assert fifth.process.poll() is None
    assert fifth.stop() == 0
    abandoned = [line for line in fifth.stderr().splitlines() if "not run again" in line]
    assert len(abandoned) == counted, abandoned
    assert not any(counter in line for line in abandoned for counter in (served, resent)), abandoned


def test_kill_during_load_loses_nothing_acknowledged(start_server):
    store = fresh_store()
    server = start_server("--counter-delay-ms", "0", store=store)
    counters = [server.create("counter")["id"] for _ in range(20)]
    hammers = hammer_until_killed(server, counters, clients=32, acknowledged=2000)

    restarted = start_server("--counter-delay-ms", "0", store=store)
    total_acknowledged = 0
    for counter in counters:
        acknowledged = sum(hammer.acknowledged[counter] for hammer in hammers)
        unanswered = sum(hammer.unanswered[counter] for hammer in hammers)
        total_acknowledged += acknowledged
        # The first request activates the counter, which sends its unstarted acknowledged actions
        # again; with no delay they apply in order, so one more action, waited for, comes after them.
        probe = restarted.request("POST", f"/reactors/{counter}/actions?wait=true", '"increase"')
        assert probe.status == 200, probe
        state = probe.json()["state"]
        value = state["value"] - 1
        assert acknowledged <= value <= acknowledged + unanswered, (counter[:4], acknowledged, unanswered, state)
        assert state["isLoading"] is False
    assert total_acknowledged >= 2000


def test_kill_during_async_load_never_shows_a_version_number_with_two_states(start_server):
    store = fresh_store()
    server = start_server("--counter-delay-ms", "0", "--durability", "async", store=store)
    counters = [server.create("counter")["id"] for _ in range(4)]
    streams = {counter: server.events(counter) for counter in counters}
    hammer_until_killed(server, counters, clients=16, acknowledged=1000)
    # Every state each stream was shown before the crash (conflated under load, so some versions
    # are missing), by version.
    shown: dict[str, dict[int, str]] = {}
    for counter, stream in streams.items():
        shown[counter] = {}
        while (event := stream.next(timeout=10)) is not None:
            if event.event == "state":
                shown[counter][int(event.id)] = event.data
    assert all(len(states) > 10 for states in shown.values()), {c[:4]: len(s) for c, s in shown.items()}

    restarted = start_server("--counter-delay-ms", "0", store=store)
    for counter in counters:
        resumed = state_of(restarted, counter)["version"]
        assert resumed > max(shown[counter]), (counter[:4], resumed, max(shown[counter]))
        stream = restarted.events(counter, headers={"Last-Event-ID": str(resumed)})
        assert restarted.request("POST", f"/reactors/{counter}/actions?wait=true", '"decrease"').status == 200
        after = stream.states_until(lambda state: not state["isLoading"] and state["alertMessage"]["value"] == "decreased!")
        stream.close()
        reused = [int(event.id) for event in after
                  if int(event.id) in shown[counter] and shown[counter][int(event.id)] != event.data]
        assert reused == [], (counter[:4], reused)


def test_kill_mid_flight_finishes_every_acknowledged_action_once(start_server):
    store = fresh_store()
    server = start_server("--counter-delay-ms", "300", store=store)
    counters = [server.create("counter")["id"] for _ in range(5)]
    streams = [server.events(counter) for counter in counters]
    for counter in counters:
        assert server.request("POST", f"/reactors/{counter}/actions", '"increase"').status == 202
    # Every counter shows its loading state (committed: sync durability shows nothing earlier).
    for stream in streams:
        stream.states_until(lambda state: state["isLoading"])
        stream.close()
    kill(server)

    restarted = start_server("--counter-delay-ms", "300", store=store)
    for counter in counters:
        errors = restarted.events(counter)
        report = first_error(errors)
        assert report is not None and report.json()["action"] == 1, report
        errors.close()
        state = settled_state(restarted, counter)["state"]
        assert state["value"] == 1 and state["isLoading"] is False, state
    assert restored_actions(restarted, "interrupted") == len(counters)


def test_kill_while_a_search_loads_its_next_page_appends_it_after_the_restart(start_server):
    store = fresh_store()
    server = start_server("--search-latency-ms", "300", store=store)
    search = server.create("search")["id"]
    first = server.request("POST", f"/reactors/{search}/actions?wait=true", '{"updateQuery":{"query":"swift"}}')
    assert first.status == 200 and first.json()["state"]["nextPage"] == 2, first
    page = first.json()["state"]["results"]
    stream = server.events(search)
    assert server.request("POST", f"/reactors/{search}/actions", '"loadNextPage"').status == 202
    stream.states_until(lambda state: state["isLoadingNextPage"])
    stream.close()
    kill(server)

    restarted = start_server("--search-latency-ms", "300", store=store)
    state = wait_for(lambda: (lambda state: state if not state["isLoadingNextPage"] else None)(
        state_of(restarted, search)["state"]), timeout=15, what="the search to stop loading")
    assert state["query"] == "swift" and state["results"][:len(page)] == page and len(state["results"]) == 2 * len(page), state
    assert state["nextPage"] == 3
    # Not stuck: the next page loads.
    reply = restarted.request("POST", f"/reactors/{search}/actions?wait=true", '"loadNextPage"')
    assert reply.status == 200 and len(reply.json()["state"]["results"]) > len(state["results"]), reply


def test_a_slow_action_is_acknowledged_once_its_record_is_committed_not_once_it_settles(start_server):
    # A commit waits a moment for the actions it holds to settle, so that their states go with
    # them; an action that takes longer is committed as a record, and acknowledged, without it.
    server = start_server("--counter-delay-ms", "5000", "--stop-grace-s", "0", store=fresh_store())
    counter = server.create("counter")["id"]
    assert server.request("POST", f"/reactors/{counter}/actions", '"increase"').status == 202
    assert state_of(server, counter)["state"]["value"] == 0
    assert server.metric("reactor_store_settle_wait_timeouts_total") == 1


def test_passivated_instances_come_back_under_load(start_server):
    store = fresh_store()
    server = start_server("--counter-delay-ms", "0", "--passivate-after-s", "1", store=store)
    idle = [server.create("counter")["id"] for _ in range(10)]
    busy = server.create("counter")["id"]
    for counter in idle:
        assert server.request("POST", f"/reactors/{counter}/actions?wait=true", '"increase"').status == 200
    before = {counter: state_of(server, counter) for counter in idle}

    # The busy counter keeps working (and so stays in memory) while the idle ones leave.
    sent = 0
    def only_busy_left():
        nonlocal sent
        assert server.request("POST", f"/reactors/{busy}/actions", '"increase"').status == 202
        sent += 1
        return server.metric("reactor_instances") == 1
    wait_for(only_busy_left, timeout=20, what="idle instances to leave memory", interval=0.1)
    assert server.metric("reactor_instances_passivated_total") == len(idle)
    # Counted in the store, in memory or not.
    wait_for(lambda: server.metric("reactor_store_sessions") == len(idle) + 1, timeout=20,
             what="the stored sessions to be counted", interval=0.1)
    # Measured on disk with them: the file and its log, which only grow while the server runs.
    path = Path(store.removeprefix("sqlite:"))
    on_disk = sum(Path(str(path) + suffix).stat().st_size for suffix in ("", "-wal"))
    assert 4096 <= server.metric("reactor_store_bytes") <= on_disk
    assert server.metric("reactor_store_activation_duration_seconds_count") == 0

    for counter in idle:
        assert state_of(server, counter) == before[counter]  # activated, unchanged
        reply = server.request("POST", f"/reactors/{counter}/actions?wait=true", '"increase"')
        assert reply.status == 200
        assert reply.json()["version"] == before[counter]["version"] + 4
        assert reply.json()["state"]["value"] == 2
    assert settled_state(server, busy)["state"]["value"] == sent
    # Each idle counter came back, and nothing came back that had not left (the busy counter
    # may have left too while the others were read); every acknowledged action was committed.
    activations = server.metric("reactor_store_activation_duration_seconds_count")
    assert len(idle) <= activations <= server.metric("reactor_instances_passivated_total")
    commits = server.metric("reactor_store_commit_duration_seconds_count")
    assert 0 < commits <= server.metric("reactor_store_writes_total")
    # Each action was acknowledged once committed: its versions with it, or its record first.
    assert server.metric("reactor_store_writes_total") >= sent + len(idle)
    assert server.metric("reactor_store_commit_failures_total") == 0


def test_a_corrupt_store_stops_the_server_and_is_left_untouched(tmp_path):
    path = tmp_path / "sessions.sqlite"
    path.write_bytes(b"not a database, but somebody's file\n" * 10)
    before = path.read_bytes()
    process = Server.__new__(Server)  # only the binary's path is needed
    from conftest import server_binary
    import subprocess
    result = subprocess.run([str(server_binary()), "--port", "0", "--store", f"sqlite:{path}"],
                            capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    assert result.returncode != 0
    assert str(path) in result.stderr.decode()
    assert "not a SQLite database" in result.stderr.decode()
    assert path.read_bytes() == before


def damage_leaf_page(path: str, table: str, ids: list[str]) -> tuple[int, bytes, str, str]:
    """Overwrites the header of a leaf page of `table` that holds one of `ids` with bytes no
    B-tree page starts with, as a failing disk would. Returns the page's number, its damaged
    bytes, the session it holds (the victim), and one of `ids` kept on another leaf page (the
    spare). The store must not be open: its write-ahead log is first folded into the file, so
    that the file's pages are the ones read. (`table` is WITHOUT ROWID: each of its rows lies in
    one page only, which for a few of them is an interior page. Neither the victim nor the spare
    is taken from one: a row on an interior page is rewritten through the leaf beside it, which
    SQLite then finds damaged, so that session is not one the damage spares.)"""
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0
        leaves = [row[0] for row in connection.execute(
            "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf'", (table,))]
        page_size = connection.execute("PRAGMA page_size").fetchone()[0]
    with open(path, "r+b") as file:
        def read(number: int) -> bytes:
            file.seek((number - 1) * page_size)
            return file.read(page_size)
        contents = {number: read(number) for number in leaves}
        on_leaves = {number: [id for id in ids if id.encode() in contents[number]] for number in leaves}
        number = next((number for number in leaves if on_leaves[number]), None)
        if number is None:
            pytest.fail(f"none of the {len(leaves)} leaf pages of {table} holds a session")
        victim = on_leaves[number][0]
        spare = next((id for other in leaves if other != number for id in on_leaves[other]), None)
        assert spare is not None, f"every session on a leaf of {table} is on the page that holds {victim[:6]}…"
        damaged = b"\xff" * 12 + contents[number][12:]
        file.seek((number - 1) * page_size)
        file.write(damaged)
        return number, damaged, victim, spare


def test_a_session_the_store_cannot_read_answers_500_store_damaged_and_the_rest_serve_on(start_server):
    """A store whose page broke under a session (a failing disk): that session is refused with
    a clear error, logged as damage, and its page is never written; sessions elsewhere serve on."""
    store = fresh_store()
    path = store.removeprefix("sqlite:")
    first = start_server("--counter-delay-ms", "0", store=store)
    # Enough sessions for the sessions table to span several pages.
    counters = [first.create("counter")["id"] for _ in range(150)]
    whole = subprocess.run([str(server_binary()), "check", "--store", store], capture_output=True, text=True, timeout=60)
    assert whole.returncode == 0, whole.stdout + whole.stderr  # beside the server serving it
    assert whole.stdout.strip() == f"whole: {path} holds 150 sessions and passed SQLite's integrity check"
    assert first.stop() == 0
    page, damaged, victim, spare = damage_leaf_page(path, "sessions", counters)
    # The check finds it, and writes nothing.
    found = subprocess.run([str(server_binary()), "check", "--store", store], capture_output=True, text=True, timeout=60)
    assert found.returncode == 1, found.stdout + found.stderr
    assert found.stdout.startswith(f"damaged: {path}") and "\n  sessions: " in found.stdout, found.stdout
    assert "\n  history: " not in found.stdout and "\n  journal: " not in found.stdout
    assert victim not in found.stdout

    server = start_server("--counter-delay-ms", "0", store=store)
    for method, route, body in [("GET", "", None), ("POST", "/actions", '"increase"'), ("GET", "/events", None)]:
        refused = server.request(method, f"/reactors/{victim}{route}", body)
        assert refused.status == 500, refused
        assert refused.header("Content-Type") == "application/problem+json"
        assert refused.json()["type"].endswith(":store-damaged"), refused
        assert path not in refused.json()["detail"]
        assert refused.header("Retry-After") is None
    assert server.metric("reactor_store_damaged_reads_total") == 3
    reply = server.request("POST", f"/reactors/{spare}/actions?wait=true", '"increase"')
    assert reply.status == 200, reply
    assert state_of(server, spare)["state"]["value"] == 1
    log = server.stderr()
    assert "the session store is damaged" in log and "malformed" in log
    assert victim not in log
    assert server.stop() == 0
    with open(path, "rb") as file:
        page_size = len(damaged)
        file.seek((page - 1) * page_size)
        assert file.read(page_size) == damaged


def test_a_second_server_on_a_store_in_use_stops_and_changes_nothing(start_server):
    store = fresh_store()
    first = start_server("--counter-delay-ms", "0", store=store)
    counter = first.create("counter")["id"]
    assert first.request("POST", f"/reactors/{counter}/actions?wait=true", '"increase"').status == 200
    path = store.removeprefix("sqlite:")
    before = {name: Path(path + suffix).read_bytes() for name, suffix in [("db", ""), ("wal", "-wal")]}
    second = subprocess.run([str(server_binary()), "--port", "0", "--store", store],
                            capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert second.returncode != 0
    assert f"{path} is in use by another process (pid {first.process.pid})" in second.stderr, second.stderr
    assert {name: Path(path + suffix).read_bytes() for name, suffix in [("db", ""), ("wal", "-wal")]} == before
    # The first serves on; once it has stopped, the store is free.
    assert state_of(first, counter)["state"]["value"] == 1
    assert first.stop() == 0
    third = start_server("--counter-delay-ms", "0", store=store)
    assert state_of(third, counter)["state"]["value"] == 1


def test_a_crashed_server_leaves_its_store_free(start_server):
    store = fresh_store()
    first = start_server("--counter-delay-ms", "0", store=store)
    counter = first.create("counter")["id"]
    kill(first)
    second = start_server("--counter-delay-ms", "0", store=store)
    assert state_of(second, counter)["version"] == 0


def test_an_unwritable_store_path_stops_the_server_naming_it(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    target = blocker / "sessions.sqlite"
    from conftest import server_binary
    import subprocess
    result = subprocess.run([str(server_binary()), "--port", "0", "--store", f"sqlite:{target}"],
                            capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    assert result.returncode != 0
    assert str(target) in result.stderr.decode()


def test_a_full_store_answers_503_loses_nothing_acknowledged_and_resumes(start_server):
    directory = new_store_directory("reactor-full-")
    store = f"sqlite:{directory / 'sessions.sqlite'}?max_page_count=60"
    server = start_server("--counter-delay-ms", "0", store=store)
    assert server.request("GET", "/readyz").json() == {"status": "ready"}
    created = []
    full = None
    while full is None and len(created) < 2000:
        sent_at = time.monotonic()
        reply = server.request("POST", "/reactors", {"type": "todo"})
        if reply.status == 201:
            created.append(reply.json()["id"])
            continue
        full = reply
    assert full is not None and full.status == 503, full
    # Not ready for the second after a failed commit (unless that second has passed already).
    readiness = server.request("GET", "/readyz")
    assert readiness.status == 503 or time.monotonic() - sent_at >= 1.0, readiness
    if readiness.status == 503:
        assert readiness.json()["type"].endswith(":not-ready") and readiness.header("Retry-After"), readiness
    assert full.header("Content-Type") == "application/problem+json"
    assert full.json()["type"].endswith("store-unavailable")
    assert full.header("Retry-After")
    # While full, actions are refused, not half-accepted.
    refused = server.request("POST", f"/reactors/{created[0]}/actions", {"add": {"title": "x" * 200}})
    assert refused.status == 503 and refused.header("Retry-After"), refused
    assert server.metric("reactor_store_commit_failures_total") >= 1
    assert server.stop() == 0

    # Space returns (a larger cap): everything acknowledged is there, and service resumes.
    bigger = f"sqlite:{directory / 'sessions.sqlite'}?max_page_count=100000"
    restarted = start_server("--counter-delay-ms", "0", store=bigger)
    for instance_id in created:
        assert restarted.request("GET", f"/reactors/{instance_id}").status == 200
    reply = restarted.request("POST", f"/reactors/{created[0]}/actions?wait=true", {"add": {"title": "milk"}})
    assert reply.status == 200, reply
    assert restarted.request("POST", "/reactors", {"type": "todo"}).status == 201


def test_a_waiting_action_whose_commit_fails_is_answered_503_never_200(start_server):
    """`?wait=true` answers the state once the action's mutations are reduced; with `sync`, a
    200 is an acknowledgement too, so it must wait for the commit and never follow a failed one."""
    directory = new_store_directory("reactor-full-wait-")
    store = f"sqlite:{directory / 'sessions.sqlite'}?max_page_count=60"
    server = start_server("--counter-delay-ms", "0", store=store)
    todos = []
    while len(todos) < 2000:
        reply = server.request("POST", "/reactors", {"type": "todo"})
        if reply.status != 201:
            assert reply.status == 503, reply
            break
        todos.append(reply.json()["id"])
    todo = todos[0]
    answers = {}
    for attempt in range(6):
        # Past the second of refusals that follows a failed commit, so the action reaches the store.
        wait_for(lambda: server.request("GET", "/readyz").status == 200, timeout=10, what="the store to be ready again")
        title = f"attempt {attempt} " + "x" * 300
        reply = server.request("POST", f"/reactors/{todo}/actions?wait=true", {"add": {"title": title}})
        # 202: the action's record was committed, the states it produced were not (the instance
        # left memory with them): accepted, as without the wait, and applied where it comes back.
        assert reply.status in (200, 202, 503), reply
        if reply.status == 503:
            assert reply.header("Content-Type") == "application/problem+json"
            assert reply.json()["type"].endswith("store-unavailable"), reply
        elif reply.status == 200:
            assert title in [task["title"] for task in reply.json()["state"]["tasks"]], reply
        answers[title] = reply.status
    assert 503 in answers.values() or 202 in answers.values(), answers
    assert server.stop() == 0

    restarted = start_server("--counter-delay-ms", "0", store=f"sqlite:{directory / 'sessions.sqlite'}?max_page_count=100000")
    # An action acknowledged but never applied is sent again as the session comes back, before
    # any sent later: the state this one answers with holds it (a GET could come before it).
    after = restarted.request("POST", f"/reactors/{todo}/actions?wait=true", {"add": {"title": "after the restart"}})
    assert after.status == 200, after
    kept = [task["title"] for task in after.json()["state"]["tasks"]]
    for title, status in answers.items():
        if status in (200, 202):
            assert title in kept, (title[:10], answers.values())


def test_sigterm_commits_everything_even_with_async_durability(start_server):
    store = fresh_store()
    server = start_server("--counter-delay-ms", "0", "--durability", "async", "--flush-interval-ms", "1000",
                          store=store)
    counter = server.create("counter")["id"]
    connection = http.client.HTTPConnection(server.host, server.port, timeout=10)
    for _ in range(200):
        connection.request("POST", f"/reactors/{counter}/actions", body=b'"increase"')
        response = connection.getresponse()
        response.read()
        assert response.status == 202
    connection.close()
    # Acknowledged at once; with a 1 s flush interval most of it is not committed yet.
    assert server.stop() == 0
    restarted = start_server("--counter-delay-ms", "0", store=store)
    state = restarted.request("GET", f"/reactors/{counter}").json()
    assert state["state"]["value"] == 200 and state["version"] == 800


def test_after_a_crash_with_async_durability_no_version_number_is_shown_with_two_states(start_server):
    store = fresh_store()
    # Committed and left cleanly: a counter at version 4, value 1.
    first = start_server("--counter-delay-ms", "0", store=store)
    counter = first.create("counter")["id"]
    assert first.request("POST", f"/reactors/{counter}/actions?wait=true", '"increase"').status == 200
    assert first.stop() == 0

    # Served with async durability and a flush interval longer than the test: what the
    # increases show is never committed before the crash.
    second = start_server("--counter-delay-ms", "0", "--durability", "async", "--flush-interval-ms", "60000", store=store)
    stream = second.events(counter)
    # Activating it commits, at once, that this process shows its versions ahead of the store.
    wait_for(lambda: second.metric("reactor_store_writes_total") >= 1, timeout=10, what="the activation's commit")
    for _ in range(3):
        assert second.request("POST", f"/reactors/{counter}/actions", '"increase"').status == 202
    shown = stream.states_until(lambda state: state["value"] == 4 and state["alertMessage"]["count"] == 4
                                and not state["isLoading"])
    stream.close()
    shown_states = {int(event.id): event.data for event in shown}
    last_seen = max(shown_states)
    assert last_seen == 16, shown_states
    kill(second)

    third = start_server("--counter-delay-ms", "0", store=store)
    # Back at the committed state, as a version past every one the crashed process may have shown.
    resumed = state_of(third, counter)
    assert resumed["state"]["value"] == 1
    assert resumed["version"] > last_seen
    # A client that saw the lost versions gets the state as it is, not a patch against theirs.
    for query in ("", "?format=patch"):
        events = third.events(counter, headers={"Last-Event-ID": str(last_seen)}, query=query)
        first_event = events.next()
        while first_event.retry is not None and not first_event.data:  # the stream's `retry:` advice
            first_event = events.next()
        events.close()
        assert (first_event.event, int(first_event.id)) == ("state", resumed["version"])
        assert first_event.json() == resumed["state"]
    # New states never reuse a number that was shown with another state.
    for _ in range(2):
        reply = third.request("POST", f"/reactors/{counter}/actions?wait=true", '"decrease"')
        assert reply.status == 200
    after = third.events(counter, headers={"Last-Event-ID": str(resumed["version"])})
    replayed = after.states_until(lambda state: state["value"] == -1 and not state["isLoading"])
    after.close()
    assert all(int(event.id) > last_seen for event in replayed)
    assert [shown_states[int(event.id)] for event in replayed if int(event.id) in shown_states] == []
    assert third.stop() == 0
    logged = [line for line in third.stderr().splitlines() if "versions resume past" in line]
    assert len(logged) == 1 and "instance=#" in logged[0] and counter[:8] not in logged[0], logged


def test_sigterm_lets_actions_in_flight_finish_and_leaves_longer_ones_to_the_recovery_hook(start_server):
    """A stop waits (for at most --stop-grace-s, 5 s by default) for the actions in flight; work
    still running then is cut off, not settled: its acknowledged action stays stored and the
    next start's recovery hook finishes it, once."""
    store = fresh_store()
    # 3 s: longer than the 2 s a stop used to wait, within the default grace.
    quick = start_server("--counter-delay-ms", "3000", store=store)
    slow = start_server("--counter-delay-ms", "5000", "--stop-grace-s", "1", store=fresh_store())
    quick_counter, slow_counter = quick.create("counter")["id"], slow.create("counter")["id"]
    for server, counter in ((quick, quick_counter), (slow, slow_counter)):
        stream = server.events(counter)
        assert server.request("POST", f"/reactors/{counter}/actions", '"increase"').status == 202
        stream.states_until(lambda state: state["isLoading"])
        stream.close()
    assert quick.stop() == 0
    assert slow.stop() == 0

    # The quick one finished before the stop: nothing to recover.
    restarted = start_server("--counter-delay-ms", "300", store=store)
    state = state_of(restarted, quick_counter)["state"]
    assert state["value"] == 1 and state["isLoading"] is False, state
    assert restarted.stop() == 0
    assert "recovery hook" not in restarted.stderr(), restarted.stderr()
    restarted_slow = start_server("--counter-delay-ms", "300", store=slow.store)
    state = settled_state(restarted_slow, slow_counter)["state"]
    assert state["value"] == 1 and state["isLoading"] is False, state
    assert restarted_slow.stop() == 0
    cut_off = [line for line in restarted_slow.stderr().splitlines() if "recovery hook" in line]
    assert len(cut_off) == 1 and "cut off before it settled, by a crash or a stop" in cut_off[0], cut_off


def test_a_backup_taken_while_serving_restores_every_session_and_never_overwrites(start_server, tmp_path):
    store = fresh_store()
    server = start_server("--counter-delay-ms", "0", store=store)
    counters = [server.create("counter")["id"] for _ in range(5)]
    for index, counter in enumerate(counters):
        for _ in range(index + 1):
            assert server.request("POST", f"/reactors/{counter}/actions?wait=true", '"increase"').status == 200
    before = {counter: state_of(server, counter) for counter in counters}

    backup = tmp_path / "backup.sqlite"
    command = [str(server_binary()), "backup", "--store", store, str(backup)]
    taken = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert taken.returncode == 0, taken.stderr
    assert f"backed up {len(counters)} sessions" in taken.stdout
    assert server.request("GET", "/healthz").status == 200  # the server served on
    assert backup.stat().st_mode & 0o777 == 0o600  # the ids in it are credentials
    assert not [path.name for path in tmp_path.iterdir() if ".partial-" in path.name]

    # Never over an existing file: refused, and the file is left as it was.
    copied = backup.read_bytes()
    again = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert again.returncode != 0 and "already exists" in again.stderr, again
    assert backup.read_bytes() == copied
    # Not a session store: refused, named.
    other = tmp_path / "notes.txt"
    other.write_text("not a database\n")
    refused = subprocess.run([str(server_binary()), "backup", "--store", f"sqlite:{other}", str(tmp_path / "x.sqlite")],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "not a database" in refused.stderr, refused
    assert not (tmp_path / "x.sqlite").exists()

    # A server on the copy has every session as it was, history included.
    assert server.stop() == 0
    restored = start_server("--counter-delay-ms", "0", store=f"sqlite:{backup}")
    for counter in counters:
        assert state_of(restored, counter) == before[counter]
        history = restored.request("GET", f"/reactors/{counter}/history").json()
        assert history["versions"][-1]["version"] == before[counter]["version"]


def test_restore_puts_a_backup_back_and_keeps_the_store_it_replaces(start_server, tmp_path):
    store = fresh_store()
    path = Path(store.removeprefix("sqlite:"))
    server = start_server("--counter-delay-ms", "0", store=store)
    counters = [server.create("counter")["id"] for _ in range(3)]
    for counter in counters:
        assert server.request("POST", f"/reactors/{counter}/actions?wait=true", '"increase"').status == 200
    at_backup = {counter: state_of(server, counter) for counter in counters}
    backup = tmp_path / "backup.sqlite"
    taken = subprocess.run([str(server_binary()), "backup", "--store", store, str(backup)],
                           capture_output=True, text=True, timeout=60)
    assert taken.returncode == 0, taken.stderr
    checked = subprocess.run([str(server_binary()), "check", str(backup)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0 and "holds 3 sessions and passed" in checked.stdout, checked.stdout + checked.stderr
    for counter in counters:
        assert server.request("POST", f"/reactors/{counter}/actions?wait=true", '"increase"').status == 200
    later = {counter: state_of(server, counter) for counter in counters}
    restore = [str(server_binary()), "restore", "--store", store, str(backup)]

    # Refused while a server runs on the store; it serves on, unchanged.
    refused = subprocess.run(restore, capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "in use by another process" in refused.stderr, refused
    assert {counter: state_of(server, counter) for counter in counters} == later
    # After a crash, with commits still in the write-ahead log.
    kill(server)
    assert Path(str(path) + "-wal").stat().st_size > 0
    done = subprocess.run(restore, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "restored 3 sessions" in done.stdout, done.stdout
    assert "3 sessions go back to an earlier state" in done.stdout, done.stdout
    kept = Path(done.stdout.splitlines()[0].rsplit("kept at ", 1)[1])
    assert kept.parent == path.parent and kept.name.startswith("sessions.sqlite.before-restore-"), kept
    assert not [name for name in os.listdir(path.parent) if ".restoring-" in name]

    restored = start_server("--counter-delay-ms", "0", store=store)
    # Each counter is back at its state at the backup, as a version past those the replaced
    # store reached: a client that saw a later version never sees its number with another state.
    for counter in counters:
        now = state_of(restored, counter)
        assert now["state"] == at_backup[counter]["state"]
        assert now["version"] == later[counter]["version"] + 1
    for counter, query in [(counters[0], ""), (counters[1], "?format=patch")]:
        resumed = restored.events(counter, headers={"Last-Event-ID": str(later[counter]["version"])}, query=query)
        try:
            assert resumed.next().retry == 3000
            state = resumed.next()
            assert (state.event, state.id) == ("state", str(later[counter]["version"] + 1)), state
            assert state.json() == at_backup[counter]["state"]
        finally:
            resumed.close()
    reply = restored.request("POST", f"/reactors/{counters[2]}/actions?wait=true", '"increase"')
    assert reply.status == 200 and reply.json()["version"] == later[counters[2]]["version"] + 5, reply
    assert restored.stop() == 0

    # Restored where the store was lost (a new disk): nothing says how far the sessions had
    # gone. A client that saw a later version is told the instance went back, then given the
    # state it should now show, in either stream format.
    lost = f"sqlite:{tmp_path / 'new-disk' / 'sessions.sqlite'}"
    anew = subprocess.run([str(server_binary()), "restore", "--store", lost, str(backup)],
                          capture_output=True, text=True, timeout=60)
    assert anew.returncode == 0 and "go back" not in anew.stdout, anew
    rebuilt = start_server("--counter-delay-ms", "0", store=lost)
    assert {counter: state_of(rebuilt, counter) for counter in counters} == at_backup
    for counter, query in [(counters[0], ""), (counters[1], "?format=patch")]:
        resumed = rebuilt.events(counter, headers={"Last-Event-ID": str(later[counter]["version"])}, query=query)
        try:
            assert resumed.next().retry == 3000
            told = resumed.next()
            assert told.event == "rewound" and told.id is None, told
            assert told.json() == {"lastEventId": later[counter]["version"], "version": at_backup[counter]["version"]}
            state = resumed.next()
            assert (state.event, state.id) == ("state", str(at_backup[counter]["version"])), state
            assert state.json() == at_backup[counter]["state"]
        finally:
            resumed.close()
    assert rebuilt.stop() == 0
    # The replaced store, its log with it, still holds everything it had.
    replaced = start_server("--counter-delay-ms", "0", store=f"sqlite:{kept}")
    assert {counter: state_of(replaced, counter) for counter in counters} == later
    assert replaced.stop() == 0

    # Not a session store: refused, and the store is left as it was.
    other = tmp_path / "notes.txt"
    other.write_text("not a database\n")
    before = path.read_bytes()
    wrong = subprocess.run([str(server_binary()), "restore", "--store", store, str(other)],
                           capture_output=True, text=True, timeout=60)
    assert wrong.returncode != 0 and "not a database" in wrong.stderr, wrong
    assert path.read_bytes() == before


def test_copy_and_restore_leave_a_file_that_is_not_a_session_store_as_it_was(start_server, tmp_path):
    store = fresh_store()
    server = start_server("--counter-delay-ms", "0", store=store)
    server.create("counter")
    assert server.stop() == 0
    backup = tmp_path / "backup.sqlite"
    taken = subprocess.run([str(server_binary()), "backup", "--store", store, str(backup)],
                           capture_output=True, text=True, timeout=60)
    assert taken.returncode == 0, taken

    # An empty file is no store to copy from: refused, and not made into one.
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    copied = subprocess.run([str(server_binary()), "copy", "--store", f"sqlite:{empty}", f"sqlite:{tmp_path / 'copy.sqlite'}"],
                            capture_output=True, text=True, timeout=60)
    assert copied.returncode != 0 and "holds no session store" in copied.stderr, copied
    assert empty.stat().st_size == 0
    assert not (tmp_path / "copy.sqlite").exists()

    # Another application's database is not a store to restore over: refused, and not moved aside.
    application = tmp_path / "app.db"
    with sqlite3.connect(application) as database:
        database.execute("CREATE TABLE notes (text TEXT)")
        database.execute("INSERT INTO notes VALUES ('keep me')")
    database.close()
    before = application.read_bytes()
    restored = subprocess.run([str(server_binary()), "restore", "--store", f"sqlite:{application}", str(backup)],
                              capture_output=True, text=True, timeout=60)
    assert restored.returncode != 0 and "a SQLite database of something else" in restored.stderr, restored
    assert application.read_bytes() == before
    assert sorted(path.name for path in tmp_path.iterdir() if path.name.startswith("app.db")) == ["app.db"]


def test_compact_gives_the_pages_of_deleted_sessions_back_and_keeps_the_rest(start_server):
    store = fresh_store()
    path = Path(store.removeprefix("sqlite:"))
    server = start_server("--counter-delay-ms", "0", store=store)
    counters = [server.create("todo")["id"] for _ in range(200)]
    for todo in counters:
        reply = server.request("POST", f"/reactors/{todo}/actions?wait=true",
                               json.dumps({"add": {"title": "x" * 2000}}))
        assert reply.status == 200, reply
    kept = counters[:5]
    for todo in counters[5:]:
        assert server.request("DELETE", f"/reactors/{todo}").status == 204
    states = {todo: state_of(server, todo) for todo in kept}
    compact = [str(server_binary()), "compact", "--store", store]

    refused = subprocess.run(compact, capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "in use by another process" in refused.stderr, refused
    assert server.stop() == 0
    before = path.stat().st_size
    done = subprocess.run(compact, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"compacted {path}, 5 sessions: {before} bytes before," in done.stdout, done.stdout
    assert path.stat().st_size * 4 < before
    assert not Path(f"{path}-wal").exists() or Path(f"{path}-wal").stat().st_size == 0

    restarted = start_server("--counter-delay-ms", "0", store=store)
    assert {todo: state_of(restarted, todo) for todo in kept} == states
    assert restarted.request("GET", f"/reactors/{counters[5]}").status == 404


def test_a_new_store_is_readable_by_its_owner_only_and_an_open_one_is_reported(start_server, tmp_path):
    """The store's ids are the sessions' credentials."""
    store = f"sqlite:{tmp_path / 'data' / 'sessions.sqlite'}"
    server = start_server("--counter-delay-ms", "0", store=store)
    counter = server.create("counter")["id"]
    assert server.request("POST", f"/reactors/{counter}/actions?wait=true", '"increase"').status == 200
    modes = {name: (tmp_path / name).stat().st_mode & 0o777
             for name in ["data", "data/sessions.sqlite", "data/sessions.sqlite-wal", "data/sessions.sqlite-shm"]}
    assert modes == {"data": 0o700, "data/sessions.sqlite": 0o600, "data/sessions.sqlite-wal": 0o600,
                     "data/sessions.sqlite-shm": 0o600}, {name: oct(mode) for name, mode in modes.items()}
    assert "readable by other users" not in server.stderr()
    assert server.stop() == 0
    # One an earlier version made readable by others is served, and reported.
    (tmp_path / "data" / "sessions.sqlite").chmod(0o644)
    again = start_server("--counter-delay-ms", "0", store=store)
    assert state_of(again, counter)["state"]["value"] == 1
    assert "the session store is readable by other users" in again.stderr()


def test_an_action_retried_with_its_idempotency_key_is_applied_once_even_across_a_crash(start_server):
    store = fresh_store()
    server = start_server("--counter-delay-ms", "0", store=store)
    counter = server.create("counter")["id"]
    path = f"/reactors/{counter}/actions"

    def send(key: str, body: str = '"increase"', query: str = ""):
        return server.request("POST", path + query, body, headers={"Idempotency-Key": key})

    first = send("a1b2")
    assert first.status == 202 and first.header("Idempotent-Replayed") is None, first
    retry = send("a1b2")
    assert retry.status == 202 and retry.json() == first.json() and retry.header("Idempotent-Replayed") == "true", retry
    # A structured-field string names the same key; waiting gives the state after the action.
    waited = send('"a1b2"', query="?wait=true")
    assert waited.status == 200 and waited.header("Idempotent-Replayed") == "true", waited
    assert waited.json()["state"]["value"] == 1
    # The same key with another action: refused, nothing sent.
    reused = send("a1b2", body='"decrease"')
    assert reused.status == 422 and reused.json()["type"].endswith(":idempotency-key-reused"), reused
    assert str(first.json()["seq"]) in reused.json()["detail"]
    for bad in ["", "has space", "k" * 256, "caf\u00e9"]:
        refused = server.request("POST", path, '"increase"', headers={"Idempotency-Key": bad.encode("utf-8").decode("latin-1")})
        assert refused.status == 400 and refused.json()["type"].endswith(":invalid-parameter"), (bad, refused)
    assert state_of(server, counter)["state"]["value"] == 1
    assert (server.metric("reactor_actions_accepted_total"), server.metric("reactor_actions_replayed_total")) == (1, 2)

    # Acknowledged, then the process dies; the client, unsure, retries after the restart.
    second = send("c3d4")
    assert second.status == 202
    wait_for(lambda: state_of(server, counter)["state"]["value"] == 2, timeout=15, what="the action to be applied")
    kill(server)
    server = start_server("--counter-delay-ms", "0", store=store)
    retried = send("c3d4", query="?wait=true")
    assert retried.status == 200 and retried.header("Idempotent-Replayed") == "true", retried
    assert retried.json()["state"]["value"] == 2
    fresh = send("e5f6", query="?wait=true")
    assert fresh.status == 200 and fresh.header("Idempotent-Replayed") is None and fresh.json()["state"]["value"] == 3, fresh
