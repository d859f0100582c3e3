"""A URL (path and query) of up to MAX_URL_BYTES reaches the app, under the real server too;
a longer one is a 414 problem, and one the server's HTTP parser refuses still gets an answer."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import Api, served_sqlite
from tests.http.test_errors import assert_problem
from units_api.http.middleware import MAX_URL_BYTES

LIST = "/api/v2/units/?p="


def long_target(project: str, size: int) -> str:
    """A list request of exactly `size` bytes whose filter matches the units of `project`."""
    head = f"{LIST}subProjectId=in=({project}"
    fillers = (size - len(head) - 3) // 41
    target = head + f",{'z' * 40}" * fillers
    target += "," + "y" * (size - len(target) - 2) + ")"
    assert len(target.encode()) == size
    return target


async def test_a_url_at_the_limit_reaches_the_app(api: Api) -> None:
    project = f"long-url-{uuid.uuid4()}"
    await api.create_unit(subProjectId=project)
    response = await api.request("GET", long_target(project, MAX_URL_BYTES))
    assert response.status_code == 200, response.text
    assert [unit["subProjectId"] for unit in response.json()["data"]] == [project]


async def test_a_longer_url_is_a_414_problem(api: Api) -> None:
    response = await api.request("GET", long_target("p", MAX_URL_BYTES + 1))
    body = assert_problem(response, 414)
    assert body["type"] == "/problems/uri-too-long"
    assert f"{MAX_URL_BYTES + 1:,} bytes" in str(body["detail"])
    assert "POST /api/v2/units/query" in str(body["detail"])
    response = await api.request("GET", "/api/v2/units/" + "x" * MAX_URL_BYTES)
    assert assert_problem(response, 414)["type"] == "/problems/uri-too-long"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """`units-api serve` (uvicorn, httptools) on a loopback port: its URL and an admin key."""
    with served_sqlite(tmp_path_factory.mktemp("long-urls") / "units.db") as (base, key):
        yield base, {"Authorization": f"Bearer {key}"}


def test_the_real_server_passes_a_url_at_the_limit_and_answers_longer_ones(
    server: tuple[str, dict[str, str]],
) -> None:
    base, headers = server
    project = f"served-{uuid.uuid4()}"
    created = httpx.post(
        f"{base}/api/v2/units/",
        headers=headers,
        json={"name": "a", "type": "b", "subProjectId": project},
    )
    assert created.status_code == 201, created.text
    with httpx.Client(base_url=base, headers=headers) as client:
        response = client.get(long_target(project, MAX_URL_BYTES))
        assert response.status_code == 200, response.text
        assert [unit["id"] for unit in response.json()["data"]] == [created.json()["id"]]
        for size in (MAX_URL_BYTES + 1, 60_000):
            response = client.get(long_target(project, size))
            assert_problem(response, 414)
    # Past 64 KiB httptools refuses the request line itself: uvicorn answers its own plain 400
    # and closes the connection (an answer all the same, not a dropped connection).
    status_line, body = _raw_get(base, long_target(project, 100_000), headers)
    assert status_line == b"HTTP/1.1 400 Bad Request" and body == b"Invalid HTTP request received."


def _raw_get(base: str, target: str, headers: dict[str, str]) -> tuple[bytes, bytes]:
    """A GET sent byte for byte (httpx refuses URLs past 64 KiB): the status line and body."""
    host, port = base.removeprefix("http://").split(":")
    lines = [f"GET {target} HTTP/1.1", f"Host: {host}", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        answer = b"".join(iter(lambda: sock.recv(65536), b""))
    head, _, body = answer.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0], body
