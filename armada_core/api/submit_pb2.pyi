import datetime

from google.protobuf import empty_pb2 as _empty_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from armada_core.api.k8s import core_v1_pb2 as _core_v1_pb2
from armada_core.api.k8s import networking_v1_pb2 as _networking_v1_pb2
from armada_core.api import health_pb2 as _health_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class IngressType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    Ingress: _ClassVar[IngressType]

class ServiceType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NodePort: _ClassVar[ServiceType]
    Headless: _ClassVar[ServiceType]

class JobState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    QUEUED: _ClassVar[JobState]
    PENDING: _ClassVar[JobState]
    RUNNING: _ClassVar[JobState]
    SUCCEEDED: _ClassVar[JobState]
    FAILED: _ClassVar[JobState]
    UNKNOWN: _ClassVar[JobState]
    SUBMITTED: _ClassVar[JobState]
    LEASED: _ClassVar[JobState]
    PREEMPTED: _ClassVar[JobState]
    CANCELLED: _ClassVar[JobState]
    REJECTED: _ClassVar[JobState]

class RetryAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RETRY_ACTION_UNSPECIFIED: _ClassVar[RetryAction]
    RETRY_ACTION_FAIL: _ClassVar[RetryAction]
    RETRY_ACTION_RETRY: _ClassVar[RetryAction]
Ingress: IngressType
NodePort: ServiceType
Headless: ServiceType
QUEUED: JobState
PENDING: JobState
RUNNING: JobState
SUCCEEDED: JobState
FAILED: JobState
UNKNOWN: JobState
SUBMITTED: JobState
LEASED: JobState
PREEMPTED: JobState
CANCELLED: JobState
REJECTED: JobState
RETRY_ACTION_UNSPECIFIED: RetryAction
RETRY_ACTION_FAIL: RetryAction
RETRY_ACTION_RETRY: RetryAction

class JobSubmitRequestItem(_message.Message):
    __slots__ = ("priority", "namespace", "client_id", "labels", "annotations", "required_node_labels", "pod_spec", "pod_specs", "ingress", "services", "scheduler", "external_job_uri")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class AnnotationsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class RequiredNodeLabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    REQUIRED_NODE_LABELS_FIELD_NUMBER: _ClassVar[int]
    POD_SPEC_FIELD_NUMBER: _ClassVar[int]
    POD_SPECS_FIELD_NUMBER: _ClassVar[int]
    INGRESS_FIELD_NUMBER: _ClassVar[int]
    SERVICES_FIELD_NUMBER: _ClassVar[int]
    SCHEDULER_FIELD_NUMBER: _ClassVar[int]
    EXTERNAL_JOB_URI_FIELD_NUMBER: _ClassVar[int]
    priority: float
    namespace: str
    client_id: str
    labels: _containers.ScalarMap[str, str]
    annotations: _containers.ScalarMap[str, str]
    required_node_labels: _containers.ScalarMap[str, str]
    pod_spec: _core_v1_pb2.PodSpec
    pod_specs: _containers.RepeatedCompositeFieldContainer[_core_v1_pb2.PodSpec]
    ingress: _containers.RepeatedCompositeFieldContainer[IngressConfig]
    services: _containers.RepeatedCompositeFieldContainer[ServiceConfig]
    scheduler: str
    external_job_uri: str
    def __init__(self, priority: _Optional[float] = ..., namespace: _Optional[str] = ..., client_id: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., annotations: _Optional[_Mapping[str, str]] = ..., required_node_labels: _Optional[_Mapping[str, str]] = ..., pod_spec: _Optional[_Union[_core_v1_pb2.PodSpec, _Mapping]] = ..., pod_specs: _Optional[_Iterable[_Union[_core_v1_pb2.PodSpec, _Mapping]]] = ..., ingress: _Optional[_Iterable[_Union[IngressConfig, _Mapping]]] = ..., services: _Optional[_Iterable[_Union[ServiceConfig, _Mapping]]] = ..., scheduler: _Optional[str] = ..., external_job_uri: _Optional[str] = ...) -> None: ...

