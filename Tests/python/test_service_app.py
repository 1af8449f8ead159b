"""A team's own service: the starter package's executable (Templates/starter, built against this
checkout by `make test`) and reactor-server are both ReactorServiceApps, and each is put through
the same end-to-end checks: its command line, a crash under load, a graceful stop with streams
open, a backup and a restore through its own subcommands, and a node killed in a cluster.

Each counter is created with parameters (a step), stored with the session: every check also
shows they survive a crash, a restore and a move to another node."""

from __future__ import annotations

import re
import signal
import subprocess
import threading

import pytest

from cluster import Cluster, store_mode_from_environment, wait_until
from conftest import REACTOR_SERVER, STARTER, App, Server

APPS = [pytest.param(REACTOR_SERVER, id="reactor-server"), pytest.param(STARTER, id="starter")]


@pytest.fixture(params=APPS)
def app(request) -> App:
    return request.param


def create(server, app: App) -> str:
    reply = server.request("POST", "/reactors", app.create)
    assert reply.status == 201, reply
    return reply.json()["id"]


def value(server, instance_id: str) -> int:
    reply = server.request("GET", f"/reactors/{instance_id}")
    assert reply.status == 200, reply
    return reply.json()["state"]["value"]


def run(app: App, *args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([str(app.binary), *args], capture_output=True, text=True, timeout=timeout,
                          env={"PATH": "/usr/bin:/bin", **(env or {})})


def options(help_text: str) -> set[str]:
    return set(re.findall(r"^\s+(--[a-z0-9-]+)", help_text, flags=re.M))


def test_the_app_has_every_command_and_every_serve_option_of_reactor_server(app):
    overview = run(app, "--help")
    assert overview.returncode == 0, overview.stderr
    for command in ["serve (default)", "health", "backup", "restore", "check", "compact", "copy"]:
        assert command in overview.stdout
    version = run(app, "--version")
    assert version.returncode == 0 and version.stdout.startswith(app.name + " "), version
    serve = options(run(app, "serve", "--help").stdout)
    reference = options(run(REACTOR_SERVER, "serve", "--help").stdout) - {"--counter-delay-ms", "--search-latency-ms"}
    assert {"--store", "--durability", "--lease-s", "--node-id", "--log-format", "--traces", "--passivate-after-s",
            "--max-instances", "--cors-origins", "--address-file"} <= reference
    assert reference <= serve, reference - serve
    # An app's own options are read from the environment too, and checked like the others.
    refused = run(REACTOR_SERVER, "--port", "0", env={"COUNTER_DELAY_MS": "soon"})
    assert refused.returncode != 0 and "COUNTER_DELAY_MS='soon'" in refused.stderr, refused


def test_kill_9_under_load_loses_no_acknowledged_action(app, start_server, tmp_path):
    store = f"sqlite:{tmp_path / 'sessions.sqlite'}"
    server = start_server(store=store, app=app)
    instance_id = create(server, app)
    acknowledged = []
    unanswered = []  # cut off by the kill: committed or not, the client cannot know
    stop = threading.Event()

    def hammer():
        while not stop.is_set():
            try:
                reply = server.request("POST", f"/reactors/{instance_id}/actions", '"increase"', timeout=5)
            except OSError:
                unanswered.append(1)
                return
            if reply.status == 202:
                acknowledged.append(reply.json()["seq"])

    workers = [threading.Thread(target=hammer) for _ in range(4)]
    for worker in workers:
        worker.start()
    wait_until(lambda: len(acknowledged) >= 200, 30, "200 acknowledged actions")
    server.signal(signal.SIGKILL)
    server.wait(timeout=10)
    stop.set()
    for worker in workers:
        worker.join(timeout=10)
    restarted = start_server(store=store, app=app)
    # Every acknowledged action changes the value exactly once (unstarted ones run after the
    # restart, interrupted ones finish through the recovery hook); an action the kill cut off
    # before its answer may have been committed too, but none twice.
    least, most = len(acknowledged) * app.step, (len(acknowledged) + len(unanswered)) * app.step

    def settled() -> bool:
        state = restarted.request("GET", f"/reactors/{instance_id}").json()["state"]
        assert state["value"] <= most, (state, len(acknowledged), len(unanswered))
        return state["value"] >= least and not state["isLoading"]

    wait_until(settled, 30, f"the value of {len(acknowledged)} acknowledged actions")
    assert value(restarted, instance_id) % app.step == 0


def test_sigterm_ends_streams_exits_zero_and_the_restart_resumes_the_stream(app, start_server, tmp_path):
    store = f"sqlite:{tmp_path / 'sessions.sqlite'}"
    server = start_server(store=store, app=app)
    instance_id = create(server, app)
    reply = server.request("POST", f"/reactors/{instance_id}/actions?wait=true", '"increase"')
    assert reply.status == 200, reply
    version = reply.json()["version"]
    stream = server.events(instance_id)
    first = stream.next()
    while first.retry is not None and not first.data:  # the reconnection hint that opens a stream
        first = stream.next()
    assert (first.event, first.id) == ("state", str(version))
    server.signal(signal.SIGTERM)
    assert server.wait(timeout=15) == 0
    # The stream ends cleanly rather than hanging.
    while (event := stream.next()) is not None:
        assert event.event in {"state", "end", "message"}, event
    restarted = start_server(store=store, app=app)
    resumed = restarted.events(instance_id, headers={"Last-Event-ID": str(version)})
    reply = restarted.request("POST", f"/reactors/{instance_id}/actions?wait=true", '"increase"')
    assert reply.status == 200 and reply.json()["state"]["value"] == 2 * app.step, reply
    states = resumed.states_until(lambda state: state["value"] == 2 * app.step)
    assert all(int(event.id) > version for event in states), states
    resumed.close()


def test_backup_while_serving_and_restore_through_the_apps_own_commands(app, start_server, tmp_path):
    store = f"sqlite:{tmp_path / 'sessions.sqlite'}"
    server = start_server(store=store, app=app)
    instance_id = create(server, app)
    assert server.request("POST", f"/reactors/{instance_id}/actions?wait=true", '"increase"').status == 200
    backup = tmp_path / "backup.sqlite"
    taken = run(app, "backup", str(backup), env={"STORE": store})
    assert taken.returncode == 0 and "backed up 1 session" in taken.stdout, taken
    assert run(app, "check", str(backup)).returncode == 0
    assert server.request("POST", f"/reactors/{instance_id}/actions?wait=true", '"increase"').status == 200
    assert server.stop() == 0
    restored = run(app, "restore", str(backup), env={"STORE": store})
    assert restored.returncode == 0, restored
    again = start_server(store=store, app=app)
    assert value(again, instance_id) == app.step


def test_parameters_survive_a_crash_and_bad_ones_are_refused(app, start_server, tmp_path):
    store = f"sqlite:{tmp_path / 'sessions.sqlite'}"
    server = start_server(store=store, app=app)
    created = server.request("POST", "/reactors", {"type": "counter", "parameters": {"step": 7}})
    assert created.status == 201, created
    instance_id = created.json()["id"]
    assert server.request("POST", f"/reactors/{instance_id}/actions?wait=true", '"increase"').json()["state"]["value"] == 7
    server.signal(signal.SIGKILL)
    server.wait(timeout=10)
    restarted = start_server(store=store, app=app)
    # The factory gets the stored parameters again: the next step is 7 too.
    reply = restarted.request("POST", f"/reactors/{instance_id}/actions?wait=true", '"increase"')
    assert reply.status == 200 and reply.json()["state"]["value"] == 14, reply
    refused = restarted.request("POST", "/reactors", {"type": "counter", "parameters": {"step": "big"}})
    assert refused.status == 422 and "step" in refused.json()["detail"], refused
    # A step the factory refuses: one that would make the counter's value overflow, a trap that
    # stopped the server (and did again each time the session was brought back).
    # A number the step cannot hold is named as such (it was called JSON that does not parse).
    for step in (1.5, 1e20):
        refused = restarted.request("POST", "/reactors", {"type": "counter", "parameters": {"step": step}})
        assert refused.status == 422, refused
        assert "a number one of the fields cannot hold" in refused.json()["detail"], refused
    for step in (2**63 - 1, 0, -5):
        refused = restarted.request("POST", "/reactors", {"type": "counter", "parameters": {"step": step}})
        assert refused.status == 422, refused
        assert refused.json()["detail"] == f"nothing was created: 'step' must be from 1 to 1000000, not {step}", refused
    assert restarted.request("GET", "/healthz").status == 200


@pytest.mark.cluster
@pytest.mark.skipif(store_mode_from_environment() != "postgres", reason="needs the shared PostgreSQL store")
def test_a_killed_nodes_sessions_go_on_on_another_node_with_their_parameters(app, tmp_path, server_logs):
    with Cluster(tmp_path, nodes=2, lease_s=2, app=app) as cluster:
        reply = cluster.request("POST", "/reactors", app.create)
        assert reply.status == 201, reply
        instance_id = reply.json()["id"]
        reply = cluster.request("POST", f"/reactors/{instance_id}/actions?wait=true", '"increase"')
        assert reply.status == 200 and reply.json()["state"]["value"] == app.step, reply
        owner = cluster.psql(f"SELECT owner FROM reactor_sessions WHERE id = '{instance_id}'")
        cluster.kill_node(cluster.node_ids.index(owner))
        # Once the dead node's lease lapses, the other node takes the session, made again with
        # its stored parameters; the request waits for it rather than failing.
        survivor = cluster.node(1 - cluster.node_ids.index(owner))
        reply = survivor.request("POST", f"/reactors/{instance_id}/actions?wait=true", '"increase"', timeout=30)
        assert reply.status == 200 and reply.json()["state"]["value"] == 2 * app.step, reply
