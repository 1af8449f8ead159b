"""The command line and the environment: host names, --version, and values refused with a message
naming the setting instead of a silent fallback to the default."""

import os
import re
import subprocess

import pytest

from conftest import server_binary

#: Every environment variable reactor-server reads, so that a test's run sees only its own.
SETTINGS = ("HOST", "PORT", "COUNTER_DELAY_MS", "SEARCH_LATENCY_MS", "THREADS", "REACTOR_THREADS",
            "STALL_TIMEOUT_MS", "MAX_INSTANCES", "MAX_STREAMS", "MAX_STREAMS_PER_INSTANCE",
            "MAX_CONNECTIONS", "MAX_BODY_BYTES", "MAX_HEADER_BYTES", "CONNECTION_TIMEOUT_S",
            "IDLE_TIMEOUT_S", "HISTORY_SIZE", "WAIT_TIMEOUT_MS", "HEARTBEAT_S", "CORS_ORIGINS", "STORE",
            "DURABILITY", "FLUSH_INTERVAL_MS", "PASSIVATE_AFTER_S", "LEASE_S", "NODE_ID", "LOG_LEVEL",
            "LOG_FORMAT")
#: How long a refused configuration may take to exit. A server that accepted it instead would
#: listen until killed, so the run's timeout is what catches that.
REFUSAL_TIMEOUT = 20


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    clean = {key: value for key, value in os.environ.items() if key not in SETTINGS}
    return subprocess.run([str(server_binary()), *args], env={**clean, **(env or {})},
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=REFUSAL_TIMEOUT)


def test_host_may_be_a_name(start_server):
    server = start_server("--host", "localhost")
    assert server.host == "localhost"
    # localhost resolves to 127.0.0.1 first: IPv4 clients and proxies find it there.
    reply = server.request("GET", "/healthz")
    assert reply.status == 200, reply
    from conftest import request
    assert request("127.0.0.1", server.port, "GET", "/healthz").status == 200


def test_a_host_that_does_not_resolve_is_refused():
    result = run("--host", "no-such-host.invalid", "--port", "0", "--store", "memory")
    assert result.returncode != 0
    assert "no-such-host.invalid" in result.stderr, result.stderr


def test_version_names_the_version_and_the_commit():
    result = run("--version")
    assert result.returncode == 0, result.stderr
    # `make` exports what it builds with, so under `make test` the binary must report exactly that;
    # a binary built by a bare `swift build` knows only the release it is (test_metrics.py checks
    # which).
    expected_commit = os.environ.get("REACTOR_SERVER_COMMIT")
    if expected_commit:
        expected = f"reactor-server {os.environ['REACTOR_SERVER_VERSION']} (commit {expected_commit})\n"
        assert result.stdout == expected, result.stdout
    else:
        assert re.fullmatch(r"reactor-server (\S+ \(commit [0-9a-f]{40}\)|\(ReactorServer [0-9.]+\))\n",
                            result.stdout), result.stdout


@pytest.mark.parametrize("name,value", [
    ("PORT", "abc"),
    ("PORT", "70000"),
    ("MAX_BODY_BYTES", "-1"),
    ("MAX_BODY_BYTES", "1MB"),
    ("COUNTER_DELAY_MS", "1.5"),
    ("REACTOR_THREADS", "-2"),
    ("DURABILITY", "maybe"),
    ("LOG_LEVEL", "loud"),
    ("STORE", "mongodb://x"),
    ("LOG_FORMAT", "xml"),
    ("AUTH_QUERY_TOKEN", "maybe"),
])
def test_a_bad_environment_value_is_refused_naming_it(name, value):
    result = run("--port", "0", env={"STORE": "memory", name: value})
    assert result.returncode != 0, result.stdout + result.stderr
    assert name in result.stderr, result.stderr
    assert "listening" not in result.stdout


def test_a_variable_only_serve_reads_does_not_stop_the_store_commands(start_server, tmp_path):
    """PORT=abc stops `serve`, not `check`, `backup` or `copy`, which do not read it."""
    store = tmp_path / "sessions.sqlite"
    server = start_server(store=f"sqlite:{store}")
    server.create("counter")
    assert server.stop() == 0
    bad = {"PORT": "abc", "MAX_BODY_BYTES": "1MB", "COUNTER_DELAY_MS": "1.5"}
    for args in (["check", "--store", f"sqlite:{store}"],
                 ["backup", "--store", f"sqlite:{store}", str(tmp_path / "backup.sqlite")],
                 ["copy", "--store", f"sqlite:{store}", f"sqlite:{tmp_path / 'copy.sqlite'}"]):
        result = run(*args, env=bad)
        assert result.returncode == 0, (args, result.stdout + result.stderr)
    assert run("serve", "--store", "memory", env={"PORT": "abc"}).returncode == 64


@pytest.mark.parametrize("flag,value", [
    ("--max-body-bytes", "-1"),
    ("--max-body-bytes", "0"),
    ("--port", "-1"),
    ("--threads", "-3"),
    ("--heartbeat-s", "soon"),
])
def test_a_bad_flag_is_refused_naming_it(flag, value):
    result = run("--port", "0", "--store", "memory", flag, value)
    assert result.returncode != 0, result.stdout + result.stderr
    assert flag in result.stderr and value in result.stderr, result.stderr
    assert "listening" not in result.stdout


def test_an_empty_environment_value_means_unset(start_server):
    server = start_server(env={"MAX_BODY_BYTES": "", "CORS_ORIGINS": ""})
    assert server.request("GET", "/healthz").status == 200
