"""schemathesis exercises every operation of openapi.yaml against a live server: no 5xx, and
every status, header, content type and body as the document describes them."""

import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO_ROOT

CHECKS = ",".join([
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
])
MAX_EXAMPLES = 30
TOTAL_TIMEOUT = 600


def test_every_operation_conforms(server, tmp_path):
    schemathesis = Path(sys.executable).parent / "schemathesis"
    command = [
        str(schemathesis), "run", str(REPO_ROOT / "openapi.yaml"),
        "--url", server.base,
        "--checks", CHECKS,
        "--max-examples", str(MAX_EXAMPLES),
        "--workers", "2",
        "--request-timeout", "15",
        "--seed", "20240601",
        "--generation-database", "none",
        "--no-color",
        "--report", "junit", "--report-dir", str(tmp_path),
    ]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=TOTAL_TIMEOUT,
                            env={**os.environ, "SCHEMATHESIS_TELEMETRY": "false", "NO_COLOR": "1"})
    assert result.returncode == 0, result.stdout[-20000:] + result.stderr[-5000:]
    # Every operation was exercised.
    for operation in ("GET /types", "POST /reactors", "GET /reactors/{id}", "DELETE /reactors/{id}",
                      "POST /reactors/{id}/actions", "GET /reactors/{id}/events", "GET /healthz",
                      "GET /metrics"):
        assert operation in result.stdout, f"{operation} was not exercised:\n{result.stdout[-5000:]}"
