"""Several reactor-server nodes behind nginx, sharing a PostgreSQL store, on 127.0.0.1.

The topology of docker/compose.cluster.yaml without Docker: a PostgreSQL server of its own (the
Debian package's binaries, a fresh data directory, its own port), nginx running
docker/nginx.conf with the nodes' addresses put in, and N reactor-server nodes started through
conftest's `Server`. Every process is started here, waited for with a deadline and stopped by its
PID (its shutdown signal, then SIGKILL after a bounded wait, children included).

    with Cluster(tmp_path, nodes=3, lease_s=2) as cluster:
        instance = cluster.create()                        # through the proxy
        cluster.request("GET", f"/reactors/{instance['id']}")
        cluster.kill_node(0); cluster.restart_node(0)
        cluster.psql("SELECT 1")

Each node has a port of its own, chosen once, so a restarted node comes back where nginx expects
it. `node_store` picks the nodes' store: "postgres" (the shared database; the default, or
$CLUSTER_STORE) or "sqlite" (one SQLite file per node, kept across restarts; PostgreSQL is still
started). $CLUSTER_FULL=1 asks the tests for their longer variants (see `scaled`).
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from conftest import REACTOR_SERVER, REPO_ROOT, App, EventStream, Reply, Server, request

NGINX_CONF = REPO_ROOT / "docker" / "nginx.conf"
STORE_MODES = ("postgres", "sqlite")
FULL = os.environ.get("CLUSTER_FULL", "") not in ("", "0")
STOP_TIMEOUT = 10.0
READY_TIMEOUT = 30.0


def scaled(short, full):
    """`full` when $CLUSTER_FULL is set (make cluster-test), else `short`."""
    return full if FULL else short


def store_mode_from_environment() -> str:
    mode = os.environ.get("CLUSTER_STORE", "postgres")
    if mode not in STORE_MODES:
        raise ValueError(f"CLUSTER_STORE must be one of {STORE_MODES}, not {mode!r}")
    return mode


class ClusterError(RuntimeError):
    """A part of the cluster did not start or did not answer in time."""


# Processes ------------------------------------------------------------------------------------

def free_ports(count: int) -> list[int]:
    """`count` distinct ports that were free on 127.0.0.1 a moment ago."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def wait_until(condition: Callable[[], bool], timeout: float, what: str,
               alive: Callable[[], bool] = lambda: True, interval: float = 0.05) -> None:
    """Polls `condition` until it holds; raises ClusterError after `timeout` seconds, or at once
    when `alive` says the process it waits for has gone."""
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return
        if not alive():
            raise ClusterError(f"{what}: the process exited")
        if time.monotonic() >= deadline:
            raise ClusterError(f"{what}: not within {timeout}s")
        time.sleep(interval)


def child_pids(pid: int) -> list[int]:
    """The PIDs of `pid`'s direct children (from /proc)."""
    children = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The fields after the parenthesised command name: state, ppid, ...
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            children.append(int(entry.name))
    return children


