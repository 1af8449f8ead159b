"""A schemathesis hook of test_schemathesis: every action goes to an instance of its own type.

openapi.yaml gives `POST /reactors/{id}/actions` the union of the example types' action schemas,
since the URL does not name the instance's type, and says that an action of another type answers
`400`. Schemathesis draws a body from the union and takes the id from the configuration, so left
alone it would send a todo's `add` to the configured counter and report the `400` as a valid
action refused. The test starts one standing instance of each type (`REACTOR_INSTANCES`, JSON
`{type: id}`) and configures the counter's id; this hook sends an action whose case one type has
to that type's instance instead, in every phase (the configured id wins over the links' in the
stateful phase too).

A body whose case no type has (or that is no action at all) goes where it was drawn for: every
instance refuses it alike. Schemathesis validates a case again after `before_call`, so what is
sent is still judged as what it is, valid or not.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import schemathesis
import yaml

SPEC = Path(__file__).resolve().parents[2] / "openapi.yaml"
ACTIONS = "POST /reactors/{id}/actions"
ACTION_SCHEMAS = {"counter": "CounterAction", "todo": "TodoAction", "search": "SearchAction", "room": "RoomAction"}


def action_cases(schema: dict) -> set[str]:
    """The case names an action schema allows: a bare string's values, an object's one key (also
    what test_openapi checks the examples against)."""
    cases = set()
    for option in schema["oneOf"]:
        if option.get("type") == "string":
            cases.update(option["enum"])
        else:
            cases.update(option["required"])
    return cases


def case_name(body: object) -> str | None:
    """The case an action body names: a bare string, or an object's only key."""
    if isinstance(body, str):
        return body
    if isinstance(body, dict) and len(body) == 1:
        return next(iter(body))
    return None


_schemas = yaml.safe_load(SPEC.read_text())["components"]["schemas"]
#: The type each case name belongs to (no case name belongs to two: test_openapi checks it).
TYPE_OF_CASE = {case: type_name for type_name, schema in ACTION_SCHEMAS.items() for case in action_cases(_schemas[schema])}
#: The standing instances, one of each type, by type.
STANDING: dict[str, str] = json.loads(os.environ.get("REACTOR_INSTANCES", "{}"))


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    if case.operation.label != ACTIONS or not case.path_parameters:
        return
    action_type = TYPE_OF_CASE.get(case_name(case.body))
    if action_type is None:
        return
    if case.path_parameters.get("id") in STANDING.values():
        case.path_parameters["id"] = STANDING[action_type]
