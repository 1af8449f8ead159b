"""Removes the declarations of `package` access (marked `isInternal` by swift-api-digester) from
API baseline files, in place: they are not public API, so a change to them is no break."""

import json
import sys


def strip(node):
    if isinstance(node, dict):
        if "children" in node:
            node["children"] = [child for child in node["children"] if not child.get("isInternal")]
        for value in node.values():
            strip(value)
    elif isinstance(node, list):
        for value in node:
            strip(value)
    return node


for path in sys.argv[1:]:
    with open(path) as file:
        document = json.load(file)
    with open(path, "w") as file:
        json.dump(strip(document), file, indent=1, sort_keys=True)
        file.write("\n")