def stop_process(process: subprocess.Popen, signum: int = signal.SIGTERM,
                 timeout: float = STOP_TIMEOUT) -> int:
    """Sends `signum` to `process` and waits; after `timeout` SIGKILLs it and the children it
    still has (so that nothing it started outlives it), and waits again."""
    if process.poll() is None:
        os.kill(process.pid, signum)
        try:
            return process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            children = child_pids(process.pid)
            os.kill(process.pid, signal.SIGKILL)
            for child in children:
                try:
                    os.kill(child, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            process.wait(timeout=timeout)
    return process.returncode


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as error:
        return f"({error})"
    return "\n".join(text.splitlines()[-lines:])


# PostgreSQL -----------------------------------------------------------------------------------

def postgres_bin_dir() -> Path:
    """The newest /usr/lib/postgresql/<version>/bin with initdb and postgres (Debian's layout),
    or $PG_BIN_DIR."""
    configured = os.environ.get("PG_BIN_DIR")
    if configured:
        return Path(configured)
    candidates = []
    for directory in Path("/usr/lib/postgresql").glob("*/bin"):
        version = directory.parent.name
        if version.isdigit() and (directory / "initdb").is_file() and (directory / "postgres").is_file():
            candidates.append((int(version), directory))
    if not candidates:
        raise ClusterError("no PostgreSQL server in /usr/lib/postgresql/*/bin: install Debian's postgresql package")
    return max(candidates)[1]


def unprivileged_account() -> pwd.struct_passwd | None:
    """Who runs initdb and postgres: nobody else when this process is not root (they refuse
    root); else the `postgres` account Debian's package creates, or `nobody`."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise ClusterError("running as root, and there is neither a postgres nor a nobody account to run PostgreSQL as")


class Postgres:
    """A PostgreSQL server of its own: trust authentication, superuser `role`, database
    `database`, listening on 127.0.0.1:`port` and on a Unix socket in its directory."""

    def __init__(self, log_directory: Path, role: str = "reactor", database: str = "reactor") -> None:
        self.log_directory = log_directory
        self.role = role
        self.database = database
        self.bin = postgres_bin_dir()
        self.account = unprivileged_account()
        self.root: Path | None = None
        self.process: subprocess.Popen | None = None
        self.port = 0
        self.log_path = log_directory / "postgres.log"

    @property
    def url(self) -> str:
        return f"postgres://{self.role}@127.0.0.1:{self.port}/{self.database}"

    def _as_account(self) -> dict:
        if self.account is None:
            return {}
        return {"user": self.account.pw_uid, "group": self.account.pw_gid, "extra_groups": []}

    def start(self) -> None:
        # Not in pytest's directory: the account PostgreSQL runs as could not reach into it.
        self.root = Path(tempfile.mkdtemp(prefix="reactor-postgres-"))
        if self.account is not None:
            os.chown(self.root, self.account.pw_uid, self.account.pw_gid)
        data, sockets = self.root / "data", self.root / "sockets"
        with open(self.log_directory / "initdb.log", "w") as log:
            result = subprocess.run(
                [str(self.bin / "initdb"), "--pgdata", str(data), "--auth=trust", f"--username={self.role}",
                 "--encoding=UTF8", "--locale=C", "--no-sync"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.root,
                timeout=120, **self._as_account())
        if result.returncode != 0:
            raise ClusterError(f"initdb failed:\n{tail(self.log_directory / 'initdb.log')}")
        os.mkdir(sockets)
        if self.account is not None:
            os.chown(sockets, self.account.pw_uid, self.account.pw_gid)
        self.port = free_ports(1)[0]
        self._run_server()
        try:
            self.psql(f'CREATE DATABASE "{self.database}"', database="postgres")
        except ClusterError as error:
            raise ClusterError(f"{error}\n{tail(self.log_path)}") from None

    def _run_server(self) -> None:
        """Starts the server on the data directory and port chosen by `start` and waits until it
        accepts connections."""
        assert self.root is not None
        with open(self.log_path, "a") as log:
            self.process = subprocess.Popen(
                [str(self.bin / "postgres"), "-D", str(self.root / "data"), "-p", str(self.port),
                 "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={self.root / 'sockets'}"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.root,
                **self._as_account())
        try:
            wait_until(self._ready, READY_TIMEOUT, "PostgreSQL accepting connections",
                       alive=lambda: self.process.poll() is None)
        except ClusterError as error:
            raise ClusterError(f"{error}\n{tail(self.log_path)}") from None

    def pause(self) -> None:
        """Stops the server (fast shutdown: clients are disconnected) and keeps its data, as a
        database that goes away for a while would; `resume` starts it again on the same port."""
        if self.process is not None:
            stop_process(self.process, signal.SIGINT)

    def resume(self) -> None:
        self._run_server()

    def _ready(self) -> bool:
        result = subprocess.run(
            [str(self.bin / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port), "-U", self.role,
             "-d", "postgres", "-t", "1"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)
        return result.returncode == 0

    def psql(self, sql: str, database: str | None = None, timeout: float = 30.0) -> str:
        """Runs `sql` with psql and returns its output: rows one a line, columns separated by
        `|`, no headers. Raises ClusterError when psql fails."""
        result = subprocess.run(
            [str(self.bin / "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
             "-h", "127.0.0.1", "-p", str(self.port), "-U", self.role, "-d", database or self.database,
             "-c", sql],
            capture_output=True, text=True, timeout=timeout, env={**os.environ, "PGCONNECT_TIMEOUT": "5"})
        if result.returncode != 0:
            raise ClusterError(f"psql failed ({result.returncode}) on {sql!r}: {result.stderr.strip()}")
        return result.stdout.rstrip("\n")

    def stop(self) -> None:
        """Fast shutdown (SIGINT: clients are disconnected), then the data directory is removed."""
        if self.process is not None:
            stop_process(self.process, signal.SIGINT)
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None


# nginx ----------------------------------------------------------------------------------------

ACCESS_LOG_FORMAT = '$request_method $request_uri $status "$upstream_addr" "$upstream_status"'
ACCESS_LOG_LINE = re.compile(r'^(\S+) (\S+) (\d+) "([^"]*)" "([^"]*)"$')
MARKER = re.compile(r"^(?P<indent>\s*)(?P<directive>[^#]*;)\s*# cluster\.py: (?P<key>\w+)\b.*$")


def render_nginx_conf(text: str, *, listen_port: int, node_ports: list[int], directory: Path,
                      as_root: bool) -> str:
    """docker/nginx.conf for 127.0.0.1: the lines marked `# cluster.py: KEY` get the local
    listen address, node addresses, pid and log paths (and `user root;` when nginx starts as
    root, since its workers write temporary files in `directory`), and the access log a format
    naming the node that answered; the temporary paths are put at the top of the http block.
    Everything else, the routing, is kept as written."""
    output: list[str] = []
    seen: dict[str, int] = {}
    for line in text.splitlines():
        match = MARKER.match(line)
        if match is None:
            output.append(line)
            if line.strip() == "http {":
                for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
                    output.append(f"    {kind}_temp_path {directory / (kind + '_temp')};")
            continue
        indent, directive, key = match["indent"], match["directive"], match["key"]
        seen[key] = seen.get(key, 0) + 1
        words = directive.rstrip(";").split()
        if key == "user":
            if as_root:
                output.append(f"{indent}user root;")
        elif key == "pid":
            output.append(f"{indent}pid {directory / 'nginx.pid'};")
        elif key == "error_log":
            output.append(f"{indent}error_log {directory / 'error.log'} {' '.join(words[2:]) or 'notice'};")
        elif key == "access_log":
            # Which node served each request, for the tests (see Cluster.passages).
            output.append(f"{indent}log_format cluster '{ACCESS_LOG_FORMAT}';")
            output.append(f"{indent}access_log {directory / 'access.log'} cluster;")
        elif key == "listen":
            output.append(f"{indent}listen 127.0.0.1:{listen_port};")
        elif key == "servers":
            # The servers are replaced as one block, in place of the first, keeping its parameters.
            if seen[key] == 1:
                parameters = " ".join(words[2:])
                for port in node_ports:
                    output.append(f"{indent}server 127.0.0.1:{port} {parameters}".rstrip() + ";")
        else:
            raise ClusterError(f"{NGINX_CONF}: unknown marker {key!r}")
    missing = {"user", "pid", "error_log", "access_log", "listen", "servers"} - set(seen)
    if missing:
        raise ClusterError(f"{NGINX_CONF}: no line marked cluster.py: {', '.join(sorted(missing))}")
    return "\n".join(output) + "\n"


@dataclass
class Passage:
    """One request as nginx logged it: the nodes it tried ("127.0.0.1:PORT") and their answers."""

    method: str
    uri: str
    status: int
    upstreams: list[str]
    upstream_statuses: list[str]

    @classmethod
    def parse(cls, line: str) -> "Passage | None":
        match = ACCESS_LOG_LINE.match(line)
        if match is None:
            return None
        method, uri, status, upstreams, statuses = match.groups()
        split = lambda text: [part for part in re.split(r", | : ", text) if part and part != "-"]
        return cls(method, uri, int(status), split(upstreams), split(statuses))


class ForegroundProxy:
    """A proxy run in the foreground on `port`: started until it listens, stopped by its PID."""

    name = "proxy"
    port: int
    process: subprocess.Popen | None = None

    def _launch(self, command: list[str], output: Path, logs: list[Path]) -> None:
        """Runs `command` with its output to `output`, and waits until the proxy listens; on
        failure, the tails of `logs` say why."""
        with open(output, "w") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            wait_until(lambda: port_open(self.port), READY_TIMEOUT, f"{self.name} listening",
                       alive=lambda: self.process.poll() is None)
        except ClusterError as error:
            raise ClusterError("\n".join([str(error), *(tail(log) for log in logs)])) from None

    def stop(self) -> None:
        """Fast shutdown (SIGTERM: open event streams are cut, not waited for)."""
        if self.process is not None:
            stop_process(self.process, signal.SIGTERM)


class Nginx(ForegroundProxy):
    """nginx in the foreground with docker/nginx.conf rendered for 127.0.0.1."""

    name = "nginx"

    def __init__(self, directory: Path, node_ports: list[int], source: Path = NGINX_CONF) -> None:
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self.binary = shutil.which("nginx") or "/usr/sbin/nginx"
        self.port = free_ports(1)[0]
        self.config = directory / "nginx.conf"
        self.config.write_text(render_nginx_conf(source.read_text(), listen_port=self.port,
                                                 node_ports=node_ports, directory=directory,
                                                 as_root=os.geteuid() == 0))
        self.error_log = directory / "error.log"
        self.access_log = directory / "access.log"

    def _command(self, *extra: str) -> list[str]:
        # -e: the log for messages before the configuration is read (else /var/log/nginx).
        return [self.binary, "-e", str(self.error_log), "-p", f"{self.directory}/", "-c", str(self.config), *extra]

    def test(self) -> subprocess.CompletedProcess:
        """`nginx -t` on the rendered configuration."""
        return subprocess.run(self._command("-t"), capture_output=True, text=True, timeout=30)

    def start(self) -> None:
        output = self.directory / "nginx.out"
        self._launch(self._command("-g", "daemon off;"), output, [output, self.error_log])


HAPROXY_CFG = REPO_ROOT / "docker" / "haproxy.cfg"
HAPROXY_MARKER = re.compile(r"^(?P<indent>\s*)(?P<directive>[^#]*?)\s*# cluster\.py: (?P<key>\w+)\b.*$")


def render_haproxy_cfg(text: str, *, listen_port: int, node_ports: list[int], served_by_header: bool) -> str:
    """docker/haproxy.cfg for 127.0.0.1: the line marked `# cluster.py: bind` listens on
    `listen_port`, and each backend's servers marked `# cluster.py: servers` become node1..N on
    `node_ports`, with the first line's parameters (its node's name in them changed for each).
    With `served_by_header`, each answer names the node that gave it in `X-Served-By` (for the
    tests). Everything else is kept as written."""
    output: list[str] = []
    seen: set[str] = set()
    servers_written = False
    for line in text.splitlines():
        match = HAPROXY_MARKER.match(line)
        if match is None:
            servers_written = servers_written and line.strip().startswith("server ")
            output.append(line)
            continue
        indent, key = match["indent"], match["key"]
        seen.add(key)
        if key == "bind":
            output.append(f"{indent}bind 127.0.0.1:{listen_port}")
        elif key == "servers":
            if not servers_written:
                if served_by_header:
                    output.append(f"{indent}http-response set-header X-Served-By %s")
                _, first_name, _, *parameters = match["directive"].split()
                for index, port in enumerate(node_ports):
                    name = f"node{index + 1}"
                    tail = " ".join(word.replace(first_name, name) for word in parameters)
                    output.append(f"{indent}server {name} 127.0.0.1:{port} {tail}".rstrip())
                servers_written = True
        else:
            raise ClusterError(f"{HAPROXY_CFG}: unknown marker {key!r}")
    if seen != {"bind", "servers"}:
        raise ClusterError(f"{HAPROXY_CFG}: the lines marked cluster.py: bind and servers are needed")
    return "\n".join(output) + "\n"


class HAProxy(ForegroundProxy):
    """HAProxy in the foreground with docker/haproxy.cfg rendered for 127.0.0.1."""

    name = "haproxy"

    def __init__(self, directory: Path, node_ports: list[int], served_by_header: bool = True) -> None:
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self.binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
        self.port = free_ports(1)[0]
        self.config = directory / "haproxy.cfg"
        self.config.write_text(render_haproxy_cfg(HAPROXY_CFG.read_text(), listen_port=self.port,
                                                  node_ports=node_ports, served_by_header=served_by_header))
        self.log = directory / "haproxy.log"

    def test(self) -> subprocess.CompletedProcess:
        """`haproxy -c` on the rendered configuration."""
        return subprocess.run([self.binary, "-c", "-f", str(self.config)], capture_output=True, text=True, timeout=30)

    def start(self) -> None:
        # -db: in the foreground; -W: master-worker, so SIGTERM stops it whole.
        self._launch([self.binary, "-W", "-db", "-f", str(self.config)], self.log, [self.log])


# The cluster ----------------------------------------------------------------------------------

class Cluster:
    """PostgreSQL, `nodes` reactor-server nodes and nginx in front of them, on 127.0.0.1.

    `directory` keeps the logs and configuration (give it pytest's tmp_path). Nodes run with
    NODE_ID=node1..N and LEASE_S=`lease_s`, plus `node_args` and `node_env`. Use it as a context
    manager, or call start() and close() (close stops whatever did start, also after a failed
    start)."""

    def __init__(self, directory: Path, *, nodes: int = 3, lease_s: float = 2, node_store: str | None = None,
                 node_args: tuple[str, ...] = (), node_env: dict[str, str] | None = None,
                 app: App = REACTOR_SERVER) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.store_mode = node_store or store_mode_from_environment()
        if self.store_mode not in STORE_MODES:
            raise ValueError(f"node_store must be one of {STORE_MODES}, not {self.store_mode!r}")
        self.lease_s = lease_s
        self.node_args = tuple(node_args)
        self.node_env = dict(node_env or {})
        self.app = app
        self.node_ids = [f"node{index + 1}" for index in range(nodes)]
        self.node_ports = free_ports(nodes)
        self.nodes: list[Server | None] = [None] * nodes
        self.postgres = Postgres(self.directory)
        self.nginx: Nginx | None = None

    # Life cycle

    def start(self) -> "Cluster":
        try:
            self.postgres.start()
            for index in range(len(self.nodes)):
                self.start_node(index)
            self.nginx = Nginx(self.directory / "nginx", self.node_ports)
            self.nginx.start()
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Stops nginx, the nodes (SIGTERM, bounded) and PostgreSQL, whichever are running; each
        is stopped even if stopping another failed (the first error is raised afterwards)."""
        steps = [self.nginx.stop] if self.nginx is not None else []
        steps += [node.stop for node in self.nodes if node is not None]
        steps.append(self.postgres.stop)
        failure = None
        for step in steps:
            try:
                step()
            except Exception as error:  # noqa: BLE001 - the rest must still be stopped
                failure = failure or error
        if failure is not None:
            raise failure

    def __enter__(self) -> "Cluster":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.close()

    # Nodes

    def node_store(self, index: int) -> str:
        """The --store of node `index`."""
        if self.store_mode == "postgres":
            return self.postgres.url
        return f"sqlite:{self.directory / 'stores' / self.node_ids[index]}.sqlite"

    def start_node(self, index: int) -> Server:
        """Starts node `index` on its port (it must not be running)."""
        assert self.nodes[index] is None or self.nodes[index].process.poll() is not None, "node is running"
        (self.directory / "stores").mkdir(exist_ok=True)
        env = {"NODE_ID": self.node_ids[index], "LEASE_S": f"{self.lease_s:g}", **self.node_env}
        # --port after conftest's --port 0: the last one counts.
        self.nodes[index] = Server("--port", str(self.node_ports[index]), *self.node_args,
                                   env=env, store=self.node_store(index), app=self.app)
        return self.nodes[index]

    def node(self, index: int) -> Server:
        node = self.nodes[index]
        assert node is not None, f"{self.node_ids[index]} was never started"
        return node

    def kill_node(self, index: int) -> int:
        """SIGKILL, as in a crash; returns the exit status once it has gone."""
        node = self.node(index)
        node.signal(signal.SIGKILL)
        node.wait(timeout=STOP_TIMEOUT)
        return node.stop()

    def stop_node(self, index: int) -> int | None:
        """SIGTERM and a bounded wait (conftest's Server.stop); returns the exit status."""
        return self.node(index).stop()

    def restart_node(self, index: int) -> Server:
        """A new process for node `index`: same node id, port and store. A node still running is
        stopped first (SIGTERM)."""
        if self.nodes[index] is not None:
            self.nodes[index].stop()
        return self.start_node(index)

    # The proxy

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def port(self) -> int:
        assert self.nginx is not None, "the cluster is not started"
        return self.nginx.port

    @property
    def base(self) -> str:
        return f"http://{self.host}:{self.port}"

    def request(self, method: str, path: str, body=None, headers: dict[str, str] | None = None,
                timeout: float = 10.0) -> Reply:
        """A request through the proxy."""
        return request(self.host, self.port, method, path, body, headers, timeout)

    def create(self, type_name: str = "counter") -> dict:
        """Creates an instance through the proxy; returns its snapshot."""
        reply = self.request("POST", "/reactors", {"type": type_name})
        assert reply.status == 201, reply
        return reply.json()

    def events(self, instance_id: str, headers: dict[str, str] | None = None, query: str = "") -> EventStream:
        """An instance's event stream through the proxy."""
        return EventStream(self.host, self.port, f"/reactors/{instance_id}/events{query}", headers or {})

    def passages(self, uri: str | None = None, method: str | None = None) -> list[Passage]:
        """The requests nginx has logged so far, oldest first, optionally only those for `uri`
        (path and query as sent) and `method`. nginx logs a request as it finishes it, which may
        be just after its client has the answer: wait with `wait_for_passages`."""
        assert self.nginx is not None, "the cluster is not started"
        try:
            lines = self.nginx.access_log.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return []
        found = [passage for passage in map(Passage.parse, lines) if passage is not None]
        return [passage for passage in found
                if (uri is None or passage.uri == uri) and (method is None or passage.method == method)]

    def wait_for_passages(self, count: int, uri: str | None = None, method: str | None = None,
                          timeout: float = 5.0) -> list[Passage]:
        """The logged requests for `uri` and `method` once there are at least `count` (bounded)."""
        wait_until(lambda: len(self.passages(uri, method)) >= count, timeout,
                   f"{count} logged requests for {method or 'any method'} {uri or 'any path'}")
        return self.passages(uri, method)

    def node_index(self, upstream: str) -> int:
        """Which node an upstream address ("127.0.0.1:PORT") of a Passage is."""
        return self.node_ports.index(int(upstream.rsplit(":", 1)[1]))

    def nginx_test(self) -> subprocess.CompletedProcess:
        assert self.nginx is not None, "the cluster is not started"
        return self.nginx.test()

    # The database

    def psql(self, sql: str) -> str:
        """Runs `sql` on the cluster's database; rows one a line, columns separated by `|`."""
        return self.postgres.psql(sql)

    # Diagnostics

    def logs(self, lines: int = 40) -> str:
        """The last lines of every log: PostgreSQL, nginx, each node."""
        parts = [f"--- postgres ({self.postgres.log_path})\n{tail(self.postgres.log_path, lines)}"]
        if self.nginx is not None:
            for path in (self.nginx.directory / "nginx.out", self.nginx.error_log):
                parts.append(f"--- nginx ({path})\n{tail(path, lines)}")
        for node_id, node in zip(self.node_ids, self.nodes):
            if node is not None:
                path = Path(node.log.name)
                parts.append(f"--- {node_id} ({path})\n{tail(path, lines)}")
        return "\n".join(parts)


def run_with_postgres(command: list[str]) -> int:
    """Runs `command` with a PostgreSQL server of its own started for it, its URL in
    $REACTOR_TEST_POSTGRES (the Swift store tests read it); stops the server after. Returns the
    command's exit status."""
    directory = Path(tempfile.mkdtemp(prefix="reactor-test-postgres-"))
    postgres = Postgres(directory)
    try:
        postgres.start()
        return subprocess.run(command, env={**os.environ, "REACTOR_TEST_POSTGRES": postgres.url}).returncode
    finally:
        postgres.stop()
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    import sys

    # python Tests/python/cluster.py with-postgres -- COMMAND...
    if len(sys.argv) < 4 or sys.argv[1:3] != ["with-postgres", "--"]:
        sys.exit("usage: cluster.py with-postgres -- COMMAND [ARGS...]")
    sys.exit(run_with_postgres(sys.argv[3:]))
