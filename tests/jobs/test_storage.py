"""The local job storage: files handed over whole, and temporary files of dead jobs swept."""

from __future__ import annotations

import os
import time
from pathlib import Path

from units_api.jobs.storage import LocalStorage


async def test_a_file_is_handed_over_whole_and_read_back(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    scratch = storage.scratch(".csv")
    scratch.write_bytes(b"a" * 3_000_000)
    await storage.put("exports/x.csv", scratch)
    assert not scratch.exists()
    assert await storage.size("exports/x.csv") == 3_000_000
    assert b"".join([chunk async for chunk in storage.read("exports/x.csv")]) == b"a" * 3_000_000
    copy = storage.scratch(".csv")  # already there, empty: fetch replaces it
    await storage.fetch("exports/x.csv", copy)
    assert copy.read_bytes() == b"a" * 3_000_000
    copy.unlink()  # a job done with its copy leaves the stored file alone
    assert await storage.size("exports/x.csv") == 3_000_000
    await storage.delete("exports/x.csv")
    await storage.delete("exports/x.csv")  # nothing there: no error
    assert await storage.size("exports/x.csv") is None


def test_only_old_temporary_files_are_swept(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    assert storage.sweep_scratch(60) == 0  # no temporary directory yet
    old, fresh = storage.scratch(".jsonl"), storage.scratch(".jsonl")
    long_ago = time.time() - 7200
    os.utime(old, (long_ago, long_ago))
    assert storage.sweep_scratch(3600) == 1
    assert not old.exists() and fresh.exists()
