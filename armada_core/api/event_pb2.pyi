import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from armada_core.api import submit_pb2 as _submit_pb2
from armada_core.api import health_pb2 as _health_pb2
from google.protobuf import empty_pb2 as _empty_pb2
from armada_core.api.k8s import resource_pb2 as _resource_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Cause(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    Error: _ClassVar[Cause]
    Evicted: _ClassVar[Cause]
    OOM: _ClassVar[Cause]
    DeadlineExceeded: _ClassVar[Cause]
    Rejected: _ClassVar[Cause]
Error: Cause
Evicted: Cause
OOM: Cause
DeadlineExceeded: Cause
Rejected: Cause

class JobSubmittedEvent(_message.Message):
    __slots__ = ("job_id", "job_set_id", "queue", "created", "job")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_SET_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_set_id: str
    queue: str
    created: _timestamp_pb2.Timestamp
    job: _submit_pb2.Job
    def __init__(self, job_id: _Optional[str] = ..., job_set_id: _Optional[str] = ..., queue: _Optional[str] = ..., created: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., job: _Optional[_Union[_submit_pb2.Job, _Mapping]] = ...) -> None: ...

class JobQueuedEvent(_message.Message):
    __slots__ = ("job_id", "job_set_id", "queue", "created", "retry_after")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_SET_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_set_id: str
    queue: str
    created: _timestamp_pb2.Timestamp
    retry_after: _timestamp_pb2.Timestamp
    def __init__(self, job_id: _Optional[str] = ..., job_set_id: _Optional[str] = ..., queue: _Optional[str] = ..., created: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., retry_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class JobLeasedEvent(_message.Message):
    __slots__ = ("job_id", "job_set_id", "queue", "created", "cluster_id", "pool", "run_id", "node_name")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_SET_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_set_id: str
    queue: str
    created: _timestamp_pb2.Timestamp
    cluster_id: str
    pool: str
    run_id: str
    node_name: str
    def __init__(self, job_id: _Optional[str] = ..., job_set_id: _Optional[str] = ..., queue: _Optional[str] = ..., created: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cluster_id: _Optional[str] = ..., pool: _Optional[str] = ..., run_id: _Optional[str] = ..., node_name: _Optional[str] = ...) -> None: ...

class JobLeaseReturnedEvent(_message.Message):
    __slots__ = ("job_id", "job_set_id", "queue", "created", "cluster_id", "reason", "kubernetes_id", "pod_number", "run_attempted", "run_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_SET_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    KUBERNETES_ID_FIELD_NUMBER: _ClassVar[int]
    POD_NUMBER_FIELD_NUMBER: _ClassVar[int]
    RUN_ATTEMPTED_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_set_id: str
    queue: str
    created: _timestamp_pb2.Timestamp
    cluster_id: str
    reason: str
    kubernetes_id: str
    pod_number: int
    run_attempted: bool
    run_id: str
    def __init__(self, job_id: _Optional[str] = ..., job_set_id: _Optional[str] = ..., queue: _Optional[str] = ..., created: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cluster_id: _Optional[str] = ..., reason: _Optional[str] = ..., kubernetes_id: _Optional[str] = ..., pod_number: _Optional[int] = ..., run_attempted: _Optional[bool] = ..., run_id: _Optional[str] = ...) -> None: ...

class JobLeaseExpiredEvent(_message.Message):
    __slots__ = ("job_id", "job_set_id", "queue", "created", "run_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_SET_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_set_id: str
    queue: str
    created: _timestamp_pb2.Timestamp
    run_id: str
    def __init__(self, job_id: _Optional[str] = ..., job_set_id: _Optional[str] = ..., queue: _Optional[str] = ..., created: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., run_id: _Optional[str] = ...) -> None: ...

class JobPendingEvent(_message.Message):
    __slots__ = ("job_id", "job_set_id", "queue", "created", "cluster_id", "kubernetes_id", "pod_number", "pod_name", "pod_namespace", "pool", "run_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_SET_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    KUBERNETES_ID_FIELD_NUMBER: _ClassVar[int]
    POD_NUMBER_FIELD_NUMBER: _ClassVar[int]
    POD_NAME_FIELD_NUMBER: _ClassVar[int]
    POD_NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_set_id: str
    queue: str
    created: _timestamp_pb2.Timestamp
    cluster_id: str
    kubernetes_id: str
    pod_number: int
    pod_name: str
    pod_namespace: str
    pool: str
    run_id: str
    def __init__(self, job_id: _Optional[str] = ..., job_set_id: _Optional[str] = ..., queue: _Optional[str] = ..., created: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cluster_id: _Optional[str] = ..., kubernetes_id: _Optional[str] = ..., pod_number: _Optional[int] = ..., pod_name: _Optional[str] = ..., pod_namespace: _Optional[str] = ..., pool: _Optional[str] = ..., run_id: _Optional[str] = ...) -> None: ...

class JobRunningEvent(_message.Message):
    __slots__ = ("job_id", "job_set_id", "queue", "created", "cluster_id", "kubernetes_id", "node_name", "pod_number", "pod_name", "pod_namespace", "pool", "run_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_SET_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    KUBERNETES_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    POD_NUMBER_FIELD_NUMBER: _ClassVar[int]
    POD_NAME_FIELD_NUMBER: _ClassVar[int]
    POD_NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_set_id: str
    queue: str
    created: _timestamp_pb2.Timestamp
    cluster_id: str
    kubernetes_id: str
    node_name: str
    pod_number: int
    pod_name: str
    pod_namespace: str
    pool: str
    run_id: str
    def __init__(self, job_id: _Optional[str] = ..., job_set_id: _Optional[str] = ..., queue: _Optional[str] = ..., created: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cluster_id: _Optional[str] = ..., kubernetes_id: _Optional[str] = ..., node_name: _Optional[str] = ..., pod_number: _Optional[int] = ..., pod_name: _Optional[str] = ..., pod_namespace: _Optional[str] = ..., pool: _Optional[str] = ..., run_id: _Optional[str] = ...) -> None: ...

class JobIngressInfoEvent(_message.Message):
    __slots__ = ("job_id", "job_set_id", "queue", "created", "cluster_id", "kubernetes_id", "node_name", "pod_number", "pod_name", "pod_namespace", "ingress_addresses")
    class IngressAddressesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: str
        def __init__(self, key: _Optional[int] = ..., value: _Optional[str] = ...) -> None: ...
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_SET_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    KUBERNETES_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    POD_NUMBER_FIELD_NUMBER: _ClassVar[int]
    POD_NAME_FIELD_NUMBER: _ClassVar[int]
    POD_NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    INGRESS_ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_set_id: str
    queue: str
    created: _timestamp_pb2.Timestamp
    cluster_id: str
    kubernetes_id: str
    node_name: str
    pod_number: int
    pod_name: str
    pod_namespace: str
    ingress_addresses: _containers.ScalarMap[int, str]
    def __init__(self, job_id: _Optional[str] = ..., job_set_id: _Optional[str] = ..., queue: _Optional[str] = ..., created: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cluster_id: _Optional[str] = ..., kubernetes_id: _Optional[str] = ..., node_name: _Optional[str] = ..., pod_number: _Optional[int] = ..., pod_name: _Optional[str] = ..., pod_namespace: _Optional[str] = ..., ingress_addresses: _Optional[_Mapping[int, str]] = ...) -> None: ...

class JobFailedEvent(_message.Message):
    __slots__ = ("job_id", "job_set_id", "queue", "created", "cluster_id", "reason", "exit_codes", "kubernetes_id", "node_name", "pod_number", "pod_name", "pod_namespace", "container_statuses", "cause", "failure_category", "failure_subcategory", "retryable", "run_id", "condition")
    class ExitCodesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_SET_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODES_FIELD_NUMBER: _ClassVar[int]
    KUBERNETES_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    POD_NUMBER_FIELD_NUMBER: _ClassVar[int]
    POD_NAME_FIELD_NUMBER: _ClassVar[int]
    POD_NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_STATUSES_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    FAILURE_CATEGORY_FIELD_NUMBER: _ClassVar[int]
    FAILURE_SUBCATEGORY_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    CONDITION_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_set_id: str
    queue: str
    created: _timestamp_pb2.Timestamp
    cluster_id: str
    reason: str
    exit_codes: _containers.ScalarMap[str, int]
    kubernetes_id: str
    node_name: str
    pod_number: int
    pod_name: str
    pod_namespace: str
    container_statuses: _containers.RepeatedCompositeFieldContainer[ContainerStatus]
    cause: Cause
    failure_category: str
    failure_subcategory: str
    retryable: bool
    run_id: str
    condition: str
    def __init__(self, job_id: _Optional[str] = ..., job_set_id: _Optional[str] = ..., queue: _Optional[str] = ..., created: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cluster_id: _Optional[str] = ..., reason: _Optional[str] = ..., exit_codes: _Optional[_Mapping[str, int]] = ..., kubernetes_id: _Optional[str] = ..., node_name: _Optional[str] = ..., pod_number: _Optional[int] = ..., pod_name: _Optional[str] = ..., pod_namespace: _Optional[str] = ..., container_statuses: _Optional[_Iterable[_Union[ContainerStatus, _Mapping]]] = ..., cause: _Optional[_Union[Cause, str]] = ..., failure_category: _Optional[str] = ..., failure_subcategory: _Optional[str] = ..., retryable: _Optional[bool] = ..., run_id: _Optional[str] = ..., condition: _Optional[str] = ...) -> None: ...

class JobPreemptingEvent(_message.Message):
    __slots__ = ("job_id", "job_set_id", "queue", "created", "requestor", "reason")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_SET_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    REQUESTOR_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_set_id: str
    queue: str
    created: _timestamp_pb2.Timestamp
    requestor: str
    reason: str
    def __init__(self, job_id: _Optional[str] = ..., job_set_id: _Optional[str] = ..., queue: _Optional[str] = ..., created: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., requestor: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class JobPreemptedEvent(_message.Message):
    __slots__ = ("job_id", "job_set_id", "queue", "created", "cluster_id", "run_id", "preemptive_run_id", "reason", "preempting_job_id", "requestor")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_SET_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    PREEMPTIVE_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    PREEMPTING_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    REQUESTOR_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_set_id: str
    queue: str
    created: _timestamp_pb2.Timestamp
    cluster_id: str
    run_id: str
    preemptive_run_id: str
    reason: str
    preempting_job_id: str
    requestor: str
    def __init__(self, job_id: _Optional[str] = ..., job_set_id: _Optional[str] = ..., queue: _Optional[str] = ..., created: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cluster_id: _Optional[str] = ..., run_id: _Optional[str] = ..., preemptive_run_id: _Optional[str] = ..., reason: _Optional[str] = ..., preempting_job_id: _Optional[str] = ..., requestor: _Optional[str] = ...) -> None: ...

class JobSucceededEvent(_message.Message):
    __slots__ = ("job_id", "job_set_id", "queue", "created", "cluster_id", "kubernetes_id", "node_name", "pod_number", "pod_name", "pod_namespace", "run_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_SET_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    KUBERNETES_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    POD_NUMBER_FIELD_NUMBER: _ClassVar[int]
    POD_NAME_FIELD_NUMBER: _ClassVar[int]
    POD_NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_set_id: str
    queue: str
    created: _timestamp_pb2.Timestamp
    cluster_id: str
    kubernetes_id: str
    node_name: str
    pod_number: int
    pod_name: str
    pod_namespace: str
    run_id: str
    def __init__(self, job_id: _Optional[str] = ..., job_set_id: _Optional[str] = ..., queue: _Optional[str] = ..., created: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cluster_id: _Optional[str] = ..., kubernetes_id: _Optional[str] = ..., node_name: _Optional[str] = ..., pod_number: _Optional[int] = ..., pod_name: _Optional[str] = ..., pod_namespace: _Optional[str] = ..., run_id: _Optional[str] = ...) -> None: ...

class JobUtilisationEvent(_message.Message):
    __slots__ = ("job_id", "job_set_id", "queue", "created", "cluster_id", "kubernetes_id", "MaxResourcesForPeriod", "node_name", "pod_number", "pod_name", "pod_namespace", "total_cumulative_usage", "AvgResourcesForPeriod")
    class MaxResourcesForPeriodEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _resource_pb2.Quantity
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_resource_pb2.Quantity, _Mapping]] = ...) -> None: ...
    class TotalCumulativeUsageEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _resource_pb2.Quantity
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_resource_pb2.Quantity, _Mapping]] = ...) -> None: ...
    class AvgResourcesForPeriodEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _resource_pb2.Quantity
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_resource_pb2.Quantity, _Mapping]] = ...) -> None: ...
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_SET_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    KUBERNETES_ID_FIELD_NUMBER: _ClassVar[int]
    MAXRESOURCESFORPERIOD_FIELD_NUMBER: _ClassVar[int]
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    POD_NUMBER_FIELD_NUMBER: _ClassVar[int]
    POD_NAME_FIELD_NUMBER: _ClassVar[int]
    POD_NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_CUMULATIVE_USAGE_FIELD_NUMBER: _ClassVar[int]
    AVGRESOURCESFORPERIOD_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_set_id: str
    queue: str
    created: _timestamp_pb2.Timestamp
    cluster_id: str
    kubernetes_id: str
    MaxResourcesForPeriod: _containers.MessageMap[str, _resource_pb2.Quantity]
    node_name: str
    pod_number: int
    pod_name: str
    pod_namespace: str
    total_cumulative_usage: _containers.MessageMap[str, _resource_pb2.Quantity]
    AvgResourcesForPeriod: _containers.MessageMap[str, _resource_pb2.Quantity]
    def __init__(self, job_id: _Optional[str] = ..., job_set_id: _Optional[str] = ..., queue: _Optional[str] = ..., created: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cluster_id: _Optional[str] = ..., kubernetes_id: _Optional[str] = ..., MaxResourcesForPeriod: _Optional[_Mapping[str, _resource_pb2.Quantity]] = ..., node_name: _Optional[str] = ..., pod_number: _Optional[int] = ..., pod_name: _Optional[str] = ..., pod_namespace: _Optional[str] = ..., total_cumulative_usage: _Optional[_Mapping[str, _resource_pb2.Quantity]] = ..., AvgResourcesForPeriod: _Optional[_Mapping[str, _resource_pb2.Quantity]] = ...) -> None: ...

