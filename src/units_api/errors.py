"""The exception hierarchy. Every error a client causes leaves the service as one
problem+json shape: each class carries a stable `code`; the problem `type` is
`/problems/<code>`. A bad setting is a `SettingError`, which stops start-up.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

PROBLEM_CONTENT_TYPE = "application/problem+json"


class SettingError(Exception):
    """A setting that stops start-up: the message is one line that names it."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


class ApiError(Exception):
    status: int = 500
    code: str = "internal-error"
    title: str = "Internal server error"

    def __init__(
        self,
        detail: str | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(detail or self.title)
        self.detail = detail or self.title
        self.headers = dict(headers or {})
        self.extra = dict(extra or {})

    def problem(self, instance: str, request_id: str | None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "type": f"/problems/{self.code}",
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
            "instance": instance,
            "requestId": request_id,
        }
        body.update(self.extra)
        return body


class BadRequest(ApiError):
    status, code, title = 400, "bad-request", "Bad request"


class MalformedJson(BadRequest):
    code, title = "malformed-json", "Request body is not valid JSON"


class InvalidParameter(BadRequest):
    code, title = "invalid-parameter", "Invalid query parameter"

    def __init__(self, parameter: str, message: str) -> None:
        super().__init__(f"{parameter}: {message}", extra={"parameter": parameter})


class UnknownParameter(BadRequest):
    """Query parameters the operation does not declare (a misspelt `filter=` for `p=`, say):
    each named in `errors`, the first in `parameter`."""

    code, title = "unknown-parameter", "Unknown query parameter"

    def __init__(self, names: Sequence[str], declared: Sequence[str]) -> None:
        takes = ", ".join(declared) if declared else "none"
        message = f"is not a query parameter of this operation (it takes {takes})"
        shown = ", ".join(f"'{name}'" for name in names)
        verb = "is not a query parameter" if len(names) == 1 else "are not query parameters"
        super().__init__(
            f"{shown} {verb} of this operation, which takes {takes}.",
            extra={
                "parameter": names[0],
                "errors": [{"field": name, "message": message} for name in names],
            },
        )


class InvalidHeader(BadRequest):
    code, title = "invalid-header", "Invalid header"

    def __init__(self, header: str, message: str) -> None:
        super().__init__(f"{header}: {message}", extra={"header": header})


class Unauthorized(ApiError):
    status, code, title = 401, "unauthorized", "Authentication required"

    def __init__(self, detail: str, challenge: str = 'Bearer realm="units-api"') -> None:
        super().__init__(detail, headers={"WWW-Authenticate": challenge})


class Forbidden(ApiError):
    status, code, title = 403, "forbidden", "Forbidden"


class NotFound(ApiError):
    status, code, title = 404, "not-found", "Not found"


class MethodNotAllowed(ApiError):
    status, code, title = 405, "method-not-allowed", "Method not allowed"


class RequestTimeout(ApiError):
    status, code, title = 408, "request-timeout", "The request did not arrive in time"


class Conflict(ApiError):
    status, code, title = 409, "conflict", "Conflict"


class IdempotencyInFlight(Conflict):
    code, title = "idempotency-in-flight", "A request with this Idempotency-Key is in progress"


class Gone(ApiError):
    status, code, title = 410, "gone", "Gone"


class CursorExpired(Gone):
    code, title = "cursor-expired", "The cursor points before the oldest kept event"


class PreconditionFailed(ApiError):
    status, code, title = 412, "precondition-failed", "Precondition failed"


class PayloadTooLarge(ApiError):
    status, code, title = 413, "payload-too-large", "Payload too large"


class UriTooLong(ApiError):
    status, code, title = 414, "uri-too-long", "URI too long"


class UnsupportedMediaType(ApiError):
    status, code, title = 415, "unsupported-media-type", "Unsupported media type"


class ValidationFailed(ApiError):
    status, code, title = 422, "validation-error", "The request did not pass validation"

    def __init__(self, errors: Iterable[tuple[str, str]], detail: str | None = None) -> None:
        listed = [{"field": field, "message": message} for field, message in errors]
        super().__init__(detail or f"{len(listed)} validation error(s)", extra={"errors": listed})
        self.errors = listed


class BulkFailed(ApiError):
    status, code, title = 422, "bulk-failed", "Some items could not be applied; nothing changed"

    def __init__(self, failures: list[dict[str, Any]], total: int | None = None) -> None:
        count = total if total is not None else len(failures)
        super().__init__(
            f"{count} item(s) failed; nothing was changed.", extra={"errors": failures}
        )


class IdempotencyMismatch(ValidationFailed):
    code, title = "idempotency-key-reused", "Idempotency-Key reused with a different body"

    def __init__(self) -> None:
        super().__init__(
            [("Idempotency-Key", "was already used with a different request body")],
            detail="This Idempotency-Key was already used with a different request body.",
        )


class RateLimited(ApiError):
    status, code, title = 429, "rate-limited", "Too many requests"


class ServiceUnavailable(ApiError):
    status, code, title = 503, "unavailable", "Service unavailable"


class DatabaseUnavailable(ServiceUnavailable):
    """The database did not answer within UNITS_API_DB_UNAVAILABLE_SECONDS, or refused or
    broke the connection (a restart, a failover). The detail names no host or driver."""

    RETRY_AFTER = "1"

    def __init__(self) -> None:
        super().__init__(
            "The database is busy or unreachable; retry shortly.",
            headers={"Retry-After": self.RETRY_AFTER},
        )


class FileOnAnotherMachine(ServiceUnavailable):
    """A file kept on one machine's disk, asked of another (several machines sharing a
    database but not a file store)."""

    code, title = "file-on-another-machine", "The file is kept on another machine"

    def __init__(self, what: str, machine: str, this_machine: str) -> None:
        super().__init__(
            kept_elsewhere(what, machine, this_machine),
            extra={"machine": machine, "thisMachine": this_machine},
        )


def kept_elsewhere(what: str, machine: str, this_machine: str) -> str:
    """Why `what`, kept on the disk of `machine`, is not found on `this_machine`: the text of
    `FileOnAnotherMachine`, and of an import job run by another machine than the one that
    received its upload."""
    where = (
        f"in another files directory of machine '{machine}'"
        if machine == this_machine
        else f"on machine '{machine}', and this is '{this_machine}'"
    )
    return (
        f"{what} is kept {where}: a machine reaches only the files on its own disk. "
        "Machines that share a database need a file store they share too: set "
        "UNITS_API_STORAGE_URL (s3://bucket/prefix) on every one."
    )


class StorageUnavailable(ApiError):
    """Where files (or SQLite's database) are kept cannot take what is written (failing,
    read-only, out of reach): 507, worth trying again once the store works again."""

    status, code, title = 507, "storage-unavailable", "Storage cannot be written"


class StorageFull(StorageUnavailable):
    code, title = "storage-full", "Storage is full"


# Texts about errors (a job's `error`, a row error's `message`, a delivery's `lastError`, and
# the same in job events, webhook bodies and logs) are at most this many characters.
MAX_ERROR_TEXT = 1000
_ELLIPSIS = "…"


def bound_error(text: str | None, limit: int = MAX_ERROR_TEXT) -> str | None:
    """`text` cut to at most `limit` characters (at a character boundary, ending with an
    ellipsis when cut); None stays None."""
    if text is None or len(text) <= limit:
        return text
    return text[: limit - len(_ELLIPSIS)] + _ELLIPSIS
