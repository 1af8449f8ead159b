"""`reactor-server health`: a container health check that reads the address the server wrote to
--address-file (ADDRESS_FILE) and asks its /healthz, so it follows the port however it was set;
or asks the address --url names."""

import os
import socket
import subprocess

from conftest import server_binary

TIMEOUT = 30


def health(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    clean = {key: value for key, value in os.environ.items() if key not in {"ADDRESS_FILE", "PORT", "HOST"}}
    return subprocess.run([str(server_binary()), "health", *args], env={**clean, **(env or {})},
                          capture_output=True, text=True, timeout=TIMEOUT)


def test_health_follows_the_port_the_flag_set(start_server, tmp_path):
    address_file = tmp_path / "address"
    # PORT says 1 (as an image's environment might), the flag picks another port and wins: the
    # check must ask the port the server listens on.
    server = start_server("--address-file", str(address_file), env={"PORT": "1"})
    assert address_file.read_text() == f"http://127.0.0.1:{server.port}\n"
    result = health("--address-file", str(address_file), env={"PORT": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"127.0.0.1:{server.port}/healthz answered 200" in result.stdout
    assert health(env={"ADDRESS_FILE": str(address_file)}).returncode == 0
    ready = health("--ready", env={"ADDRESS_FILE": str(address_file)})
    assert ready.returncode == 0 and f"ready: http://127.0.0.1:{server.port}/readyz answered 200" in ready.stdout, ready.stdout


def test_address_file_from_the_environment_and_removed_on_stop(start_server, tmp_path):
    address_file = tmp_path / "address"
    server = start_server(env={"ADDRESS_FILE": str(address_file)})
    assert address_file.read_text().strip() == server.base
    assert server.stop() == 0
    assert not address_file.exists()
    result = health("--address-file", str(address_file))
    assert result.returncode == 1 and "unhealthy" in result.stdout, result.stdout + result.stderr
    result = health("--ready", "--address-file", str(address_file))
    assert result.returncode == 1 and result.stdout.startswith("not ready: no server address in"), result.stdout


def test_unhealthy_when_nothing_answers(tmp_path):
    # A port nothing listens on: bound, then closed again.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    address_file = tmp_path / "address"
    address_file.write_text(f"http://127.0.0.1:{port}\n")
    result = health("--address-file", str(address_file))
    assert result.returncode == 1 and "did not answer" in result.stdout, result.stdout + result.stderr
    result = health("--ready", "--address-file", str(address_file))
    assert result.returncode == 1 and f"not ready: http://127.0.0.1:{port}/readyz did not answer" in result.stdout, result.stdout
    # Without a file to read, the check cannot know the address.
    missing = health()
    assert missing.returncode != 0 and "--url" in missing.stderr, missing.stdout + missing.stderr
    result = health("--url", f"http://127.0.0.1:{port}")
    assert result.returncode == 1 and f"unhealthy: http://127.0.0.1:{port}/healthz did not answer" in result.stdout, result.stdout


def test_url_names_the_address_of_a_server_run_by_hand(start_server, tmp_path):
    """`reactor-server health --url …` for a server started without an address file; the URL,
    given, wins over ADDRESS_FILE."""
    server = start_server()
    for url in [server.base, server.base + "/"]:
        result = health("--url", url, env={"ADDRESS_FILE": str(tmp_path / "none")})
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"healthy: {server.base}/healthz answered 200" in result.stdout, result.stdout
    ready = health("--ready", "--url", server.base)
    assert ready.returncode == 0 and f"ready: {server.base}/readyz answered 200" in ready.stdout, ready.stdout
    for bad in ["127.0.0.1:8080", "https://127.0.0.1:8080", "http://127.0.0.1", "http://127.0.0.1:8080/healthz"]:
        refused = health("--url", bad)
        assert refused.returncode != 0 and "--url must be http://HOST:PORT" in refused.stderr, (bad, refused.stderr)