class IngressConfig(_message.Message):
    __slots__ = ("type", "ports", "annotations", "tls_enabled", "cert_name", "use_clusterIP")
    class AnnotationsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PORTS_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    TLS_ENABLED_FIELD_NUMBER: _ClassVar[int]
    CERT_NAME_FIELD_NUMBER: _ClassVar[int]
    USE_CLUSTERIP_FIELD_NUMBER: _ClassVar[int]
    type: IngressType
    ports: _containers.RepeatedScalarFieldContainer[int]
    annotations: _containers.ScalarMap[str, str]
    tls_enabled: bool
    cert_name: str
    use_clusterIP: bool
    def __init__(self, type: _Optional[_Union[IngressType, str]] = ..., ports: _Optional[_Iterable[int]] = ..., annotations: _Optional[_Mapping[str, str]] = ..., tls_enabled: _Optional[bool] = ..., cert_name: _Optional[str] = ..., use_clusterIP: _Optional[bool] = ...) -> None: ...

class ServiceConfig(_message.Message):
    __slots__ = ("type", "ports", "name")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PORTS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    type: ServiceType
    ports: _containers.RepeatedScalarFieldContainer[int]
    name: str
    def __init__(self, type: _Optional[_Union[ServiceType, str]] = ..., ports: _Optional[_Iterable[int]] = ..., name: _Optional[str] = ...) -> None: ...

class JobSubmitRequest(_message.Message):
    __slots__ = ("queue", "job_set_id", "job_request_items")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    JOB_SET_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_REQUEST_ITEMS_FIELD_NUMBER: _ClassVar[int]
    queue: str
    job_set_id: str
    job_request_items: _containers.RepeatedCompositeFieldContainer[JobSubmitRequestItem]
    def __init__(self, queue: _Optional[str] = ..., job_set_id: _Optional[str] = ..., job_request_items: _Optional[_Iterable[_Union[JobSubmitRequestItem, _Mapping]]] = ...) -> None: ...

class JobPreemptRequest(_message.Message):
    __slots__ = ("queue", "job_set_id", "job_ids", "reason")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    JOB_SET_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    queue: str
    job_set_id: str
    job_ids: _containers.RepeatedScalarFieldContainer[str]
    reason: str
    def __init__(self, queue: _Optional[str] = ..., job_set_id: _Optional[str] = ..., job_ids: _Optional[_Iterable[str]] = ..., reason: _Optional[str] = ...) -> None: ...

class JobCancelRequest(_message.Message):
    __slots__ = ("job_id", "job_set_id", "queue", "job_ids", "reason")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_SET_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_set_id: str
    queue: str
    job_ids: _containers.RepeatedScalarFieldContainer[str]
    reason: str
    def __init__(self, job_id: _Optional[str] = ..., job_set_id: _Optional[str] = ..., queue: _Optional[str] = ..., job_ids: _Optional[_Iterable[str]] = ..., reason: _Optional[str] = ...) -> None: ...

class JobSetCancelRequest(_message.Message):
    __slots__ = ("job_set_id", "queue", "filter", "reason")
    JOB_SET_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    job_set_id: str
    queue: str
    filter: JobSetFilter
    reason: str
    def __init__(self, job_set_id: _Optional[str] = ..., queue: _Optional[str] = ..., filter: _Optional[_Union[JobSetFilter, _Mapping]] = ..., reason: _Optional[str] = ...) -> None: ...

class JobSetFilter(_message.Message):
    __slots__ = ("states",)
    STATES_FIELD_NUMBER: _ClassVar[int]
    states: _containers.RepeatedScalarFieldContainer[JobState]
    def __init__(self, states: _Optional[_Iterable[_Union[JobState, str]]] = ...) -> None: ...

