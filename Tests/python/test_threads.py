"""The default thread counts follow the cgroup CPU quota: a server started in a cgroup allowed
one CPU runs one HTTP event loop and one reactor thread on a machine with more processors.

The test makes a cgroup of its own (cgroup v1's cpu controller, or cgroup v2 with the cpu
controller enabled for children), which needs root; elsewhere it is skipped."""

import json
import os
from pathlib import Path

import pytest

V1 = Path("/sys/fs/cgroup/cpu")
V2 = Path("/sys/fs/cgroup")


def listening_threads(server) -> tuple[int, int]:
    """The HTTP and reactor thread counts the server logged when it started listening."""
    for line in server.stderr().splitlines():
        entry = json.loads(line)
        if entry["message"] == "listening":
            return int(entry["metadata"]["http-threads"]), int(entry["metadata"]["reactor-threads"])
    pytest.fail(f"no listening entry in the log:\n{server.stderr()}")


def v2_has_cpu_controller() -> bool:
    control = V2 / "cgroup.subtree_control"
    return control.exists() and "cpu" in control.read_text(errors="replace").split()


@pytest.fixture
def one_cpu_cgroup():
    """A new cgroup allowed one CPU (100 ms of CPU time per 100 ms): its cgroup.procs file."""
    name = f"reactor-server-test-{os.getpid()}"
    if (V1 / "cpu.cfs_quota_us").exists():
        group = V1 / name
        limit = {"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "100000"}
    elif v2_has_cpu_controller():
        group = V2 / name
        limit = {"cpu.max": "100000 100000"}
    else:
        pytest.skip("no cgroup cpu controller to make a group in")
    try:
        group.mkdir()
        for file, value in limit.items():
            (group / file).write_text(value)
    except OSError as error:
        pytest.skip(f"cannot make a cgroup here: {error}")
    try:
        yield group / "cgroup.procs"
    finally:
        group.rmdir()  # the servers in it have exited by now


def test_thread_counts_follow_the_cgroup_cpu_quota(one_cpu_cgroup, start_server):
    # one_cpu_cgroup first: it is removed after start_server has stopped the servers in it.
    processors = len(os.sched_getaffinity(0))
    if processors < 2:
        pytest.skip("one processor: a quota of one CPU changes nothing")

    def join():
        one_cpu_cgroup.write_text(str(os.getpid()))

    free = start_server("--log-format", "json")
    limited = start_server("--log-format", "json", preexec_fn=join)
    assert str(limited.process.pid) in one_cpu_cgroup.read_text().split()
    assert listening_threads(free) == (processors, processors)
    assert listening_threads(limited) == (1, 1)
    # Flags still win over the default.
    explicit = start_server("--log-format", "json", "--threads", "2", "--reactor-threads", "3", preexec_fn=join)
    assert listening_threads(explicit) == (2, 3)
    for server in (free, limited, explicit):
        assert server.stop() == 0
