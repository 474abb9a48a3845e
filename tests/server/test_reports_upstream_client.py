"""SchedulerReporting as an upstream client sees it: a client generated, in the test, from
upstream Armada's scheduler_reporting.proto (package schedulerobjects, the names and field
numbers upstream defines, none of this server's extensions) runs in a process of its own and
asks a real server for the scheduling, queue and job reports, as armadactl's report commands
do. The .proto below is written from upstream's definitions (facts: names and numbers)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from grpc_tools import protoc

from armada_core.api import scheduler_reporting_pb2 as pb
from armada_core.api import scheduler_reporting_pb2_grpc
from armada_server.app import EmbeddedServer

from .conftest import Stubs
from .test_reports import NO_ROOM
from .test_scheduling_loop import Executor, high, submit

UPSTREAM_PROTO = """
syntax = 'proto3';
package schedulerobjects;

message MostRecentForQueue { string queue_name = 1; }
message MostRecentForJob { string job_id = 1; }
message SchedulingReportRequest {
  oneof filter {
    MostRecentForQueue most_recent_for_queue = 1;
    MostRecentForJob most_recent_for_job = 2;
  }
  int32 verbosity = 3;
}
message SchedulingReport { string report = 1; }
message QueueReportRequest { string queue_name = 1; int32 verbosity = 2; }
message QueueReport { string report = 1; }
message JobReportRequest { string job_id = 1; }
message JobReport { string report = 1; }

service SchedulerReporting {
  rpc GetSchedulingReport (SchedulingReportRequest) returns (SchedulingReport);
  rpc GetQueueReport (QueueReportRequest) returns (QueueReport);
  rpc GetJobReport (JobReportRequest) returns (JobReport);
}
"""

CLIENT = """
import json, sys
import grpc
import scheduler_reporting_pb2 as pb, scheduler_reporting_pb2_grpc as rpc

address, queue, job = sys.argv[1:4]
with grpc.insecure_channel(address) as channel:
    stub = rpc.SchedulerReportingStub(channel)
    out = {
        "scheduling": stub.GetSchedulingReport(pb.SchedulingReportRequest(verbosity=1)).report,
        "queue": stub.GetQueueReport(pb.QueueReportRequest(queue_name=queue)).report,
        "job": stub.GetJobReport(pb.JobReportRequest(job_id=job)).report,
        "queue_filter": stub.GetSchedulingReport(
            pb.SchedulingReportRequest(most_recent_for_queue=pb.MostRecentForQueue(queue_name=queue))
        ).report,
        "job_filter": stub.GetSchedulingReport(
            pb.SchedulingReportRequest(most_recent_for_job=pb.MostRecentForJob(job_id=job))
        ).report,
    }
    try:
        stub.GetQueueReport(pb.QueueReportRequest(queue_name="missing"))
    except grpc.RpcError as e:
        out["missing"] = e.code().name
print(json.dumps(out))
"""


@pytest.fixture
def server(executorless_server: EmbeddedServer) -> EmbeddedServer:
    return executorless_server


def generate(out: Path) -> None:
    """The upstream client's modules, generated from the .proto by protoc (grpc_tools)."""
    (out / "scheduler_reporting.proto").write_text(UPSTREAM_PROTO)
    include = Path(protoc.__file__).parent / "_proto"
    args = ["protoc", f"-I{out}", f"-I{include}", f"--python_out={out}", f"--grpc_python_out={out}"]
    assert protoc.main([*args, str(out / "scheduler_reporting.proto")]) == 0


def test_an_upstream_client_reads_the_reports(
    api: Stubs, queue: str, server: EmbeddedServer, tmp_path: Path
) -> None:
    ex = Executor(api.channel, nodes=2, cpu="4", memory="8Gi")
    ex.sync()
    submit(api, high(cpu="4"), high(cpu="4"))
    ex.wait_leases(2)
    [waiting] = submit(api, high(cpu="4"))
    ours = scheduler_reporting_pb2_grpc.SchedulerReportingStub(api.channel)
    deadline = time.monotonic() + 15
    while not json.loads(ours.GetJobReport(pb.JobReportRequest(job_id=waiting)).json)["history"]:
        assert time.monotonic() < deadline, "no cycle gave the job a reason"
        time.sleep(0.05)
    generate(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", CLIENT, server.address, queue, waiting],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    said = json.loads(done.stdout)
    assert said["scheduling"].startswith("cycle ") and NO_ROOM in said["scheduling"]
    assert f"held back by: {NO_ROOM}" in said["queue"]
    assert said["queue_filter"].startswith(f"queue {queue} in cycle ")
    assert said["job"].startswith(
        f"job {waiting} (queue {queue}): QUEUED\nwaited because {NO_ROOM}"
    )
    assert said["job_filter"].startswith(f"job {waiting} (queue {queue}): QUEUED")
    assert said["missing"] == "NOT_FOUND"
