"""The ReDoc page, served with nothing asked of another host. fastapi-offline ships ReDoc's
bundle, but the bundle shows Redocly's logo from a CDN (which fails offline): it is served
from here with that image's address emptied, and ReDoc leaves the logo out."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html
from starlette.responses import HTMLResponse, Response

BUNDLE = Path(fastapi_offline.__file__).parent / "static" / "redoc.standalone.js"
CDN_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"
# An image that fails at once, with no request: ReDoc then shows no logo.
NO_IMAGE = b"data:,"


@cache
def _bundle() -> bytes:
    return BUNDLE.read_bytes().replace(CDN_LOGO, NO_IMAGE)


def add_redoc(app: FastAPI, path: str, assets: str) -> None:
    """ReDoc's page at `path` and its bundle beside it; its icon is fastapi-offline's, served
    under `assets`."""
    bundle = f"{path}/redoc.standalone.js"

    @app.get(path, include_in_schema=False)
    async def redoc_page(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_redoc_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{bundle}",
            with_google_fonts=False,
            redoc_favicon_url=f"{root}{assets}/favicon.png",
        )

    @app.get(bundle, include_in_schema=False)
    async def redoc_bundle() -> Response:
        return Response(_bundle(), media_type="text/javascript; charset=utf-8")
