"""API errors rendered as ``Status`` objects shaped like the real kube-apiserver's."""

from __future__ import annotations

from typing import Any

JSON = dict[str, Any]

REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    504: "Timeout",
}


class ApiError(Exception):
    """An error answer of the API; ``status()`` is the body the client receives."""

    def __init__(self, code: int, message: str, reason: str | None = None, details: JSON | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or REASONS.get(code, "Unknown")
        self.details = details

    def status(self) -> JSON:
        body: JSON = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _qualified(plural: str, group: str) -> str:
    return f"{plural}.{group}" if group else plural


def _details(plural: str, group: str, name: str) -> JSON:
    details: JSON = {"name": name, "kind": plural}
    if group:
        details["group"] = group
    return details


def not_found(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        404, f'{_qualified(plural, group)} "{name}" not found', details=_details(plural, group, name)
    )


def already_exists(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        f'{_qualified(plural, group)} "{name}" already exists',
        reason="AlreadyExists",
        details=_details(plural, group, name),
    )


def conflict(plural: str, group: str, name: str, why: str | None = None) -> ApiError:
    why = why or "the object has been modified; please apply your changes to the latest version and try again"
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {_qualified(plural, group)} "{name}": {why}',
        details=_details(plural, group, name),
    )


def invalid(kind: str, group: str, name: str, causes: list[JSON]) -> ApiError:
    """422 with one cause per field error, each ``{reason, message, field}``."""
    rendered = [f"{c['field']}: {c['message']}" if c.get("field") else c["message"] for c in causes]
    joined = rendered[0] if len(rendered) == 1 else "[" + ", ".join(rendered) + "]"
    qualified = f"{kind}.{group}" if group else kind
    details: JSON = {"name": name, "kind": kind, "causes": causes}
    if group:
        details["group"] = group
    return ApiError(422, f'{qualified} "{name}" is invalid: {joined}', details=details)


def unprocessable(server_message: str) -> ApiError:
    """The generic 422 the apiserver answers when a JSON patch cannot be applied (e.g. a failed ``test``)."""
    return ApiError(
        422,
        "the server rejected our request due to an error in our request",
        details={"causes": [{"reason": "UnexpectedServerResponse", "message": server_message}]},
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, message)


def no_such_path() -> ApiError:
    return ApiError(
        404,
        "the server could not find the requested resource",
        details={"causes": [{"reason": "UnexpectedServerResponse", "message": "404 page not found"}]},
    )


def gone(requested: int, oldest: int) -> ApiError:
    return ApiError(410, f"too old resource version: {requested} ({oldest})", reason="Expired")