class Job(_message.Message):
    __slots__ = ("id", "client_id", "job_set_id", "queue", "namespace", "labels", "annotations", "required_node_labels", "owner", "queue_ownership_user_groups", "compressed_queue_ownership_user_groups", "priority", "pod_spec", "pod_specs", "scheduling_resource_requirements", "created", "ingress", "services", "k8s_ingress", "k8s_service", "scheduler")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class AnnotationsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class RequiredNodeLabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_SET_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    REQUIRED_NODE_LABELS_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OWNERSHIP_USER_GROUPS_FIELD_NUMBER: _ClassVar[int]
    COMPRESSED_QUEUE_OWNERSHIP_USER_GROUPS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    POD_SPEC_FIELD_NUMBER: _ClassVar[int]
    POD_SPECS_FIELD_NUMBER: _ClassVar[int]
    SCHEDULING_RESOURCE_REQUIREMENTS_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    INGRESS_FIELD_NUMBER: _ClassVar[int]
    SERVICES_FIELD_NUMBER: _ClassVar[int]
    K8S_INGRESS_FIELD_NUMBER: _ClassVar[int]
    K8S_SERVICE_FIELD_NUMBER: _ClassVar[int]
    SCHEDULER_FIELD_NUMBER: _ClassVar[int]
    id: str
    client_id: str
    job_set_id: str
    queue: str
    namespace: str
    labels: _containers.ScalarMap[str, str]
    annotations: _containers.ScalarMap[str, str]
    required_node_labels: _containers.ScalarMap[str, str]
    owner: str
    queue_ownership_user_groups: _containers.RepeatedScalarFieldContainer[str]
    compressed_queue_ownership_user_groups: bytes
    priority: float
    pod_spec: _core_v1_pb2.PodSpec
    pod_specs: _containers.RepeatedCompositeFieldContainer[_core_v1_pb2.PodSpec]
    scheduling_resource_requirements: _core_v1_pb2.ResourceRequirements
    created: _timestamp_pb2.Timestamp
    ingress: _containers.RepeatedCompositeFieldContainer[IngressConfig]
    services: _containers.RepeatedCompositeFieldContainer[ServiceConfig]
    k8s_ingress: _containers.RepeatedCompositeFieldContainer[_networking_v1_pb2.Ingress]
    k8s_service: _containers.RepeatedCompositeFieldContainer[_core_v1_pb2.Service]
    scheduler: str
    def __init__(self, id: _Optional[str] = ..., client_id: _Optional[str] = ..., job_set_id: _Optional[str] = ..., queue: _Optional[str] = ..., namespace: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., annotations: _Optional[_Mapping[str, str]] = ..., required_node_labels: _Optional[_Mapping[str, str]] = ..., owner: _Optional[str] = ..., queue_ownership_user_groups: _Optional[_Iterable[str]] = ..., compressed_queue_ownership_user_groups: _Optional[bytes] = ..., priority: _Optional[float] = ..., pod_spec: _Optional[_Union[_core_v1_pb2.PodSpec, _Mapping]] = ..., pod_specs: _Optional[_Iterable[_Union[_core_v1_pb2.PodSpec, _Mapping]]] = ..., scheduling_resource_requirements: _Optional[_Union[_core_v1_pb2.ResourceRequirements, _Mapping]] = ..., created: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., ingress: _Optional[_Iterable[_Union[IngressConfig, _Mapping]]] = ..., services: _Optional[_Iterable[_Union[ServiceConfig, _Mapping]]] = ..., k8s_ingress: _Optional[_Iterable[_Union[_networking_v1_pb2.Ingress, _Mapping]]] = ..., k8s_service: _Optional[_Iterable[_Union[_core_v1_pb2.Service, _Mapping]]] = ..., scheduler: _Optional[str] = ...) -> None: ...

class JobReprioritizeRequest(_message.Message):
    __slots__ = ("job_ids", "job_set_id", "queue", "new_priority")
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    JOB_SET_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    NEW_PRIORITY_FIELD_NUMBER: _ClassVar[int]
    job_ids: _containers.RepeatedScalarFieldContainer[str]
    job_set_id: str
    queue: str
    new_priority: float
    def __init__(self, job_ids: _Optional[_Iterable[str]] = ..., job_set_id: _Optional[str] = ..., queue: _Optional[str] = ..., new_priority: _Optional[float] = ...) -> None: ...

class JobReprioritizeResponse(_message.Message):
    __slots__ = ("reprioritization_results",)
    class ReprioritizationResultsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    REPRIORITIZATION_RESULTS_FIELD_NUMBER: _ClassVar[int]
    reprioritization_results: _containers.ScalarMap[str, str]
    def __init__(self, reprioritization_results: _Optional[_Mapping[str, str]] = ...) -> None: ...

