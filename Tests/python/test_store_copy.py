"""`reactor-server copy`: a single node's SQLite sessions moved to the PostgreSQL database of a
cluster (Tests/python/cluster.py), as a team outgrowing one machine does, and clients going on
where they were through the proxy."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cluster import Cluster, store_mode_from_environment, wait_until
from conftest import server_binary
from test_durability import fresh_store, settled_state, state_of

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(store_mode_from_environment() != "postgres",
                       reason="the destination is the shared PostgreSQL store (CLUSTER_STORE=postgres)"),
]


def copy(destination: str, store: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(server_binary()), "copy", "--store", store, destination],
                          capture_output=True, text=True, timeout=120)


def test_a_single_nodes_sessions_move_to_a_cluster_and_their_clients_go_on(start_server, tmp_path, server_logs):
    store = fresh_store()
    single = start_server("--counter-delay-ms", "0", store=store)
    counter = single.create("counter")["id"]
    # Watched, so the store keeps every version (an unwatched commit keeps only its last): the
    # client below resumes from one two versions back.
    watch = single.events(counter)
    for _ in range(3):
        assert single.request("POST", f"/reactors/{counter}/actions?wait=true", '"increase"').status == 200
    keyed = single.request("POST", f"/reactors/{counter}/actions", '"decrease"', headers={"Idempotency-Key": "k-1"})
    assert keyed.status == 202
    wait_until(lambda: state_of(single, counter)["state"] == {**settled_state(single, counter)["state"], "value": 2},
               10, "the keyed decrease applied")
    before = settled_state(single, counter)
    watch.close()
    todo = single.create("todo")["id"]
    assert single.request("POST", f"/reactors/{todo}/actions?wait=true", '{"add":{"title":"move"}}').status == 200
    todo_before = state_of(single, todo)

    # Never from a store a server has open: it may still change.
    refused = copy("sqlite:" + str(tmp_path / "elsewhere.sqlite"), store)
    assert refused.returncode == 1 and "in use by another process" in refused.stderr, refused
    assert single.stop() == 0
    # An action cut off by the stop (which does not wait for it) stays stored, to be finished
    # where the session is served next.
    slow = start_server("--counter-delay-ms", "5000", "--stop-grace-s", "0", store=store)
    stream = slow.events(counter)
    assert slow.request("POST", f"/reactors/{counter}/actions", '"increase"').status == 202
    stream.states_until(lambda state: state["isLoading"])
    stream.close()
    assert slow.stop() == 0

    with Cluster(tmp_path / "cluster", nodes=2) as cluster:
        print(cluster.logs())
        copied = copy(cluster.postgres.url, store)
        assert copied.returncode == 0, copied.stderr
        assert copied.stdout.startswith("copied 2 sessions (") and "1 action not yet applied" in copied.stdout, copied.stdout

        # Through the proxy, on whichever node its id routes to: where it was, and the cut-off
        # increase finished once, by the recovery hook.
        after = settled_state(cluster, counter)
        assert after["state"]["value"] == before["state"]["value"] + 1, (before, after)
        assert after["version"] > before["version"]
        assert state_of(cluster, todo) == todo_before
        # The history came along: a client resumes from where it was.
        resumed = cluster.events(counter, headers={"Last-Event-ID": str(before["version"] - 2)})
        replayed = resumed.states_until(lambda state: state == before["state"])
        resumed.close()
        assert [int(event.id) for event in replayed][:2] == [before["version"] - 1, before["version"]]
        # So did the idempotency key: a retry is answered as the first attempt was.
        retry = cluster.request("POST", f"/reactors/{counter}/actions", '"decrease"', headers={"Idempotency-Key": "k-1"})
        assert retry.status == 202 and retry.header("Idempotent-Replayed") == "true", retry
        assert retry.json()["seq"] == keyed.json()["seq"]

        # Never into a database that holds sessions.
        again = copy(cluster.postgres.url, store)
        assert again.returncode == 1 and "holds 2 sessions already" in again.stderr, again
        wait_until(lambda: cluster.postgres.psql("SELECT count(*) FROM reactor_sessions") == "2", 5, "two sessions")

    # The source is only read: the single node serves it on, as it was left.
    back = start_server("--counter-delay-ms", "0", store=store)
    assert state_of(back, todo) == todo_before


def test_a_cluster_backed_up_while_serving_is_restored_past_every_version_shown(tmp_path, server_logs):
    """`reactor-server backup` and `restore` on the PostgreSQL store: a snapshot taken beside the
    running nodes, and a restore, with the nodes stopped, whose sessions go on past the versions
    the replaced database reached."""
    backup = tmp_path / "backup.sqlite"
    with Cluster(tmp_path / "cluster", nodes=1) as cluster:
        print(cluster.logs())
        url = cluster.postgres.url
        counter = cluster.create()["id"]
        assert cluster.request("POST", f"/reactors/{counter}/actions?wait=true", '"increase"').status == 200
        at_backup = state_of(cluster, counter)
        taken = subprocess.run([str(server_binary()), "backup", "--store", url, str(backup)],
                               capture_output=True, text=True, timeout=120)
        assert taken.returncode == 0, taken.stderr
        assert taken.stdout.startswith(f"backed up 1 session from {url} to {backup}"), taken.stdout
        assert backup.stat().st_mode & 0o777 == 0o600  # the ids in it are credentials
        assert cluster.request("POST", f"/reactors/{counter}/actions?wait=true", '"increase"').status == 200
        later = state_of(cluster, counter)
        other = cluster.create()["id"]  # made after the backup: the restore takes it away

        def restore() -> subprocess.CompletedProcess:
            return subprocess.run([str(server_binary()), "restore", "--store", url, str(backup)],
                                  capture_output=True, text=True, timeout=120)

        # The node serves the counter: refused, and nothing written.
        refused = restore()
        assert refused.returncode == 1 and "served by running processes" in refused.stderr, refused
        assert [path.name for path in tmp_path.iterdir() if "replaced" in path.name] == []

        assert cluster.stop_node(0) == 0
        backed_up = backup.read_bytes()
        restored = restore()
        assert restored.returncode == 0, restored.stderr
        assert restored.stdout.startswith(f"restored 1 session from {backup} to {url}; the 2 sessions it replaced are kept at "), restored.stdout
        assert "1 session goes back to an earlier state" in restored.stdout, restored.stdout
        # The backup is only read: nothing changed, nothing left beside it.
        assert backup.read_bytes() == backed_up
        assert sorted(path.name for path in tmp_path.iterdir() if path.name.startswith("backup.sqlite")) == [
            "backup.sqlite", Path(restored.stdout.split(" are kept at ", 1)[1].splitlines()[0]).name]
        kept = restored.stdout.split(" are kept at ", 1)[1].splitlines()[0]
        checked = subprocess.run([str(server_binary()), "check", kept], capture_output=True, text=True, timeout=60)
        assert checked.returncode == 0, checked

        cluster.start_node(0)
        now = state_of(cluster, counter)
        assert now["state"] == at_backup["state"]
        assert now["version"] > later["version"]
        assert cluster.request("GET", f"/reactors/{other}").status == 404

        # Onto a new database, as after losing one: nothing to keep aside, nothing to carry.
        cluster.postgres.psql("CREATE DATABASE replacement")
        new_url = url.rsplit("/", 1)[0] + "/replacement"
        onto_new = subprocess.run([str(server_binary()), "restore", "--store", new_url, str(backup)],
                                  capture_output=True, text=True, timeout=120)
        assert onto_new.returncode == 0, onto_new.stderr
        assert onto_new.stdout == f"restored 1 session from {backup} to {new_url}; the database held none\n", onto_new.stdout
        assert cluster.postgres.psql("SELECT version FROM reactor_sessions", database="replacement") == str(at_backup["version"])
