"""openapi.yaml is a valid OpenAPI 3.1 document and covers every route the service registers."""

import json
import re

import yaml
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate
from openapi_spec_validator.readers import read_from_filename

from conftest import REPO_ROOT
from schemathesis_hooks import ACTION_SCHEMAS, action_cases

SPEC = REPO_ROOT / "openapi.yaml"
SERVICE = REPO_ROOT / "Sources" / "ReactorHTTP" / "Routes" / "ReactorService.swift"
PROBLEMS = REPO_ROOT / "Sources" / "ReactorHTTP" / "Problems" / "Problem.swift"
INSPECTOR_ROUTES = REPO_ROOT / "Sources" / "ReactorHTTP" / "Inspector" / "InspectorRoutes.swift"


def load_spec() -> dict:
    return yaml.safe_load(SPEC.read_text())


def test_spec_is_valid_openapi_3_1():
    spec_dict, _ = read_from_filename(str(SPEC))
    validate(spec_dict)
    assert spec_dict["openapi"].startswith("3.1")


def test_every_registered_route_is_described():
    routes = set(re.findall(r'add\(&router, \.(\w+), "([^"]+)"[,)]', SERVICE.read_text()))
    assert routes, "no routes found in ReactorService.swift"
    paths = load_spec()["paths"]
    described = {(method.upper(), path) for path, item in paths.items() for method in item
                 if method in {"get", "post", "put", "patch", "delete", "head", "options"}}
    assert routes == described


def test_the_routes_that_need_credentials_say_so():
    """A route registered without `access: .open` needs credentials when authentication is on: its
    operation lists the security schemes after `{}` (authentication is off by default) and answers
    401 with a challenge; an admin's route (`access: .admin`) also 403. An open route lists none."""
    spec = load_spec()
    routes = re.findall(r'add\(&router, \.(\w+), "([^"]+)"(?:, access: \.(\w+))?', SERVICE.read_text())
    assert {access for _, _, access in routes} == {"", "open", "admin"}
    schemes = set(spec["components"]["securitySchemes"])
    for method, path, access in routes:
        operation = spec["paths"][path][method.lower()]
        if access == "open":
            assert "security" not in operation, (method, path)
            continue
        security = operation["security"]
        assert security[0] == {} and {name for requirement in security[1:] for name in requirement} == schemes, (method, path)
        assert operation["responses"]["401"] == {"$ref": "#/components/responses/Unauthenticated"}, (method, path)
        assert ("403" in operation["responses"]) == (access == "admin" or (method, path) == ("POST", "/reactors")), (method, path)
    assert "WWW-Authenticate" in spec["components"]["responses"]["Unauthenticated"]["headers"]


def test_the_assets_are_the_ones_the_server_serves():
    served = set(re.findall(r'^\s*"([\w.-]+)": asset\(', INSPECTOR_ROUTES.read_text(), re.MULTILINE))
    assert served, "no assets found in InspectorRoutes.swift"
    (name,) = load_spec()["paths"]["/assets/{name}"]["get"]["parameters"]
    assert set(name["schema"]["enum"]) == served


def test_every_problem_kind_is_named():
    kinds = set(re.findall(r'kind: "([a-z-]+)"', PROBLEMS.read_text()))
    assert kinds
    text = SPEC.read_text()
    missing = [kind for kind in kinds if f"`{kind}`" not in text]
    assert not missing, f"problem kinds not described in openapi.yaml: {missing}"


def validator(spec: dict, name: str) -> Draft202012Validator:
    return Draft202012Validator({"$ref": f"#/components/schemas/{name}", "components": spec["components"]})


