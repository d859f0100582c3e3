"""Screenshots of every console page, in English and Arabic (`make screenshots`).

Starts `units-api serve` on a fresh SQLite database in a temporary folder, loads realistic
units (`units-api seed`), makes one of each thing a page shows (an import with row errors,
an export, a webhook), then photographs each page with the system's Chromium into
docs/screenshots/<page>-<language>.png.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Page, sync_playwright

OUT = Path(__file__).parent / "screenshots"
CLI = [sys.executable, "-m", "units_api"]
LANGUAGES = ("en", "ar")
VIEWPORT = {"width": 1280, "height": 860}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_ready(base: str) -> None:
    for _ in range(150):
        try:
            if httpx.get(f"{base}/readyz").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"{base} did not start")


def prepare(http: httpx.Client) -> dict[str, str]:
    """One of each thing the pages show; the ids of those the pages are about."""
    units = http.get("/api/v2/units/", params={"limit": 1, "p": "unitNameAr=null=false"})
    unit_id = units.json()["data"][0]["id"]
    csv = "name,type,city,price\nNew Flat,flat,Cairo,1500000\n,villa,Giza,5\nBad,villa,Giza,-1\n"
    imported = http.post(
        "/api/v2/units/imports",
        files={"file": ("units.csv", csv.encode())},
        data={"dryRun": "true"},
    ).json()
    exported = http.post("/api/v2/units/exports", json={"format": "xlsx"}).json()
    hook = http.post(
        "/api/v2/webhooks",
        json={"url": "https://crm.example.com/hooks/units", "eventTypes": ["*"]},
    ).json()
    for job in (f"imports/{imported['id']}", f"exports/{exported['id']}"):
        for _ in range(200):
            if http.get(f"/api/v2/units/{job}").json()["status"] not in ("queued", "running"):
                break
            time.sleep(0.2)
    return {
        "unit": unit_id,
        "import": imported["id"],
        "export": exported["id"],
        "webhook": hook["id"],
    }


def pages(ids: dict[str, str]) -> list[tuple[str, str]]:
    return [
        ("units", "/console/units?sortBy=price&limit=20"),
        ("search-arabic", "/console/units?q=%D9%82%D8%A7%D9%87%D8%B1%D8%A9"),
        ("unit", f"/console/units/{ids['unit']}"),
        ("edit", f"/console/units/{ids['unit']}/edit"),
        ("bulk", "/console/bulk"),
        ("imports", "/console/imports"),
        ("import", f"/console/imports/{ids['import']}"),
        ("exports", "/console/exports"),
        ("export", f"/console/exports/{ids['export']}"),
        ("webhooks", "/console/webhooks"),
        ("webhook", f"/console/webhooks/{ids['webhook']}"),
        ("keys", "/console/keys"),
        ("channels", "/console/channels"),
    ]


def sign_in(page: Page, base: str, key: str, language: str) -> None:
    page.goto(f"{base}/console/language/{language}?next=/console/login")
    page.locator("#key").fill(key)
    page.locator("form button[type=submit]").click()
    page.wait_for_url(re.compile("/console/units"))


def shoot(base: str, key: str, ids: dict[str, str], chromium: str) -> list[Path]:
    OUT.mkdir(exist_ok=True)
    saved: list[Path] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        for language in LANGUAGES:
            context = browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
            page = context.new_page()
            page.goto(f"{base}/console/language/{language}?next=/console/login")
            path = OUT / f"login-{language}.png"
            page.screenshot(path=path)
            saved.append(path)
            sign_in(page, base, key, language)
            for name, url in pages(ids):
                page.goto(f"{base}{url}")
                path = OUT / f"{name}-{language}.png"
                page.screenshot(path=path)
                saved.append(path)
            context.close()
        browser.close()
    return saved


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--units", type=int, default=300)
    args = parser.parse_args(argv)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("no Chromium: apt-get install chromium")
    with tempfile.TemporaryDirectory() as folder:
        port = free_port()
        env: dict[str, Any] = {
            **os.environ,
            "UNITS_API_DATABASE_URL": f"sqlite:///{folder}/units.db",
            "UNITS_API_FILES_DIR": f"{folder}/files",
            "UNITS_API_ACCESS_LOG": "false",
        }
        subprocess.run([*CLI, "migrate"], env=env, check=True, capture_output=True)
        subprocess.run(
            [*CLI, "seed", "--count", str(args.units), "--seed", "7"],
            env=env,
            check=True,
            capture_output=True,
        )
        key = subprocess.run(
            [*CLI, "keys", "create", "--name", "Inventory manager", "--scope", "admin"],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.splitlines()[0]
        server = subprocess.Popen(
            [*CLI, "serve", "--port", str(port)], env=env, stdout=subprocess.DEVNULL
        )
        base = f"http://127.0.0.1:{port}"
        try:
            wait_ready(base)
            headers = {"Authorization": f"Bearer {key}"}
            with httpx.Client(base_url=base, headers=headers, timeout=30) as http:
                ids = prepare(http)
            saved = shoot(base, key, ids, chromium)
        finally:
            server.terminate()
            server.wait(timeout=30)
    for path in saved:
        print(path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path)


if __name__ == "__main__":
    main()