class JobSubmitResponseItem(_message.Message):
    __slots__ = ("job_id", "error")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    error: str
    def __init__(self, job_id: _Optional[str] = ..., error: _Optional[str] = ...) -> None: ...

class JobSubmitResponse(_message.Message):
    __slots__ = ("job_response_items",)
    JOB_RESPONSE_ITEMS_FIELD_NUMBER: _ClassVar[int]
    job_response_items: _containers.RepeatedCompositeFieldContainer[JobSubmitResponseItem]
    def __init__(self, job_response_items: _Optional[_Iterable[_Union[JobSubmitResponseItem, _Mapping]]] = ...) -> None: ...

class Queue(_message.Message):
    __slots__ = ("name", "priority_factor", "user_owners", "group_owners", "resource_limits", "resource_limits_by_priority_class_name", "permissions", "cordoned", "labels_deprecated", "labels", "retry_policies")
    class Permissions(_message.Message):
        __slots__ = ("subjects", "verbs")
        class Subject(_message.Message):
            __slots__ = ("kind", "name")
            KIND_FIELD_NUMBER: _ClassVar[int]
            NAME_FIELD_NUMBER: _ClassVar[int]
            kind: str
            name: str
            def __init__(self, kind: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...
        SUBJECTS_FIELD_NUMBER: _ClassVar[int]
        VERBS_FIELD_NUMBER: _ClassVar[int]
        subjects: _containers.RepeatedCompositeFieldContainer[Queue.Permissions.Subject]
        verbs: _containers.RepeatedScalarFieldContainer[str]
        def __init__(self, subjects: _Optional[_Iterable[_Union[Queue.Permissions.Subject, _Mapping]]] = ..., verbs: _Optional[_Iterable[str]] = ...) -> None: ...
    class ResourceLimitsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class ResourceLimitsByPriorityClassNameEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: PriorityClassResourceLimits
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[PriorityClassResourceLimits, _Mapping]] = ...) -> None: ...
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FACTOR_FIELD_NUMBER: _ClassVar[int]
    USER_OWNERS_FIELD_NUMBER: _ClassVar[int]
    GROUP_OWNERS_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_LIMITS_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_LIMITS_BY_PRIORITY_CLASS_NAME_FIELD_NUMBER: _ClassVar[int]
    PERMISSIONS_FIELD_NUMBER: _ClassVar[int]
    CORDONED_FIELD_NUMBER: _ClassVar[int]
    LABELS_DEPRECATED_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    RETRY_POLICIES_FIELD_NUMBER: _ClassVar[int]
    name: str
    priority_factor: float
    user_owners: _containers.RepeatedScalarFieldContainer[str]
    group_owners: _containers.RepeatedScalarFieldContainer[str]
    resource_limits: _containers.ScalarMap[str, float]
    resource_limits_by_priority_class_name: _containers.MessageMap[str, PriorityClassResourceLimits]
    permissions: _containers.RepeatedCompositeFieldContainer[Queue.Permissions]
    cordoned: bool
    labels_deprecated: _containers.RepeatedScalarFieldContainer[str]
    labels: _containers.ScalarMap[str, str]
    retry_policies: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., priority_factor: _Optional[float] = ..., user_owners: _Optional[_Iterable[str]] = ..., group_owners: _Optional[_Iterable[str]] = ..., resource_limits: _Optional[_Mapping[str, float]] = ..., resource_limits_by_priority_class_name: _Optional[_Mapping[str, PriorityClassResourceLimits]] = ..., permissions: _Optional[_Iterable[_Union[Queue.Permissions, _Mapping]]] = ..., cordoned: _Optional[bool] = ..., labels_deprecated: _Optional[_Iterable[str]] = ..., labels: _Optional[_Mapping[str, str]] = ..., retry_policies: _Optional[_Iterable[str]] = ...) -> None: ...

