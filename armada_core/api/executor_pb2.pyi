import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from armada_core.api import submit_pb2 as _submit_pb2
from armada_core.api import binoculars_pb2 as _binoculars_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ExecutorLogsRequest(_message.Message):
    __slots__ = ("run_id", "job_id", "pod_name", "namespace", "container", "since_time", "tail_lines")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    POD_NAME_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    SINCE_TIME_FIELD_NUMBER: _ClassVar[int]
    TAIL_LINES_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    job_id: str
    pod_name: str
    namespace: str
    container: str
    since_time: str
    tail_lines: int
    def __init__(self, run_id: _Optional[str] = ..., job_id: _Optional[str] = ..., pod_name: _Optional[str] = ..., namespace: _Optional[str] = ..., container: _Optional[str] = ..., since_time: _Optional[str] = ..., tail_lines: _Optional[int] = ...) -> None: ...

class ExecutorLogsResponse(_message.Message):
    __slots__ = ("log",)
    LOG_FIELD_NUMBER: _ClassVar[int]
    log: _containers.RepeatedCompositeFieldContainer[_binoculars_pb2.LogLine]
    def __init__(self, log: _Optional[_Iterable[_Union[_binoculars_pb2.LogLine, _Mapping]]] = ...) -> None: ...

class Node(_message.Message):
    __slots__ = ("name", "labels", "taints", "unschedulable", "allocatable")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class AllocatableEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    TAINTS_FIELD_NUMBER: _ClassVar[int]
    UNSCHEDULABLE_FIELD_NUMBER: _ClassVar[int]
    ALLOCATABLE_FIELD_NUMBER: _ClassVar[int]
    name: str
    labels: _containers.ScalarMap[str, str]
    taints: _containers.RepeatedCompositeFieldContainer[Taint]
    unschedulable: bool
    allocatable: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., taints: _Optional[_Iterable[_Union[Taint, _Mapping]]] = ..., unschedulable: _Optional[bool] = ..., allocatable: _Optional[_Mapping[str, str]] = ...) -> None: ...

class Taint(_message.Message):
    __slots__ = ("key", "value", "effect")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    effect: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ..., effect: _Optional[str] = ...) -> None: ...

class ContainerResult(_message.Message):
    __slots__ = ("name", "exit_code", "message", "reason", "init_container")
    NAME_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    INIT_CONTAINER_FIELD_NUMBER: _ClassVar[int]
    name: str
    exit_code: int
    message: str
    reason: str
    init_container: bool
    def __init__(self, name: _Optional[str] = ..., exit_code: _Optional[int] = ..., message: _Optional[str] = ..., reason: _Optional[str] = ..., init_container: _Optional[bool] = ...) -> None: ...

class RunUpdate(_message.Message):
    __slots__ = ("run_id", "job_id", "time", "pending", "running", "succeeded", "failed", "returned", "stopped", "ingress_info")
    class Pending(_message.Message):
        __slots__ = ("kubernetes_id",)
        KUBERNETES_ID_FIELD_NUMBER: _ClassVar[int]
        kubernetes_id: str
        def __init__(self, kubernetes_id: _Optional[str] = ...) -> None: ...
    class Running(_message.Message):
        __slots__ = ("node", "kubernetes_id")
        NODE_FIELD_NUMBER: _ClassVar[int]
        KUBERNETES_ID_FIELD_NUMBER: _ClassVar[int]
        node: str
        kubernetes_id: str
        def __init__(self, node: _Optional[str] = ..., kubernetes_id: _Optional[str] = ...) -> None: ...
    class Succeeded(_message.Message):
        __slots__ = ()
        def __init__(self) -> None: ...
    class Failed(_message.Message):
        __slots__ = ("reason", "containers", "condition", "category", "subcategory")
        REASON_FIELD_NUMBER: _ClassVar[int]
        CONTAINERS_FIELD_NUMBER: _ClassVar[int]
        CONDITION_FIELD_NUMBER: _ClassVar[int]
        CATEGORY_FIELD_NUMBER: _ClassVar[int]
        SUBCATEGORY_FIELD_NUMBER: _ClassVar[int]
        reason: str
        containers: _containers.RepeatedCompositeFieldContainer[ContainerResult]
        condition: str
        category: str
        subcategory: str
        def __init__(self, reason: _Optional[str] = ..., containers: _Optional[_Iterable[_Union[ContainerResult, _Mapping]]] = ..., condition: _Optional[str] = ..., category: _Optional[str] = ..., subcategory: _Optional[str] = ...) -> None: ...
    class Returned(_message.Message):
        __slots__ = ("reason", "run_attempted")
        REASON_FIELD_NUMBER: _ClassVar[int]
        RUN_ATTEMPTED_FIELD_NUMBER: _ClassVar[int]
        reason: str
        run_attempted: bool
        def __init__(self, reason: _Optional[str] = ..., run_attempted: _Optional[bool] = ...) -> None: ...
    class Stopped(_message.Message):
        __slots__ = ()
        def __init__(self) -> None: ...
    class IngressInfo(_message.Message):
        __slots__ = ("addresses",)
        class AddressesEntry(_message.Message):
            __slots__ = ("key", "value")
            KEY_FIELD_NUMBER: _ClassVar[int]
            VALUE_FIELD_NUMBER: _ClassVar[int]
            key: int
            value: str
            def __init__(self, key: _Optional[int] = ..., value: _Optional[str] = ...) -> None: ...
        ADDRESSES_FIELD_NUMBER: _ClassVar[int]
        addresses: _containers.ScalarMap[int, str]
        def __init__(self, addresses: _Optional[_Mapping[int, str]] = ...) -> None: ...
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    SUCCEEDED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    RETURNED_FIELD_NUMBER: _ClassVar[int]
    STOPPED_FIELD_NUMBER: _ClassVar[int]
    INGRESS_INFO_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    job_id: str
    time: _timestamp_pb2.Timestamp
    pending: RunUpdate.Pending
    running: RunUpdate.Running
    succeeded: RunUpdate.Succeeded
    failed: RunUpdate.Failed
    returned: RunUpdate.Returned
    stopped: RunUpdate.Stopped
    ingress_info: RunUpdate.IngressInfo
    def __init__(self, run_id: _Optional[str] = ..., job_id: _Optional[str] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., pending: _Optional[_Union[RunUpdate.Pending, _Mapping]] = ..., running: _Optional[_Union[RunUpdate.Running, _Mapping]] = ..., succeeded: _Optional[_Union[RunUpdate.Succeeded, _Mapping]] = ..., failed: _Optional[_Union[RunUpdate.Failed, _Mapping]] = ..., returned: _Optional[_Union[RunUpdate.Returned, _Mapping]] = ..., stopped: _Optional[_Union[RunUpdate.Stopped, _Mapping]] = ..., ingress_info: _Optional[_Union[RunUpdate.IngressInfo, _Mapping]] = ...) -> None: ...

