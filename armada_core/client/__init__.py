"""The Armada client every integration builds on: sync and asyncio flavours of every public
RPC, job, gang and pod group builders, resumable event watching and `wait_for_jobs`.

Works against our server and against upstream Armada (same wire API).
"""

from .aio import AsyncArmadaClient
from .builders import (
    PodSpecLike,
    Role,
    check_items,
    gang_items,
    job_item,
    pod_group_items,
    pod_spec,
)
from .connection import DEFAULT_ADDRESS, ConnectionConfig
from .errors import (
    Aborted,
    AlreadyExists,
    ArmadaError,
    Cancelled,
    DataLoss,
    DeadlineExceeded,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    NotFound,
    OutOfRange,
    PermissionDenied,
    ResourceExhausted,
    SubmitRejected,
    Unauthenticated,
    Unavailable,
    Unimplemented,
    Unknown,
    WaitTimeout,
    error_for,
    from_rpc_error,
)
from .jobfile import JobRequest, load_job_file, parse_job_request
from .k8s_convert import SpecError, to_message
from .logs import JobLogFollower, LogCursor, follow_logs
from .operations import Submission, job_state, queue
from .streams import StopSignal
from .sync import ArmadaClient
from .tracking import TERMINAL, JobResult, JobTracker, state_name
from .watching import HEARTBEAT_METADATA, Notice, WatchOptions, is_heartbeat

__all__ = [
    "DEFAULT_ADDRESS",
    "HEARTBEAT_METADATA",
    "TERMINAL",
    "Aborted",
    "AlreadyExists",
    "ArmadaClient",
    "ArmadaError",
    "AsyncArmadaClient",
    "Cancelled",
    "ConnectionConfig",
    "DataLoss",
    "DeadlineExceeded",
    "FailedPrecondition",
    "Internal",
    "InvalidArgument",
    "JobLogFollower",
    "JobRequest",
    "JobResult",
    "JobTracker",
    "LogCursor",
    "NotFound",
    "Notice",
    "OutOfRange",
    "PermissionDenied",
    "PodSpecLike",
    "ResourceExhausted",
    "Role",
    "SpecError",
    "StopSignal",
    "Submission",
    "SubmitRejected",
    "Unauthenticated",
    "Unavailable",
    "Unimplemented",
    "Unknown",
    "WaitTimeout",
    "WatchOptions",
    "check_items",
    "error_for",
    "follow_logs",
    "from_rpc_error",
    "gang_items",
    "is_heartbeat",
    "job_item",
    "job_state",
    "load_job_file",
    "parse_job_request",
    "pod_group_items",
    "pod_spec",
    "queue",
    "state_name",
    "to_message",
]
