"""docker/compose.cluster.yaml through podman-compose: PostgreSQL, three reactor-server nodes and
nginx (and HAProxy, its profile) on the network compose makes for them. Sessions spread over the
nodes, stay served at their versions through nginx while the node holding one is stopped and then
the node that took it over, and come back after `down` and `up`.

The PostgreSQL, nginx and HAProxy images are the ones podman has (Tests/containers/service-images
makes stand-ins from Debian's packages when no registry answers). What Debian 12's tools lack is
made up for here, nothing else:

- podman-compose 1.0.3 knows no profiles: `up -d nginx` starts what `docker compose up` starts
  (every service but the haproxy profile's), `up -d haproxy` what `--profile haproxy` adds.
- It does not wait for depends_on's service_healthy: `up -d postgres` comes first, and the rest
  once PostgreSQL's health check passes (nothing runs health checks here by itself: no systemd;
  `podman healthcheck run` does).
- Its `down` leaves the project's network and the nodes' anonymous /data volumes (the image's
  VOLUME); they are removed here.
- netavark 1.4 leaves the network's bridge with the lowest address of the containers' interfaces
  attached to it, so the bridge's MAC address changes as containers start and stop, and a
  container that learned the old one reaches nothing on the host until its ARP entry expires
  (tens of seconds): not the name server, so a node cannot look up `postgres` for a new
  connection, which fails after --store-timeout-s with 503 store-unavailable. Later netavark
  releases fix the bridge's address; here it is fixed to the address it has once PostgreSQL's
  container is attached, before any other.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from pathlib import Path

import yaml

from conftest import (REACTOR_SERVER, REACTOR_SERVER_IMAGE, REPO_ROOT, RUN, START_TIMEOUT, STOP_TIMEOUT,
                      EventStream, Published, container_state, first_state, free_port, podman, wait_until)

PROJECT = f"{RUN}-cluster"
NODES = ("node1", "node2", "node3")
VOLUME = f"{PROJECT}_postgres-data"
NETWORK = f"{PROJECT}_default"
#: Sessions created through nginx until more than one node holds one.
MAX_SESSIONS = 20


def container(service: str) -> str:
    return f"{PROJECT}_{service}_1"


def compose_file(tmp_path, nginx_port: int, haproxy_port: int):
    """docker/compose.cluster.yaml with changes about where it runs only: nginx's and HAProxy's
    ports published on 127.0.0.1 on free ports, the nodes' image the one this run built from the
    same Dockerfile (so `up` builds nothing), and, since the file is written elsewhere, the
    bind mounts' sources made absolute (the same docker/nginx.conf and docker/haproxy.cfg)."""
    spec = yaml.safe_load((REPO_ROOT / "docker/compose.cluster.yaml").read_text())
    services = spec["services"]
    for name in NODES:
        node = services[name]
        assert node["image"] == "reactor-server" and node["build"]["dockerfile"] == "docker/Dockerfile", node
        node["image"] = REACTOR_SERVER_IMAGE
        del node["build"]
    for name, published, port in (("nginx", 8080, nginx_port), ("haproxy", 8081, haproxy_port)):
        service = services[name]
        assert service["ports"] == [f"{published}:8080"], service
        service["ports"] = [f"127.0.0.1:{port}:8080"]
        for volume in service["volumes"]:
            assert volume["type"] == "bind", volume
            volume["source"] = str((REPO_ROOT / "docker" / volume["source"]).resolve())
    path = tmp_path / "compose.cluster.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


