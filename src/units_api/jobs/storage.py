"""Where job files live (export results, uploaded imports): a local directory by default, or
an S3-compatible object store (`UNITS_API_STORAGE_URL=s3://bucket/prefix`, the `s3` extra).

A file is made complete on local disk first (`scratch`), then handed over whole (`put`): a
reader never sees half a file. Keys are relative paths such as `exports/<job id>.csv`.

Local files are seen only by the machine that wrote them, so a job records where its file was
put (`place`), and a machine asked for a file it does not hold can name the one that does.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import anyio

CHUNK = 1024 * 1024


class Storage(Protocol):
    def place(self) -> dict[str, str]:
        """Where a file put now is kept, as a job records it: the machine's name and files
        directory for local files, nothing for a store every machine shares."""

    def scratch(self, suffix: str = "") -> Path:
        """A new local temporary file's path, for a file being made."""

    async def put(self, key: str, path: Path) -> None:
        """Store the complete file at `path` under `key` (the local file is consumed)."""

    async def fetch(self, key: str, path: Path) -> None:
        """The file stored under `key` at the local `path`, to be read (a local store links
        it there rather than copying it, so it is never written through `path`)."""

    async def size(self, key: str) -> int | None:
        """The stored file's size, None when there is none."""

    def read(self, key: str) -> AsyncIterator[bytes]:
        """The stored file's bytes, in chunks."""

    async def delete(self, key: str) -> None:
        """Remove the file; nothing happens when there is none."""

    def sweep_scratch(self, older_than: float) -> int:
        """Delete temporary files older than `older_than` seconds (left by a process that
        died while making one); how many."""


def _link_or_copy(source: Path, target: Path) -> None:
    """`target` becomes another name of `source` (no copy: an upload of hundreds of megabytes
    is there at once), or a copy where the file system has no hard links. The file is only
    read through it."""
    target.unlink(missing_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


class LocalStorage:
    """Files under one directory of one machine (`machine`, the host name unless named);
    temporary files beside them, so handing one over is a rename on the same file system
    (atomic)."""

    def __init__(self, root: str | Path, machine: str | None = None) -> None:
        self.root = Path(root)
        self.machine = machine or socket.gethostname()
        self._tmp = self.root / ".tmp"

    def place(self) -> dict[str, str]:
        return {"machine": self.machine, "filesDir": str(self.root.resolve())}

    def path(self, key: str) -> Path:
        return self.root / key

    def scratch(self, suffix: str = "") -> Path:
        self._tmp.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(suffix=suffix, dir=self._tmp)
        os.close(handle)
        return Path(name)

    async def put(self, key: str, path: Path) -> None:
        target = self.path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        await anyio.to_thread.run_sync(os.replace, path, target)

    async def fetch(self, key: str, path: Path) -> None:
        if not self.path(key).exists():
            raise FileNotFoundError(
                f"{key} is not in the files directory of machine {self.machine!r} "
                f"({self.root.resolve()}): a file put on another machine is seen there only "
                "through a shared store (UNITS_API_STORAGE_URL)"
            )
        await anyio.to_thread.run_sync(_link_or_copy, self.path(key), path)

    async def size(self, key: str) -> int | None:
        try:
            return self.path(key).stat().st_size
        except FileNotFoundError:
            return None

    async def read(self, key: str) -> AsyncIterator[bytes]:
        async with await anyio.open_file(self.path(key), "rb") as file:
            while chunk := await file.read(CHUNK):
                yield chunk

    async def delete(self, key: str) -> None:
        self.path(key).unlink(missing_ok=True)

    def sweep_scratch(self, older_than: float) -> int:
        if not self._tmp.is_dir():
            return 0
        cutoff = time.time() - older_than
        swept = 0
        for path in self._tmp.iterdir():
            with contextlib.suppress(FileNotFoundError):
                if path.stat().st_mtime < cutoff:
                    path.unlink()
                    swept += 1
        return swept


class ObjectStorage:
    """An S3-compatible bucket through obstore. Credentials, region and endpoint come from the
    usual AWS_* environment variables (AWS_ENDPOINT_URL for a store other than AWS)."""

    def __init__(self, url: str, scratch_dir: str | Path) -> None:
        try:
            from obstore.store import S3Store
        except ImportError as exc:  # pragma: no cover - depends on the installation
            raise RuntimeError(
                "UNITS_API_STORAGE_URL=s3://... needs the s3 extra: pip install 'units-api[s3]'"
            ) from exc
        endpoint = os.environ.get("AWS_ENDPOINT_URL", "")
        options: dict[str, Any] = {"allow_http": endpoint.startswith("http://")}
        self._store = S3Store.from_url(url, client_options=options)  # type: ignore[arg-type]
        self._local = LocalStorage(scratch_dir)

    def place(self) -> dict[str, str]:
        return {}

    def scratch(self, suffix: str = "") -> Path:
        return self._local.scratch(suffix)

    def sweep_scratch(self, older_than: float) -> int:
        return self._local.sweep_scratch(older_than)

    async def put(self, key: str, path: Path) -> None:
        import obstore

        try:
            await obstore.put_async(self._store, key, path)
        finally:
            os.unlink(path)

    async def fetch(self, key: str, path: Path) -> None:
        async with await anyio.open_file(path, "wb") as file:
            async for chunk in self.read(key):
                await file.write(chunk)

    async def size(self, key: str) -> int | None:
        import obstore
        from obstore.exceptions import NotFoundError

        try:
            meta = await obstore.head_async(self._store, key)
        except (NotFoundError, FileNotFoundError):
            return None
        return int(meta["size"])

    async def read(self, key: str) -> AsyncIterator[bytes]:
        import obstore

        result = await obstore.get_async(self._store, key)
        async for chunk in result.stream(min_chunk_size=CHUNK):
            yield bytes(chunk)

    async def delete(self, key: str) -> None:
        import obstore
        from obstore.exceptions import NotFoundError

        with contextlib.suppress(NotFoundError, FileNotFoundError):
            await obstore.delete_async(self._store, key)


def open_storage(storage_url: str | None, files_dir: str, machine: str) -> Storage:
    """The configured storage: the S3 store of `storage_url`, else the local `files_dir` of
    the machine named `machine`."""
    if storage_url:
        if not storage_url.startswith(("s3://", "s3a://")):
            raise ValueError("UNITS_API_STORAGE_URL must be an s3:// URL")
        return ObjectStorage(storage_url, files_dir)
    return LocalStorage(files_dir, machine)


def holder(storage: Storage, written: Mapping[str, str]) -> str | None:
    """The machine holding a file that is missing from `storage`, when it was put somewhere
    this storage does not reach (`written`: the job's record of its `place`); None when it
    was put here, or nothing was recorded (then it is gone)."""
    if not written or written == storage.place():
        return None
    return written.get("machine") or "unknown"
