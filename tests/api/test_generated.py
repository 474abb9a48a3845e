"""The committed Python modules match the .proto sources and import cleanly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import armada_core.api.binoculars_pb2_grpc
import armada_core.api.event_pb2_grpc
import armada_core.api.job_pb2_grpc
import armada_core.api.submit_pb2_grpc
from armada_core.api import event_pb2, submit_pb2

ROOT = Path(__file__).resolve().parents[2]


def test_generated_modules_are_up_to_date() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "generate_protos.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, (
        f"run scripts/generate_protos.py to refresh:\n{done.stdout}{done.stderr}"
    )


def test_services_have_stubs_and_servicers() -> None:
    submit = armada_core.api.submit_pb2_grpc
    for module, service in [
        (submit, "Submit"),
        (submit, "QueueService"),
        (submit, "RetryPolicyService"),
        (armada_core.api.event_pb2_grpc, "Event"),
        (armada_core.api.job_pb2_grpc, "Jobs"),
        (armada_core.api.binoculars_pb2_grpc, "Binoculars"),
    ]:
        assert hasattr(module, f"{service}Stub")
        assert hasattr(module, f"{service}Servicer")


def test_gang_annotations_and_priority_class_travel_in_the_pod_spec() -> None:
    item = submit_pb2.JobSubmitRequestItem(
        annotations={"armadaproject.io/gangId": "g", "armadaproject.io/gangCardinality": "2"}
    )
    spec = item.pod_specs.add(priorityClassName="armada-preemptible")
    spec.terminationGracePeriodSeconds = 0
    parsed = submit_pb2.JobSubmitRequestItem.FromString(item.SerializeToString())
    assert parsed.pod_specs[0].priorityClassName == "armada-preemptible"
    # proto2 presence: an explicit 0 grace period is distinguishable from an absent one.
    assert parsed.pod_specs[0].HasField("terminationGracePeriodSeconds")
    assert (
        not submit_pb2.JobSubmitRequestItem()
        .pod_specs.add()
        .HasField("terminationGracePeriodSeconds")
    )
    assert event_pb2.EventMessage(queued={"job_id": "x"}).WhichOneof("events") == "queued"
