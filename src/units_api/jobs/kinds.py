"""The kinds of job: what each one runs, how it shows its own fields, and how it shares the
CPU with requests.

Adding a kind of job: a module `<domain>/tasks.py` with its body (an `async` function of a
`JobContext` that returns the values the job ends with) and a `JobKind` named `JOB`, and that
module's name in `MODULES`. The runner, the API's rendering of a job and the job's child
process find it here; nothing else changes.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from units_api.jobs.work import JobContext

# The modules that define a job kind (`JOB`), each imported when a kind is first asked for
# (and by the job processes' server, before any job starts).
MODULES = ("units_api.exports.tasks", "units_api.imports.tasks")

Body = Callable[["JobContext"], Awaitable[dict[str, Any]]]
# A kind's own fields in the job's API representation, from its stored params and result.
Fields = Callable[[Mapping[str, Any], Mapping[str, Any]], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class JobKind:
    name: str
    body: Body
    fields: Fields
    # True: the job's process runs in the idle CPU class, only on time nothing else wants
    # (for work that holds no lock a request may wait for); False: at a lowered priority.
    idle: bool


@functools.cache
def registry() -> Mapping[str, JobKind]:
    kinds: dict[str, JobKind] = {}
    for module in MODULES:
        kind: JobKind = importlib.import_module(module).JOB
        kinds[kind.name] = kind
    return kinds


def kind(name: str) -> JobKind:
    return registry()[name]


def names() -> tuple[str, ...]:
    return tuple(registry())
