"""The registry of job kinds."""

from __future__ import annotations

import typing
from collections import defaultdict

from units_api.job_kinds import JOB_KINDS
from units_api.jobs.schemas import JobFields
from units_api.openapi import Job


def test_every_kind_is_registered_and_documented() -> None:
    registered = JOB_KINDS.names()
    assert set(registered) == set(typing.get_args(Job.model_fields["kind"].annotation))
    for name in registered:
        kind = JOB_KINDS.kind(name)
        assert kind.name == name
        assert kind.fields.__module__ == kind.body.__module__  # one module holds the kind


def test_a_kind_shows_the_fields_it_documents() -> None:
    for kind in JOB_KINDS.all():
        shown = kind.fields(defaultdict(lambda: None), {})
        assert list(shown) == list(kind.schema.model_fields)
        assert list(kind.example) == [*JobFields.model_fields, *shown]
        assert kind.example["kind"] == kind.name
        assert kind.example["format"] in kind.formats
