"""README.md's curl walkthrough, run verbatim with bash against a live server."""

import json
import re
import subprocess

from conftest import REPO_ROOT

WALKTHROUGH_TIMEOUT = 60


def walkthrough_script() -> str:
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme.split("\n## Walkthrough with curl\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```sh\n(.*?)^```$", section, flags=re.S | re.M)
    assert len(blocks) >= 6, "the walkthrough has fewer sh blocks than expected"
    return "set -euo pipefail\n" + "\n".join(blocks)


def parse_events(text: str) -> list[dict]:
    """The events of a captured text/event-stream, as dicts of their fields."""
    events = []
    for block in text.split("\n\n"):
        fields = {}
        for line in block.splitlines():
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            fields[name] = value[1:] if value.startswith(" ") else value
        if fields:
            events.append(fields)
    return events


def test_walkthrough_runs_verbatim(server, tmp_path):
    result = subprocess.run(
        ["bash", "-c", walkthrough_script()],
        cwd=tmp_path, env={"PATH": "/usr/bin:/bin:/usr/local/bin", "BASE": server.base},
        capture_output=True, text=True, timeout=WALKTHROUGH_TIMEOUT,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout

    # healthz, the created id, the 202 receipt, the 200 after ?wait=true, the 304, the 204.
    lines = out.splitlines()
    assert lines[0] == '{"status":"ok"}'
    instance_id = lines[1]
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", instance_id)
    assert '{"seq":1}' in lines
    waited = next(json.loads(line) for line in lines if line.startswith('{"id"'))
    assert waited["id"] == instance_id and waited["type"] == "counter"
    assert waited["state"] == {"alertMessage": {"count": 2, "value": "increased!"},
                               "isLoading": False, "value": 2}
    assert waited["version"] == 8
    assert '"8"' in lines and "304" in lines and "204" in lines
    assert "urn:reactor-server:problem:unknown-instance" in out
    # The counter created with a step of 10, and the parameters refused naming the field.
    assert '"value":10' in lines
    assert '"value":' not in lines, "the README shows the stepped counter's value alone"
    refused = json.loads(next(line for line in lines if "invalid-parameters" in line))
    assert refused["status"] == 422 and "'step'" in refused["detail"]

    # The first stream: retry hint, states with strictly increasing versions from 0, the final
    # state, then the end event.
    events = parse_events((tmp_path / "events.txt").read_text())
    assert events[0] == {"retry": "3000"}
    states = [event for event in events if event.get("event") == "state"]
    versions = [int(event["id"]) for event in states]
    assert versions[0] == 0 and versions[-1] == 8
    assert versions == sorted(set(versions))
    assert json.loads(states[-1]["data"]) == waited["state"]
    assert events[-1] == {"event": "end", "data": '{"reason":"deleted"}'}

    # The resumed stream replays exactly the versions after 2, then ends the same way.
    resumed = parse_events((tmp_path / "resumed.txt").read_text())
    assert resumed[0] == {"retry": "3000"}
    assert [int(event["id"]) for event in resumed if event.get("event") == "state"] == list(range(3, 9))
    assert resumed[-1] == {"event": "end", "data": '{"reason":"deleted"}'}
