"""The console's routes: sign-in and sign-out, the language switch, its static files, and the
pages of each part (units.py, files.py, admin.py)."""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from units_api.auth.secrets import hash_secret
from units_api.console import sessions
from units_api.console.admin import ROUTES as ADMIN_ROUTES
from units_api.console.channels import ROUTES as CHANNEL_ROUTES
from units_api.console.files import ROUTES as FILE_ROUTES
from units_api.console.i18n import LANGUAGE_COOKIE, LANGUAGES
from units_api.console.units import ROUTES as UNIT_ROUTES
from units_api.console.web import (
    HERE,
    PREFIX,
    STATIC,
    Page,
    current_session,
    language_of,
    redirect,
    safe_next,
    signed_in,
    text_of,
)
from units_api.context import AppContext
from units_api.errors import Unauthorized
from units_api.http.rates import parse_rate

log = logging.getLogger(__name__)


def _cookie_flags(request: Request) -> dict[str, object]:
    secure = request.url.scheme == "https"
    return {"httponly": True, "samesite": "strict", "secure": secure, "path": PREFIX}


def _sign_in_form(request: Request, message: str | None, status: int = 200) -> Response:
    page = Page(request, language_of(request))
    token = request.cookies.get(sessions.SIGNIN_COOKIE) or sessions.new_token()
    response = page.render(
        "login.html",
        status,
        message=page.t(message) if message else None,
        signin_csrf=sessions.csrf_token(token),
        next=safe_next(request.query_params.get("next")),
    )
    response.set_cookie(sessions.SIGNIN_COOKIE, token, **_cookie_flags(request))  # type: ignore[arg-type]
    return response


async def login(request: Request) -> Response:
    if request.method == "GET":
        if await current_session(request) is not None:
            return redirect(safe_next(request.query_params.get("next")))
        return _sign_in_form(request, None)
    context: AppContext = request.app.state.context
    form = await request.form()
    token = request.cookies.get(sessions.SIGNIN_COOKIE)
    given = text_of(form, "csrf")
    if not token or not sessions.same_token(sessions.csrf_token(token), given):
        return _sign_in_form(request, "The form expired; try again.", 403)
    address = request.client.host if request.client else "unknown"
    rate = parse_rate(context.settings.console_signin_rate)
    decision = await context.limiter.hit(f"console-sign-in:{address}", rate)
    if not decision.allowed:
        response = _sign_in_form(request, "Too many sign-in attempts; wait a minute.", 429)
        response.headers["Retry-After"] = str(decision.reset)
        return response
    key_hash = hash_secret(text_of(form, "key"))
    try:
        principal = await context.authenticator.resolve(key_hash)
    except Unauthorized:
        return _sign_in_form(request, "That key was not accepted.", 401)
    session = await context.console.start(
        principal, key_hash, context.settings.console_session_hours
    )
    log.info("console sign-in", extra={"key_id": str(session.principal.key_id)})
    response = redirect(safe_next(text_of(form, "next")))
    response.set_cookie(sessions.COOKIE, session.token, **_cookie_flags(request))  # type: ignore[arg-type]
    response.delete_cookie(sessions.SIGNIN_COOKIE, path=PREFIX)
    return response


async def logout(page: Page) -> Response:
    assert page.session is not None
    await page.context.console.end(page.session.id)
    response = redirect(f"{PREFIX}/login")
    response.delete_cookie(sessions.COOKIE, path=PREFIX)
    return response


async def language(request: Request) -> Response:
    chosen = request.path_params["code"]
    response = redirect(safe_next(request.query_params.get("next")))
    if chosen in LANGUAGES:
        response.set_cookie(
            LANGUAGE_COOKIE, chosen, max_age=365 * 24 * 3600, samesite="strict", path=PREFIX
        )
    return response


async def home(request: Request) -> Response:
    return redirect(f"{PREFIX}/units")


routes: list[BaseRoute] = [
    Route(f"{PREFIX}", home, methods=["GET"]),
    Route(f"{PREFIX}/", home, methods=["GET"]),
    Route(f"{PREFIX}/login", login, methods=["GET", "POST"]),
    Route(f"{PREFIX}/logout", signed_in(logout), methods=["POST"]),
    Route(f"{PREFIX}/language/{{code}}", language, methods=["GET"]),
    *UNIT_ROUTES,
    *FILE_ROUTES,
    *ADMIN_ROUTES,
    *CHANNEL_ROUTES,
    Mount(STATIC, StaticFiles(directory=HERE / "static"), name="console-static"),
]