class JobReprioritizingEvent(_message.Message):
    __slots__ = ("job_id", "job_set_id", "queue", "created", "new_priority", "requestor")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_SET_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    NEW_PRIORITY_FIELD_NUMBER: _ClassVar[int]
    REQUESTOR_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_set_id: str
    queue: str
    created: _timestamp_pb2.Timestamp
    new_priority: float
    requestor: str
    def __init__(self, job_id: _Optional[str] = ..., job_set_id: _Optional[str] = ..., queue: _Optional[str] = ..., created: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., new_priority: _Optional[float] = ..., requestor: _Optional[str] = ...) -> None: ...

class JobReprioritizedEvent(_message.Message):
    __slots__ = ("job_id", "job_set_id", "queue", "created", "new_priority", "requestor")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_SET_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    NEW_PRIORITY_FIELD_NUMBER: _ClassVar[int]
    REQUESTOR_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_set_id: str
    queue: str
    created: _timestamp_pb2.Timestamp
    new_priority: float
    requestor: str
    def __init__(self, job_id: _Optional[str] = ..., job_set_id: _Optional[str] = ..., queue: _Optional[str] = ..., created: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., new_priority: _Optional[float] = ..., requestor: _Optional[str] = ...) -> None: ...

class JobCancellingEvent(_message.Message):
    __slots__ = ("job_id", "job_set_id", "queue", "created", "requestor", "reason")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_SET_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    REQUESTOR_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_set_id: str
    queue: str
    created: _timestamp_pb2.Timestamp
    requestor: str
    reason: str
    def __init__(self, job_id: _Optional[str] = ..., job_set_id: _Optional[str] = ..., queue: _Optional[str] = ..., created: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., requestor: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class JobCancelledEvent(_message.Message):
    __slots__ = ("job_id", "job_set_id", "queue", "created", "requestor", "reason")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_SET_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    REQUESTOR_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_set_id: str
    queue: str
    created: _timestamp_pb2.Timestamp
    requestor: str
    reason: str
    def __init__(self, job_id: _Optional[str] = ..., job_set_id: _Optional[str] = ..., queue: _Optional[str] = ..., created: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., requestor: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class JobTerminatedEvent(_message.Message):
    __slots__ = ("job_id", "job_set_id", "queue", "created", "cluster_id", "kubernetes_id", "pod_number", "pod_name", "pod_namespace", "reason")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_SET_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    KUBERNETES_ID_FIELD_NUMBER: _ClassVar[int]
    POD_NUMBER_FIELD_NUMBER: _ClassVar[int]
    POD_NAME_FIELD_NUMBER: _ClassVar[int]
    POD_NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_set_id: str
    queue: str
    created: _timestamp_pb2.Timestamp
    cluster_id: str
    kubernetes_id: str
    pod_number: int
    pod_name: str
    pod_namespace: str
    reason: str
    def __init__(self, job_id: _Optional[str] = ..., job_set_id: _Optional[str] = ..., queue: _Optional[str] = ..., created: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cluster_id: _Optional[str] = ..., kubernetes_id: _Optional[str] = ..., pod_number: _Optional[int] = ..., pod_name: _Optional[str] = ..., pod_namespace: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class EventMessage(_message.Message):
    __slots__ = ("submitted", "queued", "leased", "lease_returned", "lease_expired", "pending", "running", "failed", "succeeded", "reprioritized", "cancelling", "cancelled", "utilisation", "ingress_info", "reprioritizing", "preempted", "preempting")
    SUBMITTED_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    LEASED_FIELD_NUMBER: _ClassVar[int]
    LEASE_RETURNED_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRED_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    SUCCEEDED_FIELD_NUMBER: _ClassVar[int]
    REPRIORITIZED_FIELD_NUMBER: _ClassVar[int]
    CANCELLING_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    UTILISATION_FIELD_NUMBER: _ClassVar[int]
    INGRESS_INFO_FIELD_NUMBER: _ClassVar[int]
    REPRIORITIZING_FIELD_NUMBER: _ClassVar[int]
    PREEMPTED_FIELD_NUMBER: _ClassVar[int]
    PREEMPTING_FIELD_NUMBER: _ClassVar[int]
    submitted: JobSubmittedEvent
    queued: JobQueuedEvent
    leased: JobLeasedEvent
    lease_returned: JobLeaseReturnedEvent
    lease_expired: JobLeaseExpiredEvent
    pending: JobPendingEvent
    running: JobRunningEvent
    failed: JobFailedEvent
    succeeded: JobSucceededEvent
    reprioritized: JobReprioritizedEvent
    cancelling: JobCancellingEvent
    cancelled: JobCancelledEvent
    utilisation: JobUtilisationEvent
    ingress_info: JobIngressInfoEvent
    reprioritizing: JobReprioritizingEvent
    preempted: JobPreemptedEvent
    preempting: JobPreemptingEvent
    def __init__(self, submitted: _Optional[_Union[JobSubmittedEvent, _Mapping]] = ..., queued: _Optional[_Union[JobQueuedEvent, _Mapping]] = ..., leased: _Optional[_Union[JobLeasedEvent, _Mapping]] = ..., lease_returned: _Optional[_Union[JobLeaseReturnedEvent, _Mapping]] = ..., lease_expired: _Optional[_Union[JobLeaseExpiredEvent, _Mapping]] = ..., pending: _Optional[_Union[JobPendingEvent, _Mapping]] = ..., running: _Optional[_Union[JobRunningEvent, _Mapping]] = ..., failed: _Optional[_Union[JobFailedEvent, _Mapping]] = ..., succeeded: _Optional[_Union[JobSucceededEvent, _Mapping]] = ..., reprioritized: _Optional[_Union[JobReprioritizedEvent, _Mapping]] = ..., cancelling: _Optional[_Union[JobCancellingEvent, _Mapping]] = ..., cancelled: _Optional[_Union[JobCancelledEvent, _Mapping]] = ..., utilisation: _Optional[_Union[JobUtilisationEvent, _Mapping]] = ..., ingress_info: _Optional[_Union[JobIngressInfoEvent, _Mapping]] = ..., reprioritizing: _Optional[_Union[JobReprioritizingEvent, _Mapping]] = ..., preempted: _Optional[_Union[JobPreemptedEvent, _Mapping]] = ..., preempting: _Optional[_Union[JobPreemptingEvent, _Mapping]] = ...) -> None: ...

class ContainerStatus(_message.Message):
    __slots__ = ("name", "exitCode", "message", "reason", "cause", "init_container")
    NAME_FIELD_NUMBER: _ClassVar[int]
    EXITCODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    INIT_CONTAINER_FIELD_NUMBER: _ClassVar[int]
    name: str
    exitCode: int
    message: str
    reason: str
    cause: Cause
    init_container: bool
    def __init__(self, name: _Optional[str] = ..., exitCode: _Optional[int] = ..., message: _Optional[str] = ..., reason: _Optional[str] = ..., cause: _Optional[_Union[Cause, str]] = ..., init_container: _Optional[bool] = ...) -> None: ...

class EventStreamMessage(_message.Message):
    __slots__ = ("id", "message")
    ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    id: str
    message: EventMessage
    def __init__(self, id: _Optional[str] = ..., message: _Optional[_Union[EventMessage, _Mapping]] = ...) -> None: ...

class JobSetRequest(_message.Message):
    __slots__ = ("id", "watch", "from_message_id", "queue", "errorIfMissing")
    ID_FIELD_NUMBER: _ClassVar[int]
    WATCH_FIELD_NUMBER: _ClassVar[int]
    FROM_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    ERRORIFMISSING_FIELD_NUMBER: _ClassVar[int]
    id: str
    watch: bool
    from_message_id: str
    queue: str
    errorIfMissing: bool
    def __init__(self, id: _Optional[str] = ..., watch: _Optional[bool] = ..., from_message_id: _Optional[str] = ..., queue: _Optional[str] = ..., errorIfMissing: _Optional[bool] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("queue", "job_set_id", "from_id")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    JOB_SET_ID_FIELD_NUMBER: _ClassVar[int]
    FROM_ID_FIELD_NUMBER: _ClassVar[int]
    queue: str
    job_set_id: str
    from_id: str
    def __init__(self, queue: _Optional[str] = ..., job_set_id: _Optional[str] = ..., from_id: _Optional[str] = ...) -> None: ...
