from armada_core.api.k8s import core_v1_pb2 as _core_v1_pb2
from armada_core.api.k8s import meta_v1_pb2 as _meta_v1_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class HTTPIngressPath(_message.Message):
    __slots__ = ("path", "pathType", "backend")
    PATH_FIELD_NUMBER: _ClassVar[int]
    PATHTYPE_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    path: str
    pathType: str
    backend: IngressBackend
    def __init__(self, path: _Optional[str] = ..., pathType: _Optional[str] = ..., backend: _Optional[_Union[IngressBackend, _Mapping]] = ...) -> None: ...

class HTTPIngressRuleValue(_message.Message):
    __slots__ = ("paths",)
    PATHS_FIELD_NUMBER: _ClassVar[int]
    paths: _containers.RepeatedCompositeFieldContainer[HTTPIngressPath]
    def __init__(self, paths: _Optional[_Iterable[_Union[HTTPIngressPath, _Mapping]]] = ...) -> None: ...

class Ingress(_message.Message):
    __slots__ = ("metadata", "spec", "status")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    metadata: _meta_v1_pb2.ObjectMeta
    spec: IngressSpec
    status: IngressStatus
    def __init__(self, metadata: _Optional[_Union[_meta_v1_pb2.ObjectMeta, _Mapping]] = ..., spec: _Optional[_Union[IngressSpec, _Mapping]] = ..., status: _Optional[_Union[IngressStatus, _Mapping]] = ...) -> None: ...

class IngressBackend(_message.Message):
    __slots__ = ("service", "resource")
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    service: IngressServiceBackend
    resource: _core_v1_pb2.TypedLocalObjectReference
    def __init__(self, service: _Optional[_Union[IngressServiceBackend, _Mapping]] = ..., resource: _Optional[_Union[_core_v1_pb2.TypedLocalObjectReference, _Mapping]] = ...) -> None: ...

class IngressLoadBalancerIngress(_message.Message):
    __slots__ = ("ip", "hostname", "ports")
    IP_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    PORTS_FIELD_NUMBER: _ClassVar[int]
    ip: str
    hostname: str
    ports: _containers.RepeatedCompositeFieldContainer[IngressPortStatus]
    def __init__(self, ip: _Optional[str] = ..., hostname: _Optional[str] = ..., ports: _Optional[_Iterable[_Union[IngressPortStatus, _Mapping]]] = ...) -> None: ...

class IngressLoadBalancerStatus(_message.Message):
    __slots__ = ("ingress",)
    INGRESS_FIELD_NUMBER: _ClassVar[int]
    ingress: _containers.RepeatedCompositeFieldContainer[IngressLoadBalancerIngress]
    def __init__(self, ingress: _Optional[_Iterable[_Union[IngressLoadBalancerIngress, _Mapping]]] = ...) -> None: ...

class IngressPortStatus(_message.Message):
    __slots__ = ("port", "protocol", "error")
    PORT_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    port: int
    protocol: str
    error: str
    def __init__(self, port: _Optional[int] = ..., protocol: _Optional[str] = ..., error: _Optional[str] = ...) -> None: ...

class IngressRule(_message.Message):
    __slots__ = ("host", "ingressRuleValue")
    HOST_FIELD_NUMBER: _ClassVar[int]
    INGRESSRULEVALUE_FIELD_NUMBER: _ClassVar[int]
    host: str
    ingressRuleValue: IngressRuleValue
    def __init__(self, host: _Optional[str] = ..., ingressRuleValue: _Optional[_Union[IngressRuleValue, _Mapping]] = ...) -> None: ...

class IngressRuleValue(_message.Message):
    __slots__ = ("http",)
    HTTP_FIELD_NUMBER: _ClassVar[int]
    http: HTTPIngressRuleValue
    def __init__(self, http: _Optional[_Union[HTTPIngressRuleValue, _Mapping]] = ...) -> None: ...

class IngressServiceBackend(_message.Message):
    __slots__ = ("name", "port")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    name: str
    port: ServiceBackendPort
    def __init__(self, name: _Optional[str] = ..., port: _Optional[_Union[ServiceBackendPort, _Mapping]] = ...) -> None: ...

class IngressSpec(_message.Message):
    __slots__ = ("ingressClassName", "defaultBackend", "tls", "rules")
    INGRESSCLASSNAME_FIELD_NUMBER: _ClassVar[int]
    DEFAULTBACKEND_FIELD_NUMBER: _ClassVar[int]
    TLS_FIELD_NUMBER: _ClassVar[int]
    RULES_FIELD_NUMBER: _ClassVar[int]
    ingressClassName: str
    defaultBackend: IngressBackend
    tls: _containers.RepeatedCompositeFieldContainer[IngressTLS]
    rules: _containers.RepeatedCompositeFieldContainer[IngressRule]
    def __init__(self, ingressClassName: _Optional[str] = ..., defaultBackend: _Optional[_Union[IngressBackend, _Mapping]] = ..., tls: _Optional[_Iterable[_Union[IngressTLS, _Mapping]]] = ..., rules: _Optional[_Iterable[_Union[IngressRule, _Mapping]]] = ...) -> None: ...

class IngressStatus(_message.Message):
    __slots__ = ("loadBalancer",)
    LOADBALANCER_FIELD_NUMBER: _ClassVar[int]
    loadBalancer: IngressLoadBalancerStatus
    def __init__(self, loadBalancer: _Optional[_Union[IngressLoadBalancerStatus, _Mapping]] = ...) -> None: ...

class IngressTLS(_message.Message):
    __slots__ = ("hosts", "secretName")
    HOSTS_FIELD_NUMBER: _ClassVar[int]
    SECRETNAME_FIELD_NUMBER: _ClassVar[int]
    hosts: _containers.RepeatedScalarFieldContainer[str]
    secretName: str
    def __init__(self, hosts: _Optional[_Iterable[str]] = ..., secretName: _Optional[str] = ...) -> None: ...

class ServiceBackendPort(_message.Message):
    __slots__ = ("name", "number")
    NAME_FIELD_NUMBER: _ClassVar[int]
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    name: str
    number: int
    def __init__(self, name: _Optional[str] = ..., number: _Optional[int] = ...) -> None: ...
