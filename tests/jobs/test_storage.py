"""The local job storage: files handed over whole, temporary files of dead jobs swept, and a
file put on another machine told from one that is gone."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from units_api.jobs.storage import LocalStorage, holder


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


def test_a_file_put_elsewhere_names_the_machine_holding_it(tmp_path: Path) -> None:
    here = LocalStorage(tmp_path / "a", "machine-a")
    assert holder(here, here.place()) is None  # put here: a missing file is gone
    assert holder(here, LocalStorage(tmp_path / "a", "machine-a").place()) is None
    assert holder(here, {}) is None  # nothing recorded (or a shared store): gone
    assert holder(here, LocalStorage(tmp_path / "b", "machine-b").place()) == "machine-b"
    # the same name with another files directory is another machine's disk too
    assert holder(here, LocalStorage(tmp_path / "b", "machine-a").place()) == "machine-a"


async def test_fetching_a_file_put_on_another_machine_says_what_is_needed(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path, "machine-a")
    with pytest.raises(FileNotFoundError, match=r"machine-a.*UNITS_API_STORAGE_URL"):
        await storage.fetch("imports/x.csv", tmp_path / "copy.csv")
