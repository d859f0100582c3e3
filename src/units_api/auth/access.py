"""Access to the API: authenticate the key, count it against its rate limit, check the scope."""

from __future__ import annotations

import uuid

from fastapi import Request

from units_api.auth.scopes import ADMIN
from units_api.auth.service import Principal
from units_api.context import AppContext, app_context
from units_api.errors import RateLimited
from units_api.http.middleware import add_response_header, note_key
from units_api.jobs.router import Authorize, Viewer

# The scope entry of a console call: the hash of its session's key.
CONSOLE_KEY = "units_api.console_key"
SECURITY_SCHEME = {
    "ApiKey": {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key: `Authorization: Bearer uak_...`.",
    }
}


async def _rate_limit(request: Request, context: AppContext, principal: Principal) -> None:
    rate = principal.rate or context.settings.default_rate
    decision = await context.limiter.hit(str(principal.key_id), rate)
    headers = {
        "RateLimit-Policy": rate.policy,
        "RateLimit": f'"default";r={decision.remaining};t={decision.reset}',
    }
    if not decision.allowed:
        headers["Retry-After"] = str(decision.reset)
        raise RateLimited(
            f"Rate limit of {rate.quota} requests per {rate.window}s exceeded.", headers=headers
        )
    for name, value in headers.items():
        add_response_header(request.scope, name, value)


async def authenticate(request: Request) -> Principal:
    """Authenticate the bearer key and count it against its rate limit."""
    context: AppContext = request.app.state.context
    # A console page's call to the API acts as its session's key (console/api.py); only the
    # process itself can put that in a request's scope.
    console_key = request.scope.get(CONSOLE_KEY)
    if console_key is not None:
        principal = await context.authenticator.resolve(console_key)
    else:
        principal = await context.authenticator.authenticate(request.headers.get("authorization"))
    note_key(request.scope, str(principal.key_id))
    await _rate_limit(request, context, principal)
    return principal


async def authorize(request: Request, scope: str) -> Principal:
    """Authenticate the bearer key, count it against its rate limit, check the scope."""
    principal = await authenticate(request)
    principal.require(scope)
    return principal


def owner_filter(principal: Principal) -> uuid.UUID | None:
    """Whose jobs a key sees: an admin key every job (None), any other its own."""
    return None if ADMIN in principal.scopes else principal.key_id


def job_viewer(scope: str) -> Authorize:
    """The check of a request to see a kind's jobs: a key with `scope`, which sees its own."""

    async def viewer(request: Request) -> Viewer:
        principal = await authorize(request, scope)
        return Viewer(app_context(request).db, owner_filter(principal))

    return viewer
