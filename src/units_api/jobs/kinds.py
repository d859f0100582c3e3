"""A kind of job: what it runs, how it shows its own fields, and how it shares the CPU; and
`Kinds`, the kinds by name, each loaded from the module that defines it.

The kinds themselves are listed above the domains (`job_kinds.JOB_KINDS`): jobs/ knows none.
A registry holds module names, so a job's child process, handed it, loads its kind as the
runner did.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import BaseModel

    from units_api.jobs.work import JobContext

Body = Callable[["JobContext"], Awaitable[dict[str, Any]]]
# A kind's own fields in the job's API representation, from its stored params and result.
Fields = Callable[[Mapping[str, Any], Mapping[str, Any]], dict[str, Any]]
# What a job that fails after committing part of its work shows of it: the values written on
# the job (its result...) from its last checkpoint.
SoFar = Callable[[Mapping[str, Any]], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class JobKind:
    name: str
    body: Body
    fields: Fields
    # What the OpenAPI document shows of it: its own fields (a model of what `fields`
    # returns, after the fields every job has), the values of its jobs' `format`, and a job.
    schema: type[BaseModel]
    formats: tuple[str, ...]
    example: Mapping[str, Any]
    # True: the job's process runs in the idle CPU class, only on time nothing else wants
    # (for work that holds no lock a request may wait for); False: at a lowered priority.
    idle: bool
    # A kind whose checkpoints describe work committed (an import's rows): the values a job
    # that fails shows of it, as a failure the kind reports itself would (None: nothing).
    so_far: SoFar | None = None


@dataclass(frozen=True, slots=True)
class Kinds:
    """Job kinds by name, each the `JOB` of its module (imported when a kind is first asked
    for, and by the job processes' server before any job starts)."""

    modules: Mapping[str, str]

    def kind(self, name: str) -> JobKind:
        return self._loaded()[name]

    def names(self) -> tuple[str, ...]:
        return tuple(self.modules)

    def all(self) -> tuple[JobKind, ...]:
        return tuple(self._loaded().values())

    def _loaded(self) -> Mapping[str, JobKind]:
        return _load(tuple(self.modules.items()))


@functools.cache
def _load(modules: tuple[tuple[str, str], ...]) -> Mapping[str, JobKind]:
    return {name: importlib.import_module(module).JOB for name, module in modules}
