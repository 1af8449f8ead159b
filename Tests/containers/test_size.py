"""What docker/Dockerfile adds over its base image stays within its budget."""

from __future__ import annotations

import json

from conftest import REACTOR_SERVER_IMAGE, podman

#: The runtime stage's base image, as docker/Dockerfile's last FROM names it.
BASE_IMAGE = "docker.io/library/debian:bookworm-slim"
#: What the image may add over its base: 100 MB (podman counts 1 MB as 10^6 bytes).
BUDGET = 100 * 1000 * 1000


def size(image: str) -> int:
    return json.loads(podman("image", "inspect", "--format", "{{json .Size}}", image).stdout)


def layers(image: str) -> str:
    return podman("history", "--format", "{{.Size}}\t{{printf \"%.120s\" .CreatedBy}}", image).stdout


def test_what_the_image_adds_over_its_base_is_within_budget():
    added = size(REACTOR_SERVER_IMAGE) - size(BASE_IMAGE)
    assert 0 < added <= BUDGET, (
        f"{REACTOR_SERVER_IMAGE} adds {added / 1e6:.1f} MB over {BASE_IMAGE} "
        f"(budget {BUDGET / 1e6:.0f} MB):\n{layers(REACTOR_SERVER_IMAGE)}")
