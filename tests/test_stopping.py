"""`units-api worker` stops on SIGTERM (CONTRACT 16, stopping): its loops end between steps,
and it exits 0."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.conftest import wait_until_ready
from tests.test_cli import free_port
from units_api.migrate import upgrade


def test_a_worker_stops_on_sigterm_and_exits_0(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'units.db'}"
    upgrade(url)
    env = {**os.environ, "UNITS_API_DATABASE_URL": url, "UNITS_API_FILES_DIR": str(tmp_path)}
    log = tmp_path / "worker.log"
    port = free_port()
    with log.open("wb") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "units_api", "worker", "--metrics-port", str(port)],
            env=env,
            stdout=out,
            stderr=out,
        )
    try:
        wait_until_ready(f"http://127.0.0.1:{port}")  # its loops started
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=30) == 0, log.read_text()
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