def test_live_bodies_and_event_data_match_their_schemas(server):
    """Every example type's snapshots, action answers and event-stream data, as served, against
    the component schemas (including the `contentSchema` of each event's `data`)."""
    spec = load_spec()
    types = server.request("GET", "/types").json()
    validator(spec, "TypeList").validate(types)
    state_schemas = {"counter": "CounterState", "todo": "TodoState", "search": "SearchState", "room": "RoomState"}
    data_schemas = {"error": "MutationError", "end": "EndReason"}
    for entry in types["types"]:
        name = entry["name"]
        validator(spec, state_schemas[name]).validate(entry["initialState"])
        created = server.create(name)
        validator(spec, "Snapshot").validate(created)
        stream = server.events(created["id"])
        try:
            assert stream.next().retry == 3000
            for action in entry["exampleActions"]:
                validator(spec, "Action").validate(action)
                reply = server.request("POST", f"/reactors/{created['id']}/actions?wait=true", json.dumps(action))
                assert reply.status == 200, reply
                validator(spec, "Snapshot").validate(reply.json())
            assert server.request("DELETE", f"/reactors/{created['id']}").status == 204
            seen = set()
            while (event := stream.next()) is not None:
                as_parsed = {"event": event.event, "data": event.data}
                if event.id is not None:
                    as_parsed["id"] = event.id
                validator(spec, "ServerSentEvent").validate(as_parsed)
                schema = state_schemas[name] if event.event == "state" else data_schemas[event.event]
                validator(spec, schema).validate(event.json())
                seen.add(event.event)
            assert {"state", "end"} <= seen
            if name == "todo":
                assert "error" in seen, "the todo examples name a task id that does not exist"
        finally:
            stream.close()


def test_every_action_case_of_every_type_has_an_example_the_type_accepts(server):
    spec = load_spec()
    examples = (spec["paths"]["/reactors/{id}/actions"]["post"]["requestBody"]["content"]
                ["application/json"]["examples"])
    by_type: dict[str, dict[str, object]] = {name: {} for name in ACTION_SCHEMAS}
    for key, example in examples.items():
        type_name, _, case = key.partition("-")
        assert type_name in ACTION_SCHEMAS, f"example {key} names no example type"
        value = example["value"]
        validator(spec, ACTION_SCHEMAS[type_name]).validate(value)
        named = value if isinstance(value, str) else next(iter(value))
        assert named == case, f"example {key} is a {named} action"
        by_type[type_name][case] = value
    for type_name, schema_name in ACTION_SCHEMAS.items():
        cases = action_cases(spec["components"]["schemas"][schema_name])
        assert set(by_type[type_name]) == cases, f"{type_name}: examples for {set(by_type[type_name])}, cases {cases}"
        instance = server.create(type_name)
        for case, value in by_type[type_name].items():
            reply = server.request("POST", f"/reactors/{instance['id']}/actions", json.dumps(value))
            assert reply.status == 202, (type_name, case, reply)


def test_an_action_of_another_type_is_refused_as_the_document_says(server):
    """`Action` is the union of the types' actions, and no case name belongs to two types (so a
    body names the one type it is valid for); an instance answers an action of another type
    `400` (`invalid-action`), as the actions operation says."""
    spec = load_spec()
    schemas = spec["components"]["schemas"]
    assert schemas["Action"]["oneOf"] == [{"$ref": f"#/components/schemas/{name}"} for name in ACTION_SCHEMAS.values()]
    cases = {type_name: action_cases(schemas[name]) for type_name, name in ACTION_SCHEMAS.items()}
    for type_name, own in cases.items():
        for other_type, other in cases.items():
            assert other_type == type_name or not own & other, (type_name, other_type, own & other)
    examples = (spec["paths"]["/reactors/{id}/actions"]["post"]["requestBody"]["content"]
                ["application/json"]["examples"])
    for type_name in ACTION_SCHEMAS:
        instance = server.create(type_name)
        for key, example in examples.items():
            if key.partition("-")[0] == type_name:
                continue
            reply = server.request("POST", f"/reactors/{instance['id']}/actions", json.dumps(example["value"]))
            assert reply.status == 400, (type_name, key, reply)
            assert reply.json()["type"] == "urn:reactor-server:problem:invalid-action", (type_name, key, reply)
