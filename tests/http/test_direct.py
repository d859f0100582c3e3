"""Routes served directly (http/direct.py): the same endpoints and error handlers as the
framework's routing, and every other request left to the app."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from fastapi import APIRouter, FastAPI, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.conftest import Api
from tests.http.test_errors import assert_problem
from units_api.errors import ApiError, NotFound
from units_api.http.direct import DirectRoutes, Prefixed
from units_api.http.middleware import RequestContextMiddleware
from units_api.http.paths import ID
from units_api.units.router import DIRECT_OPERATIONS


def _things() -> tuple[APIRouter, list[str]]:
    router = APIRouter(prefix="/things")
    calls: list[str] = []

    @router.get(f"/{ID}", operation_id="getThing")
    async def get_thing(id: uuid.UUID, request: Request) -> Response:
        calls.append(f"get {id}")
        if id.int == 0:
            raise NotFound(f"No thing {id}.")
        if id.int == 1:
            raise RuntimeError("unhandled")
        return JSONResponse({"id": str(id), "via": request.url.path})

    @router.post(f"/{ID}", operation_id="touchThing")
    async def touch_thing(id: uuid.UUID, request: Request) -> Response:
        calls.append(f"touch {id}")
        return Response(status_code=204)

    return router, calls


async def _problem(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return JSONResponse({"status": exc.status}, status_code=exc.status)


class _Recorder:
    """Records the requests that reach it: those the direct routes passed on."""

    def __init__(self, app: Any, seen: list[str]) -> None:
        self.app = app
        self.seen = seen

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.seen.append(f"{scope['method']} {scope['path']}")
        await self.app(scope, receive, send)


def _app(
    operations: tuple[str, ...], passed_on: list[str] | None = None
) -> tuple[FastAPI, list[str]]:
    router, calls = _things()
    app = FastAPI()
    app.include_router(router)
    app.add_exception_handler(ApiError, _problem)
    app.add_middleware(_Recorder, seen=[] if passed_on is None else passed_on)
    app.add_middleware(
        DirectRoutes, routes=router.routes, operations=operations, handlers=app.exception_handlers
    )
    app.add_middleware(RequestContextMiddleware, log_requests=False)
    return app, calls


async def _client(app: FastAPI) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://test")


async def test_a_direct_route_answers_as_the_framework_would() -> None:
    direct, direct_calls = _app(("getThing",))
    framework, framework_calls = _app(())
    thing = uuid.uuid4()
    answers = []
    for app in (direct, framework):
        async with await _client(app) as client:
            ok = await client.get(f"/things/{thing}")
            upper = await client.get(f"/things/{str(thing).upper()}/")
            missing = await client.get(f"/things/{uuid.UUID(int=0)}")
            boom = await client.get(f"/things/{uuid.UUID(int=1)}")
            answers.append(
                [(r.status_code, r.content, r.headers.get("content-type")) for r in (ok, upper)]
                + [(missing.status_code, missing.json()), boom.status_code]
            )
    assert answers[0] == answers[1]
    assert answers[0][0][0] == 200 and answers[0][2] == (404, {"status": 404})
    assert answers[0][3] == 500
    assert direct_calls == framework_calls  # every request reached the same endpoint


async def test_other_requests_go_on_to_the_app() -> None:
    served: list[str] = []
    app, calls = _app(("getThing",), served)
    async with await _client(app) as client:
        thing = uuid.uuid4()
        assert (await client.get(f"/things/{thing}")).status_code == 200
        assert (await client.post(f"/things/{thing}")).status_code == 204  # not direct
        assert (await client.get("/things/not-an-id")).status_code == 404
        assert (await client.get(f"/things/{thing.hex}")).status_code == 404  # not canonical
    assert calls == [f"get {thing}", f"touch {thing}"]
    assert served == [f"POST /things/{thing}", "GET /things/not-an-id", f"GET /things/{thing.hex}"]


def test_only_endpoints_of_path_and_request_are_served_directly() -> None:
    router = APIRouter()

    @router.get(f"/things/{ID}", operation_id="getThing")
    async def get_thing(id: uuid.UUID, request: Request, limit: int = 10) -> Response:
        return Response()

    with pytest.raises(TypeError, match="cannot be served directly"):
        DirectRoutes(FastAPI(), router.routes, ("getThing",), {})
    with pytest.raises(LookupError, match="noSuchOperation"):
        DirectRoutes(FastAPI(), router.routes, ("noSuchOperation",), {})


def test_every_one_unit_operation_is_served_directly() -> None:
    from units_api.app import ROUTERS

    routes = [route for router in ROUTERS for route in router.routes]
    direct = DirectRoutes(FastAPI(), routes, DIRECT_OPERATIONS, {})
    served = {d.route.operation_id for found in direct.by_method.values() for d in found}
    assert served == set(DIRECT_OPERATIONS)


async def test_the_units_routes_keep_their_errors(api: Api) -> None:
    unit = await api.create_unit()
    path = f"/api/v2/units/{unit['id']}"
    assert_problem(await api.client.get(path), 401)
    assert_problem(await api.request("GET", f"/api/v2/units/{uuid.uuid4()}"), 404)
    text = {"content-type": "text/plain"}
    assert_problem(await api.request("PATCH", path, content=b"{}", headers=text), 415)
    bad = await api.request(
        "PATCH",
        path,
        content=b'{"price": "x"}',
        headers={"content-type": "application/merge-patch+json"},
    )
    assert_problem(bad, 422)
    assert_problem(await api.request("DELETE", path, headers={"If-Match": '"9"'}), 412)
    assert_problem(await api.request("POST", path), 405)
    response = await api.request("GET", path, headers={"If-None-Match": f'"{unit["version"]}"'})
    assert response.status_code == 304


def _prefixed_app() -> FastAPI:
    async def page(request: Request) -> Response:
        return JSONResponse({"page": request.path_params, "route": request.scope["route"].path})

    app = FastAPI()
    app.include_router(_things()[0])
    pages = [
        Route("/pages/{name}", page, methods=["GET"]),
        Route("/pages/{name}/edit", page, methods=["GET", "POST"]),
    ]
    app.router.routes.insert(0, Prefixed("/pages", pages))
    return app


async def test_prefixed_routes_answer_as_they_would_among_the_others() -> None:
    app = _prefixed_app()
    async with await _client(app) as client:
        found = await client.get("/pages/one")
        edit = await client.post("/pages/two/edit")
        wrong_method = await client.delete("/pages/two/edit")
        none = await client.get("/pages/")
        beside = await client.get("/pagesmith")
        thing = await client.get(f"/things/{uuid.uuid4()}")
    assert found.json() == {"page": {"name": "one"}, "route": "/pages/{name}"}
    assert edit.json() == {"page": {"name": "two"}, "route": "/pages/{name}/edit"}
    assert wrong_method.status_code == 405
    assert set(wrong_method.headers["allow"].split(", ")) == {"HEAD", "GET", "POST"}
    assert none.status_code == 404 and beside.status_code == 404
    assert thing.status_code == 200  # the routes after them are still found


def test_prefixed_routes_name_their_paths() -> None:
    app = _prefixed_app()
    assert app.url_path_for("page", name="x") == "/pages/x"
