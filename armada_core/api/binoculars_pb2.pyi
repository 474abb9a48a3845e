from armada_core.api.k8s import core_v1_pb2 as _core_v1_pb2
from google.protobuf import empty_pb2 as _empty_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LogRequest(_message.Message):
    __slots__ = ("job_id", "pod_number", "pod_namespace", "since_time", "log_options")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    POD_NUMBER_FIELD_NUMBER: _ClassVar[int]
    POD_NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    SINCE_TIME_FIELD_NUMBER: _ClassVar[int]
    LOG_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    pod_number: int
    pod_namespace: str
    since_time: str
    log_options: _core_v1_pb2.PodLogOptions
    def __init__(self, job_id: _Optional[str] = ..., pod_number: _Optional[int] = ..., pod_namespace: _Optional[str] = ..., since_time: _Optional[str] = ..., log_options: _Optional[_Union[_core_v1_pb2.PodLogOptions, _Mapping]] = ...) -> None: ...

class LogResponse(_message.Message):
    __slots__ = ("log",)
    LOG_FIELD_NUMBER: _ClassVar[int]
    log: _containers.RepeatedCompositeFieldContainer[LogLine]
    def __init__(self, log: _Optional[_Iterable[_Union[LogLine, _Mapping]]] = ...) -> None: ...

class LogLine(_message.Message):
    __slots__ = ("timestamp", "line")
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    LINE_FIELD_NUMBER: _ClassVar[int]
    timestamp: str
    line: str
    def __init__(self, timestamp: _Optional[str] = ..., line: _Optional[str] = ...) -> None: ...

class CordonRequest(_message.Message):
    __slots__ = ("node_name", "uncordon_node_name")
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    UNCORDON_NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    node_name: str
    uncordon_node_name: str
    def __init__(self, node_name: _Optional[str] = ..., uncordon_node_name: _Optional[str] = ...) -> None: ...
