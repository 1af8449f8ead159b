"""schemathesis exercises every operation of openapi.yaml against a live server: no 5xx, and
every status, header, content type and body as the document describes them."""

import json
import os
import subprocess
import sys
from xml.etree import ElementTree
from pathlib import Path

from conftest import REPO_ROOT

#: Every check schemathesis has, and every phase: its explicit examples, the coverage of each
#: schema's edges, fuzzing, and the stateful phase that follows the links from `POST /reactors`.
CHECKS = "all"
PHASES = "examples,coverage,fuzzing,stateful"
MAX_EXAMPLES = 30
OPERATIONS = {"GET /types", "POST /reactors", "GET /reactors/{id}", "DELETE /reactors/{id}",
              "POST /reactors/{id}/actions", "GET /reactors/{id}/events", "GET /reactors/{id}/history",
              "GET /", "GET /inspector", "GET /assets/{name}", "GET /healthz", "GET /metrics"}
TOTAL_TIMEOUT = 600


#: The example types, each with a standing instance that actions of its type are sent to.
TYPES = ("counter", "todo", "search", "room")
#: The hook that sends each action to an instance of its own type.
HOOKS = Path(__file__).with_name("schemathesis_hooks.py")


def real_ids_config(server, path: Path, instances: dict[str, str]) -> Path:
    """A schemathesis config that sends live instance ids to the operations that read or act on
    one, so they are exercised past `404` (generated ids never name a live instance). DELETE
    gets none: a fixed id would be gone after its first call, and the stateful phase deletes
    instances it created through the links of `POST /reactors` (then checks they stay gone).
    An event stream is read for one event, or for one second when it has nothing to send.

    Actions are drawn for the counter of `instances`; a hook sends each one whose case a type has
    to that type's instance (`schemathesis_hooks.py`), since an instance takes its own type's
    actions only, as the document says."""
    ids = {name: server.create("counter")["id"]
           for name in ("GET /reactors/{id}", "GET /reactors/{id}/events", "GET /reactors/{id}/history")}
    ids["POST /reactors/{id}/actions"] = instances["counter"]
    sections = [f'hooks = "{HOOKS}"\n']
    for name, instance_id in ids.items():
        section = f'[[operations]]\ninclude-name = "{name}"\nparameters = {{ "path.id" = "{instance_id}" }}\n'
        if name.endswith("/events"):
            section += "max-stream-events = 1\nrequest-timeout = 1\n"
        if name.endswith("/actions"):
            # Valid data is accepted, but for two answers the data cannot foresee: 404 once a
            # standing instance is gone (schemathesis reuses ids it read in answers, for DELETE
            # too), and 422 when the generator repeats an Idempotency-Key with another body
            # (idempotency-key-reused). Invalid data must still be refused.
            section += 'checks = { positive_data_acceptance = { expected-statuses = ["2xx", "404", "422"] } }\n'
        sections.append(section)
    path.write_text("\n".join(sections))
    return path


def test_every_operation_conforms(server, tmp_path):
    schemathesis = Path(sys.executable).parent / "schemathesis"
    instances = {name: server.create(name)["id"] for name in TYPES}
    config = real_ids_config(server, tmp_path / "schemathesis.toml", instances)
    command = [
        str(schemathesis), "--config-file", str(config), "run", str(REPO_ROOT / "openapi.yaml"),
        "--url", server.base,
        "--checks", CHECKS,
        "--phases", PHASES,
        "--max-examples", str(MAX_EXAMPLES),
        "--workers", "1",  # hypothesis on Python 3.11 is not safe with parallel workers
        "--request-timeout", "15",
        "--seed", "20240601",
        "--generation-database", "none",
        "--no-color",
        "--report", "junit", "--report-dir", str(tmp_path),
    ]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=TOTAL_TIMEOUT,
                            env={**os.environ, "SCHEMATHESIS_TELEMETRY": "false", "NO_COLOR": "1",
                                 "REACTOR_INSTANCES": json.dumps(instances)})
    assert result.returncode == 0, result.stdout[-20000:] + result.stderr[-5000:]
    # Every operation was exercised, without failures or errors.
    reports = list(tmp_path.glob("junit-*.xml"))
    assert len(reports) == 1
    suite = ElementTree.parse(reports[0]).getroot()
    assert suite.get("failures") == "0" and suite.get("errors") == "0"
    exercised = {case.get("name") for case in suite.iter("testcase")}
    assert OPERATIONS <= exercised, f"not exercised: {OPERATIONS - exercised}"