class Project:
    """podman-compose on that file, as the project PROJECT (every container, volume and network
    it makes is named after this run), with POSTGRES_PASSWORD in its environment."""

    def __init__(self, path, password: str) -> None:
        self.path = path
        self.environment = dict(os.environ, POSTGRES_PASSWORD=password)

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        result = subprocess.run(["podman-compose", "--project-name", PROJECT, "--file", str(self.path), *args],
                                capture_output=True, text=True, timeout=180, env=self.environment)
        assert not check or result.returncode == 0, result
        return result

    def containers(self) -> list[str]:
        return podman("ps", "--all", "--quiet", "--filter", f"name=^{PROJECT}_").stdout.split()

    def down(self, *args: str, check: bool = True) -> None:
        """`down`, and the anonymous volumes of the containers it removed."""
        ids = self.containers()
        mounts = json.loads(podman("container", "inspect", *ids).stdout) if ids else []
        anonymous = [mount["Name"] for each in mounts for mount in each["Mounts"]
                     if mount["Type"] == "volume" and not mount["Name"].startswith(PROJECT)]
        self("down", *args, check=check)
        if anonymous:
            podman("volume", "rm", "--force", *anonymous, check=False)

    def print_logs(self) -> None:
        """Every container's log, which pytest shows when the test failed."""
        for name in self.containers():
            result = podman("logs", "--timestamps", name, check=False)
            print(f"--- podman logs {name}\n{result.stdout}{result.stderr}")

    def remove_everything(self) -> None:
        """`down -v`, then whatever it left: containers, volumes, the network."""
        self.print_logs()
        self.down("-v", check=False)
        leftovers = self.containers()
        if leftovers:
            podman("rm", "--force", "--volumes", "--time", "0", *leftovers, check=False)
        podman("volume", "rm", "--force", VOLUME, check=False)
        podman("network", "rm", "--force", NETWORK, check=False)


def healthy(name: str) -> bool:
    """Runs the container's health check (nothing schedules it here: no systemd) and reads the
    status it left."""
    if podman("healthcheck", "run", name, check=False, timeout=30).returncode != 0:
        return False
    return container_state(name).get("Health", {}).get("Status") == "healthy"


def fix_the_bridge_address() -> None:
    """Gives the network's bridge the MAC address it has now for as long as it exists (see above)."""
    bridge = podman("network", "inspect", "--format", "{{.NetworkInterface}}", NETWORK).stdout.strip()
    address = (Path("/sys/class/net") / bridge / "address").read_text().strip()
    subprocess.run(["ip", "link", "set", "dev", bridge, "address", address], check=True, timeout=30)


def start(project: Project, proxy: Published) -> None:
    """`up`, PostgreSQL first: then each node healthy and nginx answering. No `alive` check: a
    container that exits is started again by its restart policy."""
    project("up", "-d", "postgres")
    fix_the_bridge_address()
    wait_until(lambda: healthy(container("postgres")), 90, "PostgreSQL healthy", interval=0.5)
    project("up", "-d", "nginx")
    for node in NODES:
        wait_until(lambda: healthy(container(node)), START_TIMEOUT, f"{node} healthy", interval=0.5)
    wait_until(proxy.serves, START_TIMEOUT, f"{proxy.name} serving on port {proxy.port}", interval=0.2)


def psql(sql: str) -> str:
    return podman("exec", container("postgres"), "psql", "--username", "reactor", "--dbname", "reactor",
                  "--no-psqlrc", "--tuples-only", "--no-align", "--command", sql).stdout.strip()


def owner(instance_id: str) -> str:
    """The node the database names as the session's holder ('' when none holds it)."""
    return psql(f"SELECT coalesce(owner, '') FROM reactor_sessions WHERE id = '{instance_id}'")


def versions_until(stream: EventStream, version: int) -> list[int]:
    """The ids of the stream's state events, up to and including `version`."""
    ids: list[int] = []
    while not ids or ids[-1] < version:
        event = stream.next(timeout=30)
        assert event is not None, f"the stream ended after versions {ids}, before {version}"
        if event.event == "state":
            ids.append(int(event.id))
    return ids


