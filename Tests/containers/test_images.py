"""docker/Dockerfile's and the starter's images, built by podman and run: what a deployment relies
on, checked against the real container over real HTTP and server-sent events."""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import threading
import zlib

import pytest

from conftest import (HARDENED, LABEL, REACTOR_SERVER, REACTOR_SERVER_IMAGE, REPO_ROOT, STARTER, STOP_TIMEOUT,
                      Container, first_state, podman, wait_until)

#: docker/Dockerfile's debug-info target: the binary's debug information (Tests/containers/run).
DEBUG_INFO = os.environ.get("REACTOR_SERVER_DEBUG_INFO")
#: The release the starter's image was built against (Tests/containers/run).
STARTER_RELEASE = os.environ.get("STARTER_RELEASE")

IMAGES = [pytest.param(REACTOR_SERVER, id="reactor-server"), pytest.param(STARTER, id="starter")]


def healthcheck(container: Container) -> int:
    """`podman healthcheck run`: 0 when the image's HEALTHCHECK passes."""
    return podman("healthcheck", "run", container.name, check=False, timeout=30).returncode


@pytest.mark.parametrize("image", IMAGES)
def test_health_check_passes_and_fails_while_the_server_is_stopped(containers, image):
    container = containers.run(image)
    assert healthcheck(container) == 0, container.logs()
    # SIGSTOP freezes the server (PID 1) inside the running container: the health command
    # connects but gets no answer within its 3 s, so the check fails, until SIGCONT.
    podman("kill", "--signal", "STOP", container.name)
    try:
        assert healthcheck(container) != 0
    finally:
        podman("kill", "--signal", "CONT", container.name)
    wait_until(lambda: healthcheck(container) == 0, 30, "the health check passing again")


@pytest.mark.parametrize("image", IMAGES)
def test_a_session_survives_the_containers_replacement_and_streams_resume(containers, image):
    volume = containers.volume()
    first = containers.run(image, volume=volume)
    instance_id = first.create()
    for _ in range(3):
        advanced = first.act(instance_id)
    version, value = advanced["version"], advanced["state"]["value"]
    assert value == 3 * image.step, advanced
    stream = first.events(instance_id)
    assert first_state(stream).id == str(version)

    # podman stop: SIGTERM ends the open stream, commits the sessions and exits 0, well within
    # the stop timeout (after which podman would SIGKILL).
    took = first.stop()
    assert first.exit_code() == 0, first.logs()
    assert took < STOP_TIMEOUT, f"podman stop took {took:.1f}s"
    assert stream.closed.wait(timeout=10), "the event stream stayed open after podman stop"
    first.remove()

    # A new container on the same named volume: the session at the same version and value,
    # made with its stored parameters (the next step is the same).
    second = containers.run(image, volume=volume)
    again = second.session(instance_id)
    assert (again["version"], again["state"]["value"]) == (version, value), again
    resumed = second.events(instance_id, headers={"Last-Event-ID": str(version)})
    after = second.act(instance_id)
    assert after["state"]["value"] == value + image.step, after
    states = resumed.states_until(lambda state: state["value"] == value + image.step)
    assert all(int(event.id) > version for event in states), states
    resumed.close()

    # SIGTERM through podman stop again: exit 0.
    second.stop()
    assert second.exit_code() == 0, second.logs()


def test_kill_9_loses_no_acknowledged_action(containers):
    volume = containers.volume()
    server = containers.run(REACTOR_SERVER, volume=volume)
    instance_id = server.create()
    acknowledged = []
    stop = threading.Event()

    def hammer():
        while not stop.is_set():
            try:
                reply = server.request("POST", f"/reactors/{instance_id}/actions", '"increase"', timeout=5)
            except OSError:
                return
            if reply.status == 202:
                acknowledged.append(reply.json()["seq"])

    workers = [threading.Thread(target=hammer) for _ in range(4)]
    for worker in workers:
        worker.start()
    try:
        wait_until(lambda: len(acknowledged) >= 200, 60, "200 acknowledged actions")
        podman("kill", "--signal", "KILL", server.name)
        assert server.wait_exited(30) != 0
    finally:
        stop.set()
        for worker in workers:
            worker.join(timeout=10)
    server.remove()
    restarted = containers.run(REACTOR_SERVER, volume=volume)
    # Each acknowledged action changes the value exactly once: unstarted ones run after the
    # restart, interrupted ones finish through the recovery hook. An action the server took but
    # whose 202 the kill cut off may count too: at most one per worker. One more action, waited
    # for, runs after every recovered one.
    step = REACTOR_SERVER.step
    last = restarted.act(instance_id)["state"]["value"] - step
    assert len(acknowledged) * step <= last <= (len(acknowledged) + len(workers)) * step, \
        (last, len(acknowledged), restarted.logs()[-3000:])


