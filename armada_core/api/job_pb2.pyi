import datetime

from armada_core.api import submit_pb2 as _submit_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class JobRunState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RUN_STATE_UNKNOWN: _ClassVar[JobRunState]
    RUN_STATE_LEASED: _ClassVar[JobRunState]
    RUN_STATE_PENDING: _ClassVar[JobRunState]
    RUN_STATE_RUNNING: _ClassVar[JobRunState]
    RUN_STATE_SUCCEEDED: _ClassVar[JobRunState]
    RUN_STATE_FAILED: _ClassVar[JobRunState]
    RUN_STATE_PREEMPTED: _ClassVar[JobRunState]
    RUN_STATE_CANCELLED: _ClassVar[JobRunState]
    RUN_STATE_LEASE_EXPIRED: _ClassVar[JobRunState]
    RUNS_STATE_LEASE_RETURNED: _ClassVar[JobRunState]
RUN_STATE_UNKNOWN: JobRunState
RUN_STATE_LEASED: JobRunState
RUN_STATE_PENDING: JobRunState
RUN_STATE_RUNNING: JobRunState
RUN_STATE_SUCCEEDED: JobRunState
RUN_STATE_FAILED: JobRunState
RUN_STATE_PREEMPTED: JobRunState
RUN_STATE_CANCELLED: JobRunState
RUN_STATE_LEASE_EXPIRED: JobRunState
RUNS_STATE_LEASE_RETURNED: JobRunState

class JobRunDetails(_message.Message):
    __slots__ = ("run_id", "job_id", "state", "cluster", "node", "leased_ts", "pending_ts", "started_ts", "finished_ts", "ingress_addresses")
    class IngressAddressesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: str
        def __init__(self, key: _Optional[int] = ..., value: _Optional[str] = ...) -> None: ...
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    LEASED_TS_FIELD_NUMBER: _ClassVar[int]
    PENDING_TS_FIELD_NUMBER: _ClassVar[int]
    STARTED_TS_FIELD_NUMBER: _ClassVar[int]
    FINISHED_TS_FIELD_NUMBER: _ClassVar[int]
    INGRESS_ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    job_id: str
    state: JobRunState
    cluster: str
    node: str
    leased_ts: _timestamp_pb2.Timestamp
    pending_ts: _timestamp_pb2.Timestamp
    started_ts: _timestamp_pb2.Timestamp
    finished_ts: _timestamp_pb2.Timestamp
    ingress_addresses: _containers.ScalarMap[int, str]
    def __init__(self, run_id: _Optional[str] = ..., job_id: _Optional[str] = ..., state: _Optional[_Union[JobRunState, str]] = ..., cluster: _Optional[str] = ..., node: _Optional[str] = ..., leased_ts: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., pending_ts: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., started_ts: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finished_ts: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., ingress_addresses: _Optional[_Mapping[int, str]] = ...) -> None: ...

class JobDetails(_message.Message):
    __slots__ = ("job_id", "queue", "jobset", "namespace", "state", "submitted_ts", "cancel_ts", "cancel_reason", "last_transition_ts", "latest_run_id", "job_spec", "job_runs", "cancel_user", "scheduling_reason")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    JOBSET_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    SUBMITTED_TS_FIELD_NUMBER: _ClassVar[int]
    CANCEL_TS_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REASON_FIELD_NUMBER: _ClassVar[int]
    LAST_TRANSITION_TS_FIELD_NUMBER: _ClassVar[int]
    LATEST_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_SPEC_FIELD_NUMBER: _ClassVar[int]
    JOB_RUNS_FIELD_NUMBER: _ClassVar[int]
    CANCEL_USER_FIELD_NUMBER: _ClassVar[int]
    SCHEDULING_REASON_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    queue: str
    jobset: str
    namespace: str
    state: _submit_pb2.JobState
    submitted_ts: _timestamp_pb2.Timestamp
    cancel_ts: _timestamp_pb2.Timestamp
    cancel_reason: str
    last_transition_ts: _timestamp_pb2.Timestamp
    latest_run_id: str
    job_spec: _submit_pb2.Job
    job_runs: _containers.RepeatedCompositeFieldContainer[JobRunDetails]
    cancel_user: str
    scheduling_reason: str
    def __init__(self, job_id: _Optional[str] = ..., queue: _Optional[str] = ..., jobset: _Optional[str] = ..., namespace: _Optional[str] = ..., state: _Optional[_Union[_submit_pb2.JobState, str]] = ..., submitted_ts: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cancel_ts: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cancel_reason: _Optional[str] = ..., last_transition_ts: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., latest_run_id: _Optional[str] = ..., job_spec: _Optional[_Union[_submit_pb2.Job, _Mapping]] = ..., job_runs: _Optional[_Iterable[_Union[JobRunDetails, _Mapping]]] = ..., cancel_user: _Optional[str] = ..., scheduling_reason: _Optional[str] = ...) -> None: ...