class PriorityClassResourceLimits(_message.Message):
    __slots__ = ("maximum_resource_fraction", "maximum_resource_fraction_by_pool")
    class MaximumResourceFractionEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class MaximumResourceFractionByPoolEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: PriorityClassPoolResourceLimits
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[PriorityClassPoolResourceLimits, _Mapping]] = ...) -> None: ...
    MAXIMUM_RESOURCE_FRACTION_FIELD_NUMBER: _ClassVar[int]
    MAXIMUM_RESOURCE_FRACTION_BY_POOL_FIELD_NUMBER: _ClassVar[int]
    maximum_resource_fraction: _containers.ScalarMap[str, float]
    maximum_resource_fraction_by_pool: _containers.MessageMap[str, PriorityClassPoolResourceLimits]
    def __init__(self, maximum_resource_fraction: _Optional[_Mapping[str, float]] = ..., maximum_resource_fraction_by_pool: _Optional[_Mapping[str, PriorityClassPoolResourceLimits]] = ...) -> None: ...

class PriorityClassPoolResourceLimits(_message.Message):
    __slots__ = ("maximum_resource_fraction",)
    class MaximumResourceFractionEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    MAXIMUM_RESOURCE_FRACTION_FIELD_NUMBER: _ClassVar[int]
    maximum_resource_fraction: _containers.ScalarMap[str, float]
    def __init__(self, maximum_resource_fraction: _Optional[_Mapping[str, float]] = ...) -> None: ...

class QueueList(_message.Message):
    __slots__ = ("queues",)
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    queues: _containers.RepeatedCompositeFieldContainer[Queue]
    def __init__(self, queues: _Optional[_Iterable[_Union[Queue, _Mapping]]] = ...) -> None: ...

class CancellationResult(_message.Message):
    __slots__ = ("cancelled_ids",)
    CANCELLED_IDS_FIELD_NUMBER: _ClassVar[int]
    cancelled_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, cancelled_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class PreemptionResult(_message.Message):
    __slots__ = ("preemption_results",)
    class PreemptionResultsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PREEMPTION_RESULTS_FIELD_NUMBER: _ClassVar[int]
    preemption_results: _containers.ScalarMap[str, str]
    def __init__(self, preemption_results: _Optional[_Mapping[str, str]] = ...) -> None: ...

class RetryPolicy(_message.Message):
    __slots__ = ("name", "retry_limit", "default_action", "rules", "retry_limit_unset", "anti_affinity_mode", "backoff_initial_delay_seconds", "backoff_max_delay_seconds", "backoff_multiplier")
    NAME_FIELD_NUMBER: _ClassVar[int]
    RETRY_LIMIT_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_ACTION_FIELD_NUMBER: _ClassVar[int]
    RULES_FIELD_NUMBER: _ClassVar[int]
    RETRY_LIMIT_UNSET_FIELD_NUMBER: _ClassVar[int]
    ANTI_AFFINITY_MODE_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_INITIAL_DELAY_SECONDS_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_MAX_DELAY_SECONDS_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_MULTIPLIER_FIELD_NUMBER: _ClassVar[int]
    name: str
    retry_limit: int
    default_action: RetryAction
    rules: _containers.RepeatedCompositeFieldContainer[RetryRule]
    retry_limit_unset: bool
    anti_affinity_mode: str
    backoff_initial_delay_seconds: float
    backoff_max_delay_seconds: float
    backoff_multiplier: float
    def __init__(self, name: _Optional[str] = ..., retry_limit: _Optional[int] = ..., default_action: _Optional[_Union[RetryAction, str]] = ..., rules: _Optional[_Iterable[_Union[RetryRule, _Mapping]]] = ..., retry_limit_unset: _Optional[bool] = ..., anti_affinity_mode: _Optional[str] = ..., backoff_initial_delay_seconds: _Optional[float] = ..., backoff_max_delay_seconds: _Optional[float] = ..., backoff_multiplier: _Optional[float] = ...) -> None: ...

