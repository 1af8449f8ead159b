"""GET /metrics as Prometheus reads it: parsed by prometheus-client's text-format parser, every
family documented and typed, the process and build families there, counters recorded through
swift-metrics by a reactor there, and requests with a wrong method counted under their route."""

import os
import re
import subprocess
import time

from prometheus_client.parser import text_string_to_metric_families

from conftest import REPO_ROOT, server_binary

PROCESS_FAMILIES = {"process_cpu_seconds": "counter", "process_resident_memory_bytes": "gauge",
                    "process_open_fds": "gauge", "process_start_time_seconds": "gauge",
                    "process_max_fds": "gauge", "process_virtual_memory_bytes": "gauge"}


def scrape(server) -> dict:
    """The families of /metrics by name (counters under their name without `_total`, as the
    parser gives them)."""
    reply = server.request("GET", "/metrics")
    assert reply.status == 200
    assert reply.header("Content-Type").startswith("text/plain; version=0.0.4")
    text = reply.body.decode()
    families = {}
    for family in text_string_to_metric_families(text):
        assert family.name not in families, f"{family.name} twice"
        families[family.name] = family
    # Every family has its own # HELP and # TYPE line (the parser would make up an untyped,
    # undocumented family for samples without them).
    for name, family in families.items():
        assert family.type != "unknown", f"{name} has no # TYPE"
        assert family.documentation, f"{name} has no # HELP"
    helps = re.findall(r"^# HELP (\S+) ", text, flags=re.M)
    types = re.findall(r"^# TYPE (\S+) ", text, flags=re.M)
    assert len(helps) == len(set(helps)) == len(types) == len(set(types)) == len(families), (helps, types)
    return families


def value(families: dict, name: str, **labels) -> float:
    family = families[name]
    matching = [sample.value for sample in family.samples
                if all(sample.labels.get(key) == wanted for key, wanted in labels.items())
                and sample.name in (name, name + "_total")]
    assert len(matching) == 1, (name, labels, family.samples)
    return matching[0]


def test_every_family_is_documented_and_typed(start_server):
    server = start_server()
    instance = server.create()
    assert server.request("POST", f"/reactors/{instance['id']}/actions?wait=true", '"increase"').status == 200
    families = scrape(server)
    assert {"http_requests", "http_request_duration_seconds", "reactor_instances", "reactor_event_streams",
            "reactor_actions_accepted", "reactor_mutation_errors", "reactor_stalls",
            "reactor_stalled_instances"} <= set(families)
    assert value(families, "reactor_actions_accepted") == 1
    assert value(families, "http_requests", route="/reactors", method="POST", status="201") == 1


def test_process_families(start_server):
    before = time.time()
    server = start_server()
    after = time.time()
    families = scrape(server)
    for name, kind in PROCESS_FAMILIES.items():
        assert families[name].type == kind, name
    assert 0 < value(families, "process_cpu_seconds") < 600
    # The kernel's own account of the same process.
    with open(f"/proc/{server.process.pid}/status") as status:
        resident_kib = int(re.search(r"^VmRSS:\s+(\d+) kB", status.read(), flags=re.M).group(1))
    resident = value(families, "process_resident_memory_bytes")
    assert 0.5 < resident / (resident_kib * 1024) < 2, (resident, resident_kib)
    open_fds = value(families, "process_open_fds")
    assert 0.5 < open_fds / len(os.listdir(f"/proc/{server.process.pid}/fd")) < 2
    assert value(families, "process_max_fds") >= open_fds
    # Started between the moments before and after it was launched (the clock ticks at 1/100 s).
    assert before - 1 <= value(families, "process_start_time_seconds") <= after + 1


def newest_release() -> str:
    """The newest release CHANGELOG.md names."""
    changelog = (REPO_ROOT / "CHANGELOG.md").read_text()
    return re.search(r"^## \[(\d+\.\d+\.\d+)\]", changelog, flags=re.M).group(1)


def test_build_info_names_the_version_commit_and_release(start_server):
    server = start_server()
    families = scrape(server)
    assert families["reactor_server_build_info"].type == "gauge"
    (sample,) = families["reactor_server_build_info"].samples
    assert sample.value == 1
    assert sample.labels["release"] == newest_release(), sample.labels
    printed = subprocess.run([str(server_binary()), "--version"], capture_output=True, text=True, timeout=30).stdout
    if sample.labels["version"] == "unknown":  # a build that was given no version names its release
        assert printed == f"reactor-server (ReactorServer {newest_release()})\n"
    else:
        assert printed == f"reactor-server {sample.labels['version']} (commit {sample.labels['commit']})\n"


def test_counters_recorded_through_swift_metrics_reach_metrics(start_server):
    server = start_server()
    room = server.create("room")
    for text in ("hello", "again"):
        reply = server.request("POST", f"/reactors/{room['id']}/actions?wait=true", {"say": {"text": text}})
        assert reply.status == 200, reply
    families = scrape(server)
    assert families["room_messages_said"].type == "counter"
    assert value(families, "room_messages_said") == 2


def test_a_wrong_method_is_counted_under_its_route(start_server):
    server = start_server()
    instance = server.create()
    assert server.request("PUT", f"/reactors/{instance['id']}").status == 405
    assert server.request("PATCH", f"/reactors/{instance['id']}").status == 405
    assert server.request("DELETE", "/reactors").status == 405
    assert server.request("BREW", "/types").status == 405
    assert server.request("GET", "/nowhere").status == 404
    families = scrape(server)
    assert value(families, "http_requests", route="/reactors/{id}", method="PUT", status="405") == 1
    assert value(families, "http_requests", route="/reactors/{id}", method="PATCH", status="405") == 1
    assert value(families, "http_requests", route="/reactors", method="DELETE", status="405") == 1
    assert value(families, "http_requests", route="/types", method="other", status="405") == 1
    unmatched = [sample for sample in families["http_requests"].samples if sample.labels["route"] == "unmatched"]
    assert [(sample.labels["method"], sample.labels["status"], sample.value) for sample in unmatched] == [("GET", "404", 1)]