class JobDetailsRequest(_message.Message):
    __slots__ = ("job_ids", "expand_job_spec", "expand_job_run")
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    EXPAND_JOB_SPEC_FIELD_NUMBER: _ClassVar[int]
    EXPAND_JOB_RUN_FIELD_NUMBER: _ClassVar[int]
    job_ids: _containers.RepeatedScalarFieldContainer[str]
    expand_job_spec: bool
    expand_job_run: bool
    def __init__(self, job_ids: _Optional[_Iterable[str]] = ..., expand_job_spec: _Optional[bool] = ..., expand_job_run: _Optional[bool] = ...) -> None: ...

class JobDetailsResponse(_message.Message):
    __slots__ = ("job_details",)
    class JobDetailsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: JobDetails
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[JobDetails, _Mapping]] = ...) -> None: ...
    JOB_DETAILS_FIELD_NUMBER: _ClassVar[int]
    job_details: _containers.MessageMap[str, JobDetails]
    def __init__(self, job_details: _Optional[_Mapping[str, JobDetails]] = ...) -> None: ...

class JobRunDetailsResponse(_message.Message):
    __slots__ = ("job_run_details",)
    class JobRunDetailsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: JobRunDetails
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[JobRunDetails, _Mapping]] = ...) -> None: ...
    JOB_RUN_DETAILS_FIELD_NUMBER: _ClassVar[int]
    job_run_details: _containers.MessageMap[str, JobRunDetails]
    def __init__(self, job_run_details: _Optional[_Mapping[str, JobRunDetails]] = ...) -> None: ...

class JobRunDetailsRequest(_message.Message):
    __slots__ = ("run_ids",)
    RUN_IDS_FIELD_NUMBER: _ClassVar[int]
    run_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, run_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class JobErrorsRequest(_message.Message):
    __slots__ = ("job_ids",)
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    job_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, job_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class JobErrorsResponse(_message.Message):
    __slots__ = ("job_errors",)
    class JobErrorsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    JOB_ERRORS_FIELD_NUMBER: _ClassVar[int]
    job_errors: _containers.ScalarMap[str, str]
    def __init__(self, job_errors: _Optional[_Mapping[str, str]] = ...) -> None: ...

class JobStatusRequest(_message.Message):
    __slots__ = ("job_ids",)
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    job_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, job_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ActiveQueues(_message.Message):
    __slots__ = ("queues",)
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    queues: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, queues: _Optional[_Iterable[str]] = ...) -> None: ...

class GetActiveQueuesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetActiveQueuesResponse(_message.Message):
    __slots__ = ("active_queues_by_pool",)
    class ActiveQueuesByPoolEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: ActiveQueues
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[ActiveQueues, _Mapping]] = ...) -> None: ...
    ACTIVE_QUEUES_BY_POOL_FIELD_NUMBER: _ClassVar[int]
    active_queues_by_pool: _containers.MessageMap[str, ActiveQueues]
    def __init__(self, active_queues_by_pool: _Optional[_Mapping[str, ActiveQueues]] = ...) -> None: ...

class JobStatusUsingExternalJobUriRequest(_message.Message):
    __slots__ = ("queue", "jobset", "external_job_uri")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    JOBSET_FIELD_NUMBER: _ClassVar[int]
    EXTERNAL_JOB_URI_FIELD_NUMBER: _ClassVar[int]
    queue: str
    jobset: str
    external_job_uri: str
    def __init__(self, queue: _Optional[str] = ..., jobset: _Optional[str] = ..., external_job_uri: _Optional[str] = ...) -> None: ...

class JobStatusResponse(_message.Message):
    __slots__ = ("job_states",)
    class JobStatesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _submit_pb2.JobState
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_submit_pb2.JobState, str]] = ...) -> None: ...
    JOB_STATES_FIELD_NUMBER: _ClassVar[int]
    job_states: _containers.ScalarMap[str, _submit_pb2.JobState]
    def __init__(self, job_states: _Optional[_Mapping[str, _submit_pb2.JobState]] = ...) -> None: ...
