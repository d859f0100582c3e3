"""Where job files live (export results, uploaded imports): a local directory by default, or
an S3-compatible object store (`UNITS_API_STORAGE_URL=s3://bucket/prefix`, the `s3` extra).

A file is made complete on local disk first (`scratch`), then handed over whole (`put`): a
reader never sees half a file. Keys are relative paths such as `exports/<job id>.csv`.

Local files are seen only by the machine that wrote them, so a job records where its file was
put (`place`), and a machine asked for a file it does not hold can name the one that does.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import socket
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol

import anyio

from units_api.db import disk_fault
from units_api.errors import StorageFull, StorageUnavailable, bound_error

CHUNK = 1024 * 1024
OBJECT_CONNECT_SECONDS = 5  # to connect to the object store
OBJECT_RETRIES = 3  # a failed request to the object store is tried again this many times
OBJECT_RETRY_SECONDS = 10  # and not after this long from its first try
PROBE_BYTES = 4096  # written by the readiness check: a file system with less is full
# What an OSError's errno says of the store: full, or failing (a disk's I/O error, a file
# system gone read-only, a mount gone, a folder no longer writable).
FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
FAILING = frozenset(
    {errno.EIO, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENXIO, errno.ENODEV, errno.ESTALE}
)


def storage_fault(exc: BaseException | None) -> StorageUnavailable | None:
    """The storage fault behind `exc` (itself, or what it was raised from or while handling,
    however deep: a file write that failed under a database stream surfaces as the stream's
    error), the file store's or SQLite's database file's: a 507 problem naming it, or None
    when no storage is at fault."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, StorageUnavailable):
            return exc
        if isinstance(exc, OSError) and exc.errno in FULL | FAILING:
            return _problem(exc)
        if (fault := disk_fault(exc)) is not None:
            return fault
        exc = exc.__cause__ or exc.__context__
    return None


def _problem(exc: OSError) -> StorageUnavailable:
    reason = os.strerror(exc.errno or 0).lower()
    where = f" ({exc.filename})" if exc.filename else ""
    if exc.errno in FULL:
        return StorageFull(
            f"The file store is full: {reason}{where}. Nothing was kept; try again once "
            "space has been freed."
        )
    return StorageUnavailable(
        f"The file store cannot be written: {reason}{where}. Nothing was kept; try again "
        "once it works again."
    )


@contextlib.contextmanager
def store_faults() -> Iterator[None]:
    """An OSError of the store's inside becomes its 507 problem (others pass unchanged)."""
    try:
        yield
    except OSError as exc:
        fault = storage_fault(exc)
        if fault is None:
            raise
        raise fault from exc


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

    def check(self) -> str | None:
        """Why files cannot be made on this machine now (its files directory full, read-only
        or failing), None when they can; blocking (a small file written and removed)."""

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
        with store_faults():
            self._tmp.mkdir(parents=True, exist_ok=True)
            handle, name = tempfile.mkstemp(suffix=suffix, dir=self._tmp)
        os.close(handle)
        return Path(name)

    def check(self) -> str | None:
        try:
            self._tmp.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=self._tmp, suffix=".ready") as file:
                file.write(bytes(PROBE_BYTES))
                file.flush()
        except OSError as exc:
            reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
            return f"{self.root.resolve()}: {reason}"
        return None

    async def put(self, key: str, path: Path) -> None:
        target = self.path(key)
        with store_faults():
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
            with store_faults():
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
        options: dict[str, Any] = {
            "allow_http": endpoint.startswith("http://"),
            "connect_timeout": timedelta(seconds=OBJECT_CONNECT_SECONDS),
        }
        # A store out of reach is a 507 within a bound, not after obstore's 3 minutes of retries.
        retries: dict[str, Any] = {
            "max_retries": OBJECT_RETRIES,
            "retry_timeout": timedelta(seconds=OBJECT_RETRY_SECONDS),
        }
        self._store = S3Store.from_url(
            url,
            client_options=options,  # type: ignore[arg-type]
            retry_config=retries,  # type: ignore[arg-type]
        )
        self._local = LocalStorage(scratch_dir)

    def place(self) -> dict[str, str]:
        return {}

    def scratch(self, suffix: str = "") -> Path:
        return self._local.scratch(suffix)

    def check(self) -> str | None:
        return self._local.check()

    def sweep_scratch(self, older_than: float) -> int:
        return self._local.sweep_scratch(older_than)

    async def put(self, key: str, path: Path) -> None:
        import obstore

        try:
            with _object_faults():
                await obstore.put_async(self._store, key, path)
        finally:
            os.unlink(path)

    async def fetch(self, key: str, path: Path) -> None:
        with store_faults():
            async with await anyio.open_file(path, "wb") as file:
                async for chunk in self.read(key):
                    await file.write(chunk)

    async def size(self, key: str) -> int | None:
        import obstore
        from obstore.exceptions import NotFoundError

        try:
            with _object_faults():
                meta = await obstore.head_async(self._store, key)
        except (NotFoundError, FileNotFoundError):
            return None
        return int(meta["size"])

    async def read(self, key: str) -> AsyncIterator[bytes]:
        import obstore

        with _object_faults():
            result = await obstore.get_async(self._store, key)
            async for chunk in result.stream(min_chunk_size=CHUNK):
                yield bytes(chunk)

    async def delete(self, key: str) -> None:
        import obstore
        from obstore.exceptions import NotFoundError

        with contextlib.suppress(NotFoundError, FileNotFoundError), _object_faults():
            await obstore.delete_async(self._store, key)


@contextlib.contextmanager
def _object_faults() -> Iterator[None]:
    """The object store's errors (out of reach, refusing, failing) as its 507 problem; a
    missing object passes unchanged, for the caller to answer."""
    from obstore.exceptions import BaseError, NotFoundError

    try:
        yield
    except (NotFoundError, FileNotFoundError):
        raise
    except (BaseError, ConnectionError, TimeoutError) as exc:
        reason = bound_error(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, 300)
        raise StorageUnavailable(
            f"The object store (UNITS_API_STORAGE_URL) failed: {reason}. Nothing was kept; "
            "try again once it works again."
        ) from exc


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
