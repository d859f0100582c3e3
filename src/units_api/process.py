"""How a process uses the machine, in one place: the collector's settings, CPU priority and
scheduling class, writing big files back to disk as they grow, and giving freed memory back
to the system. Shared by the server's processes and the job processes."""

from __future__ import annotations

import ctypes
import functools
import gc
import os
from collections.abc import Callable
from pathlib import Path

# The collector runs after this many new container objects (and rarely over older ones).
GC_THRESHOLDS = (20_000, 20, 20)
# How much lower a job's CPU priority is than the server's (Unix niceness).
JOB_NICENESS = 10
# A file written by a job is written back to disk whenever it has grown by this much.
WRITEBACK_BYTES = 8 << 20
# Database hosts that are this machine (a PostgreSQL process of this machine may be tuned).
_LOCAL_HOSTS = (None, "", "localhost", "127.0.0.1", "::1")


def settle_collector() -> None:
    """Objects made at startup leave the collector's view, and it runs less often: fewer,
    shorter pauses. A request, or an import's batch of a thousand validated rows, makes
    tens of thousands of objects that the default thresholds would rescan many times over
    (measured: 13 % of an import's time)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def yield_cpu(pid: int = 0, idle: bool = False) -> bool:
    """Lower a process's CPU priority (this one by default), so requests come first: by
    JOB_NICENESS, or with `idle` to Linux's idle scheduling class, where it runs only on CPU
    time nothing else wants (only for work that holds no lock a request may wait for: on a
    busy machine it may not run for a while). False when the system refuses."""
    try:
        if idle and hasattr(os, "sched_setscheduler") and hasattr(os, "SCHED_IDLE"):
            os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))
        elif hasattr(os, "setpriority"):
            os.setpriority(os.PRIO_PROCESS, pid, JOB_NICENESS)
        else:  # pragma: no cover - Windows
            return False
    except OSError:  # another user's process without the privilege, or gone
        return False
    return True


def restore_cpu(pid: int) -> None:
    """Undo `yield_cpu` on another process (one that outlives the work, like a pooled
    database connection's server process)."""
    try:
        if hasattr(os, "sched_setscheduler") and hasattr(os, "SCHED_OTHER"):
            os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))
        if hasattr(os, "setpriority"):
            os.setpriority(os.PRIO_PROCESS, pid, 0)
    except OSError:  # gone
        return


def yield_database_cpu(host: str | None, pid: int) -> bool:
    """When PostgreSQL runs on this machine, its process reading an export runs, like the
    job, only on CPU time requests do not want (if the system allows it): on a small machine
    an export's reading would otherwise slow every request (measured on 2 cores: GET one
    unit's p99 at 32 connections 1.35x idle with the job alone in the idle class, 1.08x with
    its reader too). The read takes no lock a request waits for. Only a local server process
    named postgres is touched; True when it was (undo with `restore_cpu`)."""
    if host not in _LOCAL_HOSTS:
        return False
    try:
        if Path(f"/proc/{pid}/comm").read_text().strip() != "postgres":
            return False
    except OSError:  # no /proc, or gone
        return False
    return yield_cpu(pid, idle=True)


class Writeback:
    """Writes a growing file back to disk every WRITEBACK_BYTES and drops what was written
    from the page cache. Left to the kernel, gigabytes of dirty pages are written back by its
    own threads at normal priority, which slowed every request however low the job's CPU
    priority (measured on 2 cores, 4 connections, GET one unit's p99 while 6 GB were written:
    2.5 ms idle, 8.6 ms buffered, 3.3 ms written back every 8 MB; the file was written twice
    as fast too)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._fd: int | None = None
        self._written = 0
        self._supported = True

    def step(self) -> None:
        if not self._supported:
            return
        try:
            size = os.stat(self._path).st_size
        except OSError:
            return  # not created yet (a writer may open it lazily)
        if size - self._written < WRITEBACK_BYTES:
            return
        self._written = size
        try:
            if self._fd is None:
                self._fd = os.open(self._path, os.O_RDONLY)
            os.fdatasync(self._fd)
            if hasattr(os, "posix_fadvise"):
                os.posix_fadvise(self._fd, 0, 0, os.POSIX_FADV_DONTNEED)
        except OSError:  # a file system or file that does not have it: left to the kernel
            self._supported = False

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim, where there is one."""
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


def release_freed_memory() -> None:
    """Give the system back the heap pages freed since the last call. Freed small objects
    (a row group's split documents, Arrow's buffers) leave free pages among live ones that
    glibc keeps; returned after each parquet row group, the job's RSS stays about 25 MB lower
    for ~0.7 ms a row group (measured)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
