"""What every console page shares: the signed-in session, the language, rendering a template
with the security headers, the CSRF check of a posted form, and redirects."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cache, wraps
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup, escape
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from units_api.auth.scopes import grants
from units_api.console import sessions
from units_api.console.api import Api
from units_api.console.i18n import LANGUAGE_COOKIE, Language, choose
from units_api.context import AppContext
from units_api.db import UNAVAILABLE
from units_api.errors import ApiError, Unauthorized

log = logging.getLogger(__name__)
HERE = Path(__file__).parent
PREFIX = "/console"
STATIC = f"{PREFIX}/static"
templates = Environment(
    loader=FileSystemLoader(HERE / "templates"),
    autoescape=select_autoescape(default=True),
    trim_blocks=True,
    lstrip_blocks=True,
    auto_reload=False,
)


@cache
def security_headers(tile_origin: str | None) -> dict[str, str]:
    """The headers of every console answer (built once per tile origin; never changed)."""
    # A unit's pictures are on hosts of its own (https only); map tiles on the tile server's.
    images = "'self' data:" + (f" {tile_origin}" if tile_origin else "") + " https:"
    policy = (
        "default-src 'none'; script-src 'self'; style-src 'self'; "
        f"img-src {images}; connect-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    )
    return {
        "Content-Security-Policy": policy,
        "X-Frame-Options": "DENY",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "same-origin",
        "Cache-Control": "no-store",
    }


def tile_origin(url: str | None) -> str | None:
    if not url:
        return None
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


@dataclass(slots=True)
class Page:
    """One request to a console page: who is signed in, in which language, and the API."""

    request: Request
    language: Language
    session: sessions.Session | None = None

    @property
    def context(self) -> AppContext:
        context: AppContext = self.request.app.state.context
        return context

    @property
    def api(self) -> Api:
        assert self.session is not None
        return Api(self.request, self.session.key_hash)

    def t(self, text: str) -> str:
        return self.language.t(text)

    def may(self, scope: str) -> bool:
        return self.session is not None and grants(self.session.principal.scopes, scope)

    def render(self, template: str, status: int = 200, **values: Any) -> Response:
        lang = self.language
        body = templates.get_template(template).render(
            page=self,
            lang=lang,
            t=lang.t,
            label=lang.field,
            choice=lang.choice,
            number=lang.number,
            time=lang.time,
            static=STATIC,
            csrf=self.session.csrf if self.session else "",
            path=self.request.url.path,
            here=_here(self.request),
            **values,
        )
        headers = security_headers(tile_origin(self.context.settings.console_tile_url))
        return Response(body, status, headers=headers, media_type="text/html; charset=utf-8")


def _here(request: Request) -> str:
    query = request.url.query
    return request.url.path + (f"?{query}" if query else "")


def language_of(request: Request) -> Language:
    return choose(request.cookies.get(LANGUAGE_COOKIE), request.headers.get("accept-language"))


def redirect(to: str, status: int = 303) -> Response:
    return RedirectResponse(to, status_code=status, headers=security_headers(None))


def safe_next(target: str | None) -> str:
    """Where to go after signing in or switching language: a console path, never elsewhere."""
    if (
        target
        and target.startswith(f"{PREFIX}/")
        and "\\" not in target
        and urlsplit(target).netloc == ""
    ):
        return target
    return f"{PREFIX}/units"


def to_sign_in(request: Request) -> Response:
    """To sign-in, and back after it: to this page, or for a form sent after the session
    ended, to the page the form was on (its data is not kept)."""
    back = _here(request) if request.method == "GET" else _referring_page(request)
    response = redirect(f"{PREFIX}/login?next={quote(back, safe='')}")
    response.delete_cookie(sessions.COOKIE, path=PREFIX)
    return response


def _referring_page(request: Request) -> str:
    referer = urlsplit(request.headers.get("referer", ""))
    same_site = referer.netloc == request.url.netloc
    page = referer.path + (f"?{referer.query}" if referer.query else "")
    return safe_next(page if same_site else None)


async def current_session(request: Request) -> sessions.Session | None:
    context: AppContext = request.app.state.context
    return await context.console.resume(request.cookies.get(sessions.COOKIE))


async def checked_form(page: Page) -> FormData | None:
    """The posted form when its CSRF token is the session's; None (then a 403) otherwise."""
    form = await page.request.form()
    assert page.session is not None
    given = form.get("csrf")
    if not sessions.same_token(page.session.csrf, given if isinstance(given, str) else None):
        return None
    return form


Handler = Callable[[Page], Awaitable[Response]]


def signed_in(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """A page for signed-in browsers: others go to sign-in and come back after. A posted form
    without the session's CSRF token is a 403 page."""

    @wraps(handler)
    async def page(request: Request) -> Response:
        session = await current_session(request)
        if session is None:
            return to_sign_in(request)
        current = Page(request, language_of(request), session)
        if request.method == "POST":
            form = await checked_form(current)
            if form is None:
                return current.render(
                    "message.html", 403, message=current.t("The form expired; try again.")
                )
        try:
            return await handler(current)
        except Unauthorized:
            return to_sign_in(request)
        except ApiError as error:
            return error_page(current, error.status)
        except UNAVAILABLE:
            raise  # the application's handler answers (a 503 page: `problem_page`)
        except Exception:
            log.exception("console page failed", extra={"path": request.url.path})
            return error_page(current, 500)

    return page


# An error page's words by status (any other: SOMETHING_WRONG).
ERROR_MESSAGES = {
    403: "You may not do this with this key.",
    404: "Not found.",
    405: "Not found.",
    409: "Not ready yet; try again in a moment.",
    410: "This file is no longer kept.",
    429: "Too many requests; wait a moment.",
    503: "The service is busy; try again shortly.",
}
SOMETHING_WRONG = "Something went wrong; try again."


def error_page(page: Page, status: int) -> Response:
    text = ERROR_MESSAGES.get(status, SOMETHING_WRONG)
    return page.render("message.html", status, message=page.t(text))


def text_of(form: FormData, name: str) -> str:
    value = form.get(name)
    return value.strip() if isinstance(value, str) else ""


def problem_page(request: Request, status: int) -> Response:
    """A console path answered by the application's error handlers (no route, a database out
    of reach): a page in the visitor's language, not a problem's JSON."""
    page = Page(request, language_of(request))
    return error_page(page, status)


def unit_name(unit: dict[str, Any], lang: Language) -> str:
    """A unit's name in the page's language: its Arabic name on an Arabic page, when it has
    one."""
    return str((lang.code == "ar" and unit.get("unitNameAr")) or unit.get("name") or "")


def status(value: str, t: Callable[[str], str]) -> Markup:
    """A state as a badge (a function, not a macro: a list page shows dozens, and a macro
    call costs many times more)."""
    return Markup(  # noqa: S704 - both values escaped
        f'<span class="status status-{escape(value)}">{escape(t(value))}</span>'
    )


templates.globals.update(unit_name=unit_name, status=status)
