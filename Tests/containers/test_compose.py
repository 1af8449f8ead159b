"""docker/compose.yaml through podman-compose: up, serve, down keeps the volume, up again serves
the same sessions."""

from __future__ import annotations

import subprocess

import yaml

from conftest import REACTOR_SERVER_IMAGE, REPO_ROOT, RUN, Published, free_port, podman, wait_until


def compose_file(tmp_path, port: int):
    """docker/compose.yaml with two changes, both about where it runs rather than what: the
    service's port is published on 127.0.0.1 on a free port (8080 on every address may be taken,
    and the tests stay on loopback), and its image is the one this run just built from the same
    Dockerfile (so `up` does not build it again)."""
    spec = yaml.safe_load((REPO_ROOT / "docker/compose.yaml").read_text())
    service = spec["services"]["reactor-server"]
    assert service["ports"] == ["8080:8080"] and service["build"]["dockerfile"] == "docker/Dockerfile", service
    service["ports"] = [f"127.0.0.1:{port}:8080"]
    service["image"] = REACTOR_SERVER_IMAGE
    del service["build"]
    path = tmp_path / "compose.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_compose_up_serves_and_down_keeps_the_volume(tmp_path):
    project = f"{RUN}-compose"
    port = free_port()
    path = compose_file(tmp_path, port)

    def compose(*args: str) -> subprocess.CompletedProcess:
        result = subprocess.run(["podman-compose", "--project-name", project, "--file", str(path), *args],
                                capture_output=True, text=True, timeout=180)
        assert result.returncode == 0, result
        return result

    volume = f"{project}_reactor-data"
    try:
        compose("up", "-d")
        server = Published(f"{project}_reactor-server_1", port)
        server.wait_serving()
        instance_id = server.create()
        advanced = server.act(instance_id)
        compose("down")
        assert podman("ps", "--all", "--quiet", "--filter", f"name=^{project}_").stdout.strip() == ""
        assert podman("volume", "exists", volume, check=False).returncode == 0, "down removed the volume"
        compose("up", "-d")
        server.wait_serving()
        again = server.session(instance_id)
        assert (again["version"], again["state"]) == (advanced["version"], advanced["state"]), again
    finally:
        subprocess.run(["podman-compose", "--project-name", project, "--file", str(path), "down", "-v"],
                       capture_output=True, timeout=180)
    wait_until(lambda: podman("volume", "exists", volume, check=False).returncode != 0, 30,
               "down -v removing the volume")
