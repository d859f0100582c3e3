"""The files pages: start an export and download it, upload an import with a dry run first,
and follow either job's progress. The API's jobs do the work; a page only asks and shows."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.datastructures import UploadFile
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from units_api.auth.scopes import UNITS_EXPORT, UNITS_WRITE
from units_api.console.api import Answer
from units_api.console.web import PREFIX, Page, error_page, redirect, signed_in, text_of

EXPORTS_API = "/api/v2/units/exports"
IMPORTS_API = "/api/v2/units/imports"
EXPORT_FORMATS = ("csv", "xlsx", "jsonl", "parquet")
IMPORT_MODES = ("create", "upsert")
# While a job is queued or running its page looks again this often (milliseconds).
REFRESH_MS = 1500
RUNNING = ("queued", "running")
RECENT = 20  # jobs listed under the form
# Download headers passed on from the API's answer.
FILE_HEADERS = ("content-type", "content-disposition", "content-length", "etag")


def _refused(page: Page) -> Response:
    return error_page(page, 403)


async def exports_page(page: Page) -> Response:
    if not page.may(UNITS_EXPORT):
        return _refused(page)
    values = {"format": "csv", "compression": "none", "filter": "", "q": "", "fields": ""}
    answer: Answer | None = None
    if page.request.method == "POST":
        form = await page.request.form()
        values = {name: text_of(form, name) for name in values}
        body: dict[str, Any] = {
            name: values[name] for name in ("format", "compression", "filter", "q") if values[name]
        }
        if values["fields"]:
            body["fields"] = [f.strip() for f in values["fields"].split(",") if f.strip()]
        answer = await page.api.send("POST", EXPORTS_API, orjson.dumps(body))
    return await _jobs(page, "export", answer, values, formats=EXPORT_FORMATS)


async def _jobs(
    page: Page, kind: str, answer: Answer | None, values: dict[str, str], **extra: Any
) -> Response:
    """A kind's jobs page: the job just started (its own page), or the list of recent jobs
    and the form again, with what was wrong beside its fields."""
    if answer is not None and answer.ok:
        return redirect(f"{PREFIX}/{kind}s/{answer.data['id']}")
    listed = await page.api.get(f"/api/v2/units/{kind}s", {"limit": RECENT})
    return page.render(
        f"{kind}s.html",
        200 if answer is None else answer.status,
        jobs=listed.data["data"] if listed.ok else [],
        values=values,
        errors=answer.errors if answer else {},
        problem=None if answer is None or answer.errors else answer.detail,
        **extra,
    )


async def job_page(page: Page) -> Response:
    """One export's or import's page: its progress, its counts, its errors, its file."""
    kind = "export" if page.request.url.path.startswith(f"{PREFIX}/exports/") else "import"
    job_id = page.request.path_params["job_id"]
    answer = await page.api.get(f"/api/v2/units/{kind}s/{job_id}")
    if not answer.ok:
        return error_page(page, answer.status)
    return page.render("job.html", job=answer.data, running=RUNNING, refresh=REFRESH_MS)


async def export_file(page: Page) -> Response:
    """The export's file, passed through from the API as it streams."""
    job_id = page.request.path_params["job_id"]
    answer, body = await page.api.stream(f"{EXPORTS_API}/{job_id}/file")
    if not answer.ok:
        return error_page(page, answer.status)
    headers = {name: answer.headers[name] for name in FILE_HEADERS if name in answer.headers}
    return StreamingResponse(body, headers=headers)


async def imports_page(page: Page) -> Response:
    if not page.may(UNITS_WRITE):
        return _refused(page)
    values = {"mode": "create", "atomic": "", "dryRun": "true"}
    answer: Answer | None = None
    if page.request.method == "POST":
        form = await page.request.form()
        values = {name: text_of(form, name) for name in values}
        upload = form.get("file")
        fields = {
            "mode": values["mode"] or "create",
            "dryRun": "true" if values["dryRun"] else "false",
            "atomic": "true" if values["atomic"] else "false",
        }
        if isinstance(upload, UploadFile) and upload.filename:
            answer = await page.api.upload(IMPORTS_API, fields, "file", upload)
        else:
            answer = Answer(422, {}, b"", {"errors": [{"field": "file", "message": ""}]})
    return await _jobs(page, "import", answer, values, modes=IMPORT_MODES)


ROUTES = [
    Route(f"{PREFIX}/exports", signed_in(exports_page), methods=["GET", "POST"]),
    Route(f"{PREFIX}/exports/{{job_id}}", signed_in(job_page), methods=["GET"]),
    Route(f"{PREFIX}/exports/{{job_id}}/file", signed_in(export_file), methods=["GET"]),
    Route(f"{PREFIX}/imports", signed_in(imports_page), methods=["GET", "POST"]),
    Route(f"{PREFIX}/imports/{{job_id}}", signed_in(job_page), methods=["GET"]),
]
