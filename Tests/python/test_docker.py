"""What can be checked of the Docker files without a Docker engine."""

import yaml
from dockerfile_parse import DockerfileParser

from conftest import REPO_ROOT

DOCKER = REPO_ROOT / "docker"


def test_dockerfile_is_multi_stage_and_runs_unprivileged():
    parser = DockerfileParser(path=str(DOCKER / "Dockerfile"))
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


def test_compose_file_builds_from_the_repository_root():
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    service = compose["services"]["reactor-server"]
    assert service["build"] == {"context": "..", "dockerfile": "docker/Dockerfile"}
    assert "8080:8080" in service["ports"]


def test_dockerignore_keeps_build_products_out_of_the_context():
    ignored = (REPO_ROOT / ".dockerignore").read_text().split()
    for pattern in (".git", ".build*", ".venv"):
        assert pattern in ignored
