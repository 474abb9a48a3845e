"""Every gRPC failure as an exception a caller can catch by meaning, not by status code.

`ArmadaError` carries the status code and the server's message; each code has its own
subclass so that integrations can write `except NotFound:` instead of comparing codes.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc


class ArmadaError(Exception):
    """A call to an Armada server failed; `code`, `details` and `trailing_metadata` are the
    server's answer."""

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(
        self,
        details: str,
        *,
        code: grpc.StatusCode | None = None,
        method: str = "",
        trailing_metadata: Sequence[tuple[str, str | bytes]] = (),
    ) -> None:
        if code is not None:
            self.code = code
        self.details = details
        self.method = method
        self.trailing_metadata = tuple(trailing_metadata)
        where = f"{method}: " if method else ""
        super().__init__(
            f"{where}{self.code.name}: {details}" if details else f"{where}{self.code.name}"
        )


class Cancelled(ArmadaError):
    code = grpc.StatusCode.CANCELLED


class Unknown(ArmadaError):
    code = grpc.StatusCode.UNKNOWN


class InvalidArgument(ArmadaError):
    code = grpc.StatusCode.INVALID_ARGUMENT


class DeadlineExceeded(ArmadaError):
    code = grpc.StatusCode.DEADLINE_EXCEEDED


class NotFound(ArmadaError):
    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(ArmadaError):
    code = grpc.StatusCode.ALREADY_EXISTS


class PermissionDenied(ArmadaError):
    code = grpc.StatusCode.PERMISSION_DENIED


class ResourceExhausted(ArmadaError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class FailedPrecondition(ArmadaError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class Aborted(ArmadaError):
    code = grpc.StatusCode.ABORTED


class OutOfRange(ArmadaError):
    code = grpc.StatusCode.OUT_OF_RANGE


class Unimplemented(ArmadaError):
    code = grpc.StatusCode.UNIMPLEMENTED


class Internal(ArmadaError):
    code = grpc.StatusCode.INTERNAL


class Unavailable(ArmadaError):
    code = grpc.StatusCode.UNAVAILABLE


class DataLoss(ArmadaError):
    code = grpc.StatusCode.DATA_LOSS


class Unauthenticated(ArmadaError):
    code = grpc.StatusCode.UNAUTHENTICATED


class WaitTimeout(DeadlineExceeded, TimeoutError):
    """`wait_for_jobs` gave up before every job ended (a client-side deadline)."""


class SubmitRejected(ArmadaError):
    """The server answered a submission with a per-item error (older upstream servers)."""

    code = grpc.StatusCode.INVALID_ARGUMENT


_BY_CODE: dict[grpc.StatusCode, type[ArmadaError]] = {
    cls.code: cls
    for cls in (
        Cancelled,
        Unknown,
        InvalidArgument,
        DeadlineExceeded,
        NotFound,
        AlreadyExists,
        PermissionDenied,
        ResourceExhausted,
        FailedPrecondition,
        Aborted,
        OutOfRange,
        Unimplemented,
        Internal,
        Unavailable,
        DataLoss,
        Unauthenticated,
    )
}

#: Codes after which reconnecting a stream is worth trying: the server or network hiccuped.
TRANSIENT_CODES = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.DEADLINE_EXCEEDED,
    }
)


def error_for(
    code: grpc.StatusCode,
    details: str,
    method: str = "",
    trailing_metadata: Sequence[tuple[str, str | bytes]] = (),
) -> ArmadaError:
    """The exception for a status code (ArmadaError itself for codes without a subclass)."""
    cls = _BY_CODE.get(code, ArmadaError)
    return cls(details, code=code, method=method, trailing_metadata=trailing_metadata)


def from_rpc_error(error: grpc.RpcError, method: str = "") -> ArmadaError:
    """Translate a grpc.RpcError (sync or asyncio) into the matching ArmadaError."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    details = error.details() if hasattr(error, "details") else str(error)
    # Pairs (asyncio) or (key, value) named tuples (blocking), or none at all.
    trailing = getattr(error, "trailing_metadata", None)
    metadata = [(str(m[0]), m[1]) for m in (trailing() if trailing else None) or ()]
    return error_for(code or grpc.StatusCode.UNKNOWN, details or "", method, metadata)
