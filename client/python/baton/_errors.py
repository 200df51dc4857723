"""The exception hierarchy of baton.client (standard library only; see baton.client)."""

from typing import Optional

__all__ = [
    "AlreadyExists",
    "AuthError",
    "BatonError",
    "DeadlineExceeded",
    "FailedPrecondition",
    "InvalidArgument",
    "NotFound",
    "PermissionDenied",
    "ResourceExhausted",
    "Unauthenticated",
    "Unavailable",
    "Unimplemented",
]


class BatonError(Exception):
    """Every error baton.client raises: a failed call, a bad spec, config or token file.

    Attributes:
      code: the gRPC status code's name, e.g. "NOT_FOUND", "INVALID_ARGUMENT",
        "UNAVAILABLE" (a string, so the class works without grpc; the names are those of
        grpc.StatusCode). Errors found locally (a job file, the config) use the code the
        CLI uses for them.
      message: one line for a human, without gRPC's debug information; str(error).
    """

    default_code = "UNKNOWN"

    def __init__(self, message: str, code: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code


class InvalidArgument(BatonError, ValueError):
    """A spec or argument is wrong: fix it, do not retry.

    `field` is the field path the message starts with ("workers.min" for "workers.min:
    must be >= 1", or "job.yaml:4:8: workers.min: ..." from a job file), "" if none.
    """

    default_code = "INVALID_ARGUMENT"

    def __init__(self, message: str, code: Optional[str] = None, field: str = "") -> None:
        super().__init__(message, code)
        self.field = field


class NotFound(BatonError, LookupError):
    """No such job (or file)."""

    default_code = "NOT_FOUND"


class AlreadyExists(BatonError):
    """A submit reused a request_id with a different spec."""

    default_code = "ALREADY_EXISTS"


class FailedPrecondition(BatonError):
    """The request cannot be done in the current state (cancelling a finished job; no CA
    to check the coordinator with)."""

    default_code = "FAILED_PRECONDITION"


class AuthError(BatonError):
    """Base of Unauthenticated and PermissionDenied: catch it for "not allowed"."""


class Unauthenticated(AuthError):
    """The coordinator did not accept the bearer token (missing, unknown or revoked)."""

    default_code = "UNAUTHENTICATED"


class PermissionDenied(AuthError):
    """The token is valid but its role may not do this (e.g. cancel another user's job)."""

    default_code = "PERMISSION_DENIED"


class Unavailable(BatonError, ConnectionError):
    """The coordinator cannot be reached (or stopped serving): retry later."""

    default_code = "UNAVAILABLE"


class DeadlineExceeded(BatonError, TimeoutError):
    """A call (or Client.wait) ran past its timeout."""

    default_code = "DEADLINE_EXCEEDED"


class ResourceExhausted(BatonError):
    """A limit of the coordinator was reached (e.g. profiles in flight)."""

    default_code = "RESOURCE_EXHAUSTED"


class Unimplemented(BatonError, NotImplementedError):
    """The coordinator is older than this call (e.g. GetVersion before release 0.15)."""

    default_code = "UNIMPLEMENTED"


_BY_CODE = {
    cls.default_code: cls
    for cls in (InvalidArgument, NotFound, AlreadyExists, FailedPrecondition, Unauthenticated,
                PermissionDenied, Unavailable, DeadlineExceeded, ResourceExhausted,
                Unimplemented)
}


def _field_of(message: str) -> str:
    """The field path an INVALID_ARGUMENT message names: its first "PATH: " segment that
    looks like a field path (letters, digits, '_', '.', '[', ']'), so locations such as
    "job.yaml:4:8: " are skipped. "" if there is none."""
    segments = message.split(": ")[:-1]
    for head in segments:
        if head and all(c.isalnum() or c in "_.[]" for c in head) and not head.isdigit():
            return head
    return ""


def error_for(code: str, message: str) -> BatonError:
    """The BatonError subclass for a status code name, with `message`."""
    cls = _BY_CODE.get(code, BatonError)
    if cls is InvalidArgument:
        return InvalidArgument(message, code, field=_field_of(message))
    return cls(message, code)
