"""The dependency every /api/v2 route uses: authenticate, rate-limit, check the scope."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from units_api.auth.service import Principal
from units_api.context import AppContext, get_context
from units_api.errors import RateLimited
from units_api.http.middleware import add_response_header
from units_api.http.ratelimit import parse_rate

bearer_scheme = HTTPBearer(
    auto_error=False,
    scheme_name="ApiKey",
    description="An API key: `Authorization: Bearer uak_...`.",
)


async def _rate_limit(request: Request, context: AppContext, principal: Principal) -> None:
    rate = principal.rate or parse_rate(context.settings.rate_limit)
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


def require(scope: str) -> Callable[..., Awaitable[Principal]]:
    async def dependency(
        request: Request,
        _credentials: HTTPAuthorizationCredentials | None = Depends(bearer_scheme),  # noqa: B008
    ) -> Principal:
        context = get_context(request)
        principal = await context.authenticator.authenticate(request.headers.get("authorization"))
        await _rate_limit(request, context, principal)
        principal.require(scope)
        return principal

    return dependency