def test_version_names_the_build_or_the_release_the_service_was_built_against():
    def version(image) -> str:
        return podman("run", "--rm", "--label", LABEL, image.tag, "--version").stdout

    # Tests/containers/run passes `git describe` and the commit as build arguments, as the
    # Dockerfile's header says to.
    head = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    printed = version(REACTOR_SERVER)
    assert re.fullmatch(rf"reactor-server \S+ \(commit {head}\)\n", printed), printed
    # The starter's Dockerfile, built unmodified as a team builds it, is given neither: its service
    # names the ReactorServer release it was built against.
    assert STARTER_RELEASE, "STARTER_RELEASE is set by Tests/containers/run"
    assert version(STARTER) == f"my-service (ReactorServer {STARTER_RELEASE})\n"


def test_runs_unprivileged_on_a_read_only_root_without_capabilities(containers):
    server = containers.run(REACTOR_SERVER, options=HARDENED)
    instance_id = server.create()
    assert server.act(instance_id)["state"]["value"] == REACTOR_SERVER.step
    status = server.exec("cat", "/proc/1/status", check=True).stdout
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    assert fields["Uid"].split() == ["10001"] * 4, fields["Uid"]
    assert fields["Gid"].split() == ["10001"] * 4, fields["Gid"]
    for capabilities in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(fields[capabilities], 16) == 0, (capabilities, fields[capabilities])
    assert fields["NoNewPrivs"].strip() == "1"
    root = next(line.split() for line in server.exec("cat", "/proc/mounts", check=True).stdout.splitlines()
                if line.split()[1] == "/")
    assert "ro" in root[3].split(","), root
    assert server.exec("touch", "/usr/local/bin/written").returncode != 0
    # The store on the volume, readable by the server's user only.
    assert server.exec("stat", "-c", "%u %a", "/data/sessions.sqlite", check=True).stdout.split() == ["10001", "600"]
    assert server.exec("reactor-server", "health").returncode == 0


def test_thread_counts_follow_the_containers_cpu_limit(containers):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one processor: a limit of one CPU changes nothing")
    server = containers.run(REACTOR_SERVER, options=("--cpus", "1", "--memory", "256m", *HARDENED),
                            env=("LOG_FORMAT=json",))
    listening = [json.loads(line) for line in server.logs().splitlines()
                 if line.startswith("{") and '"listening"' in line]
    assert listening, server.logs()
    metadata = listening[0]["metadata"]
    assert (metadata["http-threads"], metadata["reactor-threads"]) == ("1", "1"), metadata
    # And it serves within the memory limit.
    instance_id = server.create()
    for _ in range(20):
        reply = server.act(instance_id)
    assert reply["state"]["value"] == 20 * REACTOR_SERVER.step
    assert server.running()


def test_backup_through_exec_while_serving_and_restore_through_the_stopped_container(containers):
    volume = containers.volume()
    server = containers.run(REACTOR_SERVER, volume=volume)
    instance_id = server.create()
    server.act(instance_id)
    taken = server.exec("reactor-server", "backup", "/data/backup.sqlite")
    assert taken.returncode == 0 and "backed up 1 session" in taken.stdout, taken
    assert server.exec("reactor-server", "check", "/data/backup.sqlite").returncode == 0
    server.act(instance_id)
    server.stop()
    assert server.exit_code() == 0, server.logs()
    # The server's container is stopped, not removed: a one-off container with its volumes puts
    # the backup in the store's place, and the same container starts again from it.
    restored = podman("run", "--rm", "--network", "none", "--volumes-from", server.name,
                      REACTOR_SERVER_IMAGE, "restore", "/data/backup.sqlite", check=False)
    assert restored.returncode == 0, restored
    podman("start", server.name)
    server.wait_serving()
    assert server.session(instance_id)["state"]["value"] == REACTOR_SERVER.step