class SyncRequest(_message.Message):
    __slots__ = ("executor_id", "pool", "nodes", "run_ids", "updates", "capabilities", "control_address", "control_token")
    EXECUTOR_ID_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    RUN_IDS_FIELD_NUMBER: _ClassVar[int]
    UPDATES_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    CONTROL_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CONTROL_TOKEN_FIELD_NUMBER: _ClassVar[int]
    executor_id: str
    pool: str
    nodes: _containers.RepeatedCompositeFieldContainer[Node]
    run_ids: _containers.RepeatedScalarFieldContainer[str]
    updates: _containers.RepeatedCompositeFieldContainer[RunUpdate]
    capabilities: Capabilities
    control_address: str
    control_token: str
    def __init__(self, executor_id: _Optional[str] = ..., pool: _Optional[str] = ..., nodes: _Optional[_Iterable[_Union[Node, _Mapping]]] = ..., run_ids: _Optional[_Iterable[str]] = ..., updates: _Optional[_Iterable[_Union[RunUpdate, _Mapping]]] = ..., capabilities: _Optional[_Union[Capabilities, _Mapping]] = ..., control_address: _Optional[str] = ..., control_token: _Optional[str] = ...) -> None: ...

class Capabilities(_message.Message):
    __slots__ = ("unsupported_pod_fields",)
    UNSUPPORTED_POD_FIELDS_FIELD_NUMBER: _ClassVar[int]
    unsupported_pod_fields: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, unsupported_pod_fields: _Optional[_Iterable[str]] = ...) -> None: ...

class Lease(_message.Message):
    __slots__ = ("run_id", "run_index", "node", "pod_name", "job")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_INDEX_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    POD_NAME_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    run_index: int
    node: str
    pod_name: str
    job: _submit_pb2.Job
    def __init__(self, run_id: _Optional[str] = ..., run_index: _Optional[int] = ..., node: _Optional[str] = ..., pod_name: _Optional[str] = ..., job: _Optional[_Union[_submit_pb2.Job, _Mapping]] = ...) -> None: ...

class StopRun(_message.Message):
    __slots__ = ("run_id", "job_id", "reason", "preempt")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    PREEMPT_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    job_id: str
    reason: str
    preempt: bool
    def __init__(self, run_id: _Optional[str] = ..., job_id: _Optional[str] = ..., reason: _Optional[str] = ..., preempt: _Optional[bool] = ...) -> None: ...

class SyncResponse(_message.Message):
    __slots__ = ("leases", "stop", "sync_interval_seconds", "lease_timeout_seconds")
    LEASES_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    SYNC_INTERVAL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    LEASE_TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    leases: _containers.RepeatedCompositeFieldContainer[Lease]
    stop: _containers.RepeatedCompositeFieldContainer[StopRun]
    sync_interval_seconds: float
    lease_timeout_seconds: float
    def __init__(self, leases: _Optional[_Iterable[_Union[Lease, _Mapping]]] = ..., stop: _Optional[_Iterable[_Union[StopRun, _Mapping]]] = ..., sync_interval_seconds: _Optional[float] = ..., lease_timeout_seconds: _Optional[float] = ...) -> None: ...
