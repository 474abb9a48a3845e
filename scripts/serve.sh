#!/usr/bin/env bash
# Create or refresh .venv with the server's dependencies and demonstrate the standalone server.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh" --inexact --package armada-server
echo "==> armada-server" >&2
.venv/bin/armada-server --version
.venv/bin/python - <<'PY'
from armada_core.api import event_pb2, job_pb2, submit_pb2, binoculars_pb2

for module in (submit_pb2, event_pb2, job_pb2, binoculars_pb2):
    for service in module.DESCRIPTOR.services_by_name.values():
        methods = ", ".join(m.name for m in service.methods)
        print(f"{service.full_name}: {methods}")
PY