def test_the_cluster_serves_spreads_sessions_and_keeps_them_across_stopped_nodes_and_down(tmp_path):
    nginx_port, haproxy_port = free_port(), free_port()
    project = Project(compose_file(tmp_path, nginx_port, haproxy_port), secrets.token_hex(12))
    proxy = Published(container("nginx"), nginx_port)
    streams: list[EventStream] = []
    try:
        start(project, proxy)
        assert not container_state(container("haproxy")), "haproxy started without its profile"

        # Sessions created and advanced through nginx, each then held by the node its id routes
        # to, until more than one node holds one.
        latest: dict[str, dict] = {}
        holders: set[str] = set()
        while len(holders) < 2:
            assert len(latest) < MAX_SESSIONS, f"{MAX_SESSIONS} sessions all held by {holders}"
            instance_id = proxy.create()
            latest[instance_id] = proxy.act(instance_id)
            holders.add(owner(instance_id))
        assert holders <= set(NODES), holders

        # The first session, advanced again; its event stream through nginx starts at its state.
        watched = next(iter(latest))
        latest[watched] = proxy.act(watched)
        assert latest[watched]["state"]["value"] == 2 * REACTOR_SERVER.step, latest[watched]

        # podman stop (SIGTERM) of the node holding it, then of the node that took it over: each
        # hands it over, its open stream ends with "moved", and through nginx the session is at
        # the same version, a stream resumed with Last-Event-ID gets every version after the one
        # it saw, and an action is applied.
        stopped: list[str] = []
        for _ in range(2):
            before = latest[watched]
            stream = proxy.events(watched)
            streams.append(stream)
            seen = first_state(stream)
            assert (int(seen.id), seen.json()) == (before["version"], before["state"]), seen
            leaving = owner(watched)
            assert leaving in NODES and leaving not in stopped, (leaving, stopped)
            podman("stop", "--time", str(STOP_TIMEOUT), container(leaving), timeout=STOP_TIMEOUT + 30)
            assert container_state(container(leaving))["ExitCode"] == 0, podman("logs", container(leaving)).stderr
            stopped.append(leaving)
            end = stream.next(timeout=10)
            assert end is not None and (end.event, end.json()) == ("end", {"reason": "moved"}), end
            assert stream.next(timeout=10) is None
            stream.close()

            now = proxy.session(watched)
            assert (now["version"], now["state"]) == (before["version"], before["state"]), now
            assert owner(watched) in set(NODES) - set(stopped)
            resumed = proxy.events(watched, {"Last-Event-ID": seen.id})
            streams.append(resumed)
            assert resumed.status == 200, (resumed.status, getattr(resumed, "body", b""))
            latest[watched] = proxy.act(watched)
            assert latest[watched]["state"]["value"] == before["state"]["value"] + REACTOR_SERVER.step
            versions = versions_until(resumed, latest[watched]["version"])
            assert versions == list(range(before["version"] + 1, latest[watched]["version"] + 1)), versions
            resumed.close()

        # down keeps PostgreSQL's volume; up again: the database is not made again, and every
        # session is served through nginx at the version it had.
        project.down()
        assert project.containers() == []
        assert podman("volume", "exists", VOLUME, check=False).returncode == 0, "down removed the volume"
        start(project, proxy)
        assert "Skipping initialization" in podman("logs", container("postgres")).stdout
        for instance_id, expected in latest.items():
            now = proxy.session(instance_id)
            assert (now["version"], now["state"]) == (expected["version"], expected["state"]), now

        # The haproxy profile: HAProxy in front of the same nodes serves the same sessions.
        project("up", "-d", "haproxy")
        balancer = Published(container("haproxy"), haproxy_port)
        wait_until(balancer.serves, START_TIMEOUT, f"haproxy serving on port {haproxy_port}", interval=0.2)
        now = balancer.session(watched)
        assert (now["version"], now["state"]) == (latest[watched]["version"], latest[watched]["state"]), now
        acted = balancer.act(watched)
        assert proxy.session(watched)["version"] == acted["version"]

        project.down("-v")
        wait_until(lambda: podman("volume", "exists", VOLUME, check=False).returncode != 0, 30,
                   "down -v removing the volume")
    finally:
        for stream in streams:
            stream.close()
        project.remove_everything()
    assert project.containers() == []
    assert podman("network", "exists", NETWORK, check=False).returncode != 0
