"""Errors the services turn into gRPC status codes."""

from __future__ import annotations

import grpc


class ApiError(Exception):
    """An error a client should see, with the gRPC code to answer with (and trailing metadata
    that says more to clients that read it)."""

    code = grpc.StatusCode.INTERNAL
    trailing_metadata: tuple[tuple[str, str | bytes], ...] = ()


class InvalidArgument(ApiError):
    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(ApiError):
    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(ApiError):
    code = grpc.StatusCode.ALREADY_EXISTS


class FailedPrecondition(ApiError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class Unauthenticated(ApiError):
    code = grpc.StatusCode.UNAUTHENTICATED


class PermissionDenied(ApiError):
    code = grpc.StatusCode.PERMISSION_DENIED


class Unavailable(ApiError):
    code = grpc.StatusCode.UNAVAILABLE


class ResourceExhausted(ApiError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED
