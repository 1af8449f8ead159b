"""openapi.yaml is a valid OpenAPI 3.1 document and covers every route the service registers."""

import re

import yaml
from openapi_spec_validator import validate
from openapi_spec_validator.readers import read_from_filename

from conftest import REPO_ROOT

SPEC = REPO_ROOT / "openapi.yaml"
SERVICE = REPO_ROOT / "Sources" / "ReactorHTTP" / "ReactorService.swift"
PROBLEMS = REPO_ROOT / "Sources" / "ReactorHTTP" / "Problem.swift"


def load_spec() -> dict:
    return yaml.safe_load(SPEC.read_text())


def test_spec_is_valid_openapi_3_1():
    spec_dict, _ = read_from_filename(str(SPEC))
    validate(spec_dict)
    assert spec_dict["openapi"].startswith("3.1")


def test_every_registered_route_is_described():
    routes = set(re.findall(r'add\(&router, \.(\w+), "([^"]+)"\)', SERVICE.read_text()))
    assert routes, "no routes found in ReactorService.swift"
    paths = load_spec()["paths"]
    described = {(method.upper(), path) for path, item in paths.items() for method in item
                 if method in {"get", "post", "put", "patch", "delete", "head", "options"}}
    assert routes == described


def test_every_problem_kind_is_named():
    kinds = set(re.findall(r'kind: "([a-z-]+)"', PROBLEMS.read_text()))
    assert kinds
    text = SPEC.read_text()
    missing = [kind for kind in kinds if f"`{kind}`" not in text]
    assert not missing, f"problem kinds not described in openapi.yaml: {missing}"