def section_headers(binary: bytes) -> list[tuple]:
    """The section headers of a 64-bit ELF file, as tuples of Elf64_Shdr's fields (name, type,
    flags, address, offset, size, link, info, alignment, entry size)."""
    (shoff,) = struct.unpack_from("<Q", binary, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", binary, 0x3A)
    return [struct.unpack_from("<IIQQQQIIQQ", binary, shoff + i * shentsize) for i in range(shnum)]


def function_symbols(binary: bytes) -> list[str]:
    """The names of the function symbols in an ELF file's symbol table (.symtab)."""
    sections = section_headers(binary)
    names = []
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind != 2:  # SHT_SYMTAB
            continue
        strings_offset = sections[link][4]
        for entry in range(offset, offset + size, entsize):
            name, info = struct.unpack_from("<IB", binary, entry)
            if info & 0xF == 2:  # STT_FUNC
                end = binary.index(b"\0", strings_offset + name)
                names.append(binary[strings_offset + name:end].decode(errors="replace"))
    return names


def test_a_crash_prints_a_backtrace_with_the_binarys_function_names(containers):
    server = containers.run(REACTOR_SERVER)
    # A fatal signal is handled as a crash: the runtime runs the static backtracer the image
    # ships, which prints the backtrace to standard error. (Sent from outside, the signal leaves
    # the process running once the handler returns; the test removes the container.)
    podman("kill", "--signal", "SEGV", server.name)
    wait_until(lambda: "Backtrace took" in server.logs(), 60, "the crash's backtrace")
    log = server.logs()
    assert "*** Program crashed" in log and 'crashed:' in log, log[-4000:]
    frames = [line for line in log.splitlines() if re.match(r"\s*\d+ .*0x[0-9a-f]+ ", line)]
    assert any(frame.endswith(" in reactor-server") for frame in frames), frames
    # The names the backtracer gives a frame in reactor-server come from its symbol table: it
    # holds the Swift functions the modules export or share with each other.
    binary = reactor_server_binary()
    swift_functions = [name for name in function_symbols(binary) if name.startswith("$s")]
    assert len(swift_functions) > 10_000, len(swift_functions)
    assert any("ReactorHTTP" in name or "11ReactorHTTP" in name for name in swift_functions)


def test_with_its_debug_information_mounted_a_crash_names_every_function(containers):
    """The debug-info target's file (Tests/containers/run builds it), mounted read-only where the
    backtracer looks for it: the frames of a crash are named after the functions they are in,
    also those the image's binary keeps no symbol of, instead of the nearest global name."""
    assert DEBUG_INFO and os.path.isfile(DEBUG_INFO), f"no debug information at {DEBUG_INFO!r}"
    with open(DEBUG_INFO, "rb") as file:
        debug = file.read()
    binary = reactor_server_binary()
    # The binary names that file and its checksum (.gnu_debuglink: the name, padding to 4 bytes,
    # a CRC-32), so the backtracer takes only the debug information of the same build.
    link = section(binary, ".gnu_debuglink")
    name = link[:link.index(b"\0")].decode()
    (checksum,) = struct.unpack_from("<I", link, len(link) - 4)
    assert (name, checksum) == ("reactor-server.debug", zlib.crc32(debug)), (name, checksum)

    server = containers.run(REACTOR_SERVER, options=(
        "--volume", f"{DEBUG_INFO}:/usr/lib/debug/usr/local/bin/reactor-server.debug:ro"))
    podman("kill", "--signal", "SEGV", server.name)
    wait_until(lambda: "Backtrace took" in server.logs(), 60, "the crash's backtrace")
    log = server.logs()
    frames = re.findall(r"^\s*\d+ .*0x[0-9a-f]+ (.+) \+ (\d+) in reactor-server$", log, re.MULTILINE)
    assert frames, log[-4000:]
    # Each frame is near the start of a function, not megabytes past the last global symbol.
    assert all(int(offset) < 65_536 for _, offset in frames), frames
    # And at least one is named after a function the binary alone has no symbol for.
    kept = set(function_symbols(binary))
    assert any(name in set(function_symbols(debug)) - kept for name, _ in frames), frames


def section(binary: bytes, wanted: str) -> bytes:
    """The contents of an ELF file's section named `wanted`."""
    sections = section_headers(binary)
    (shstrndx,) = struct.unpack_from("<H", binary, 0x3E)
    names_offset = sections[shstrndx][4]
    for name, _, _, _, offset, size, _, _, _, _ in sections:
        end = binary.index(b"\0", names_offset + name)
        if binary[names_offset + name:end].decode() == wanted:
            return binary[offset:offset + size]
    raise AssertionError(f"no section {wanted}")


def reactor_server_binary() -> bytes:
    """/usr/local/bin/reactor-server as the image holds it."""
    return subprocess.run(["podman", "run", "--rm", "--entrypoint", "cat", REACTOR_SERVER_IMAGE, "/usr/local/bin/reactor-server"],
                          capture_output=True, check=True, timeout=120).stdout
