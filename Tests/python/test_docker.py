"""What can be checked of the Docker files without a Docker engine."""

import json
import shlex
from pathlib import PurePosixPath

import yaml
from dockerfile_parse import DockerfileParser

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
    assert instructions.count("FROM") == 2
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
    build, runtime = _stages(_parser())
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
