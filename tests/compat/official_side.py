"""The official client's half of the compatibility tests.

Runs with the interpreter of a throwaway environment that holds `armada-client` (it pins
grpcio exactly, so it cannot share the project's environment). Reads a JSON request on stdin
and writes a JSON answer on stdout:

- {"op": "schema"}: the schema summary of every file the official API modules reach;
- {"op": "encode", "items": [{"type": T, "value": DICT}]}: each value built with the
  official classes and serialised (base64);
- {"op": "decode", "items": [{"type": T, "data": B64}]}: each payload parsed with the
  official classes, returned as a dict and re-serialised (base64).
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import armada_client.armada.binoculars_pb2
import armada_client.armada.event_pb2
import armada_client.armada.health_pb2
import armada_client.armada.job_pb2
import armada_client.armada.submit_pb2  # noqa: F401
from google.protobuf import descriptor_pool, json_format, message_factory
from schema import schema_of


def reachable_files() -> list:
    pool = descriptor_pool.Default()
    roots = [
        "armada/submit.proto",
        "armada/event.proto",
        "armada/job.proto",
        "armada/health.proto",
        "armada/binoculars.proto",
    ]
    seen: dict[str, object] = {}
    todo = [pool.FindFileByName(r) for r in roots]
    while todo:
        fd = todo.pop()
        if fd.name in seen:
            continue
        seen[fd.name] = fd
        todo.extend(fd.dependencies)
    return list(seen.values())


def message_class(full_name: str):
    desc = descriptor_pool.Default().FindMessageTypeByName(full_name)
    return message_factory.GetMessageClass(desc)


def main() -> None:
    request = json.load(sys.stdin)
    op = request["op"]
    if op == "schema":
        answer = schema_of(reachable_files())
    elif op == "encode":
        answer = []
        for item in request["items"]:
            msg = json_format.ParseDict(item["value"], message_class(item["type"])())
            answer.append(base64.b64encode(msg.SerializeToString(deterministic=True)).decode())
    elif op == "decode":
        answer = []
        for item in request["items"]:
            msg = message_class(item["type"])()
            msg.ParseFromString(base64.b64decode(item["data"]))
            answer.append(
                {
                    "value": json_format.MessageToDict(msg, preserving_proto_field_name=True),
                    "data": base64.b64encode(msg.SerializeToString(deterministic=True)).decode(),
                }
            )
    else:
        raise SystemExit(f"unknown op {op!r}")
    json.dump(answer, sys.stdout)


if __name__ == "__main__":
    main()
