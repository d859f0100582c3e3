"""The registry of job kinds."""

from __future__ import annotations

import typing

from units_api.job_kinds import JOB_KINDS
from units_api.jobs.schemas import Job


def test_every_kind_is_registered_and_documented() -> None:
    registered = JOB_KINDS.names()
    assert set(registered) == set(typing.get_args(Job.model_fields["kind"].annotation))
    for name in registered:
        kind = JOB_KINDS.kind(name)
        assert kind.name == name
        assert kind.fields.__module__ == kind.body.__module__  # one module holds the kind