class RetryRule(_message.Message):
    __slots__ = ("action", "on_category", "on_subcategory", "mutate", "match_conditions", "exit_code_operator", "exit_code_values", "termination_message_pattern", "match_categories", "match_subcategories", "container_name", "include_init_containers", "retry_limit", "anti_affinity_mode", "backoff_initial_delay_seconds", "backoff_max_delay_seconds", "backoff_multiplier")
    ACTION_FIELD_NUMBER: _ClassVar[int]
    ON_CATEGORY_FIELD_NUMBER: _ClassVar[int]
    ON_SUBCATEGORY_FIELD_NUMBER: _ClassVar[int]
    MUTATE_FIELD_NUMBER: _ClassVar[int]
    MATCH_CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_OPERATOR_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_VALUES_FIELD_NUMBER: _ClassVar[int]
    TERMINATION_MESSAGE_PATTERN_FIELD_NUMBER: _ClassVar[int]
    MATCH_CATEGORIES_FIELD_NUMBER: _ClassVar[int]
    MATCH_SUBCATEGORIES_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_NAME_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_INIT_CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    RETRY_LIMIT_FIELD_NUMBER: _ClassVar[int]
    ANTI_AFFINITY_MODE_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_INITIAL_DELAY_SECONDS_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_MAX_DELAY_SECONDS_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_MULTIPLIER_FIELD_NUMBER: _ClassVar[int]
    action: RetryAction
    on_category: str
    on_subcategory: str
    mutate: RetryMutation
    match_conditions: _containers.RepeatedScalarFieldContainer[str]
    exit_code_operator: str
    exit_code_values: _containers.RepeatedScalarFieldContainer[int]
    termination_message_pattern: str
    match_categories: _containers.RepeatedScalarFieldContainer[str]
    match_subcategories: _containers.RepeatedScalarFieldContainer[str]
    container_name: str
    include_init_containers: bool
    retry_limit: int
    anti_affinity_mode: str
    backoff_initial_delay_seconds: float
    backoff_max_delay_seconds: float
    backoff_multiplier: float
    def __init__(self, action: _Optional[_Union[RetryAction, str]] = ..., on_category: _Optional[str] = ..., on_subcategory: _Optional[str] = ..., mutate: _Optional[_Union[RetryMutation, _Mapping]] = ..., match_conditions: _Optional[_Iterable[str]] = ..., exit_code_operator: _Optional[str] = ..., exit_code_values: _Optional[_Iterable[int]] = ..., termination_message_pattern: _Optional[str] = ..., match_categories: _Optional[_Iterable[str]] = ..., match_subcategories: _Optional[_Iterable[str]] = ..., container_name: _Optional[str] = ..., include_init_containers: _Optional[bool] = ..., retry_limit: _Optional[int] = ..., anti_affinity_mode: _Optional[str] = ..., backoff_initial_delay_seconds: _Optional[float] = ..., backoff_max_delay_seconds: _Optional[float] = ..., backoff_multiplier: _Optional[float] = ...) -> None: ...

class RetryMutation(_message.Message):
    __slots__ = ("affinity", "resources")
    AFFINITY_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    affinity: RetryAffinityMutation
    resources: RetryResourceMutation
    def __init__(self, affinity: _Optional[_Union[RetryAffinityMutation, _Mapping]] = ..., resources: _Optional[_Union[RetryResourceMutation, _Mapping]] = ...) -> None: ...

class RetryAffinityMutation(_message.Message):
    __slots__ = ("avoid_same_node",)
    AVOID_SAME_NODE_FIELD_NUMBER: _ClassVar[int]
    avoid_same_node: bool
    def __init__(self, avoid_same_node: _Optional[bool] = ...) -> None: ...

class RetryResourceMutation(_message.Message):
    __slots__ = ("memory",)
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    memory: RetryResourceBump
    def __init__(self, memory: _Optional[_Union[RetryResourceBump, _Mapping]] = ...) -> None: ...

class RetryResourceBump(_message.Message):
    __slots__ = ("static", "factor")
    STATIC_FIELD_NUMBER: _ClassVar[int]
    FACTOR_FIELD_NUMBER: _ClassVar[int]
    static: str
    factor: float
    def __init__(self, static: _Optional[str] = ..., factor: _Optional[float] = ...) -> None: ...

class RetryPolicyGetRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class RetryPolicyDeleteRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class RetryPolicyListRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RetryPolicyList(_message.Message):
    __slots__ = ("retry_policies",)
    RETRY_POLICIES_FIELD_NUMBER: _ClassVar[int]
    retry_policies: _containers.RepeatedCompositeFieldContainer[RetryPolicy]
    def __init__(self, retry_policies: _Optional[_Iterable[_Union[RetryPolicy, _Mapping]]] = ...) -> None: ...

class QueueGetRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class QueueCordonRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class QueueUncordonRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class StreamingQueueGetRequest(_message.Message):
    __slots__ = ("num",)
    NUM_FIELD_NUMBER: _ClassVar[int]
    num: int
    def __init__(self, num: _Optional[int] = ...) -> None: ...

class QueueDeleteRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class JobSetInfo(_message.Message):
    __slots__ = ("name", "queued_jobs", "leased_jobs")
    NAME_FIELD_NUMBER: _ClassVar[int]
    QUEUED_JOBS_FIELD_NUMBER: _ClassVar[int]
    LEASED_JOBS_FIELD_NUMBER: _ClassVar[int]
    name: str
    queued_jobs: int
    leased_jobs: int
    def __init__(self, name: _Optional[str] = ..., queued_jobs: _Optional[int] = ..., leased_jobs: _Optional[int] = ...) -> None: ...

class QueueUpdateResponse(_message.Message):
    __slots__ = ("queue", "error")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    queue: Queue
    error: str
    def __init__(self, queue: _Optional[_Union[Queue, _Mapping]] = ..., error: _Optional[str] = ...) -> None: ...

class BatchQueueUpdateResponse(_message.Message):
    __slots__ = ("failed_queues",)
    FAILED_QUEUES_FIELD_NUMBER: _ClassVar[int]
    failed_queues: _containers.RepeatedCompositeFieldContainer[QueueUpdateResponse]
    def __init__(self, failed_queues: _Optional[_Iterable[_Union[QueueUpdateResponse, _Mapping]]] = ...) -> None: ...

class QueueCreateResponse(_message.Message):
    __slots__ = ("queue", "error")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    queue: Queue
    error: str
    def __init__(self, queue: _Optional[_Union[Queue, _Mapping]] = ..., error: _Optional[str] = ...) -> None: ...

class BatchQueueCreateResponse(_message.Message):
    __slots__ = ("failed_queues",)
    FAILED_QUEUES_FIELD_NUMBER: _ClassVar[int]
    failed_queues: _containers.RepeatedCompositeFieldContainer[QueueCreateResponse]
    def __init__(self, failed_queues: _Optional[_Iterable[_Union[QueueCreateResponse, _Mapping]]] = ...) -> None: ...

class EndMarker(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StreamingQueueMessage(_message.Message):
    __slots__ = ("queue", "end")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    queue: Queue
    end: EndMarker
    def __init__(self, queue: _Optional[_Union[Queue, _Mapping]] = ..., end: _Optional[_Union[EndMarker, _Mapping]] = ...) -> None: ...

class QueuePreemptRequest(_message.Message):
    __slots__ = ("name", "priorityClasses", "pools")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PRIORITYCLASSES_FIELD_NUMBER: _ClassVar[int]
    POOLS_FIELD_NUMBER: _ClassVar[int]
    name: str
    priorityClasses: _containers.RepeatedScalarFieldContainer[str]
    pools: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., priorityClasses: _Optional[_Iterable[str]] = ..., pools: _Optional[_Iterable[str]] = ...) -> None: ...

class QueueCancelRequest(_message.Message):
    __slots__ = ("name", "priorityClasses", "jobStates", "pools")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PRIORITYCLASSES_FIELD_NUMBER: _ClassVar[int]
    JOBSTATES_FIELD_NUMBER: _ClassVar[int]
    POOLS_FIELD_NUMBER: _ClassVar[int]
    name: str
    priorityClasses: _containers.RepeatedScalarFieldContainer[str]
    jobStates: _containers.RepeatedScalarFieldContainer[JobState]
    pools: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., priorityClasses: _Optional[_Iterable[str]] = ..., jobStates: _Optional[_Iterable[_Union[JobState, str]]] = ..., pools: _Optional[_Iterable[str]] = ...) -> None: ...
