"""The kinds of job, one line each: its name and the module that defines it (its `JOB`, a
`jobs/kinds.JobKind`).

From that line alone the job runner claims the kind and a job's child process runs it (the
runner is handed this registry by `background.py`, and hands it to each child), the OpenAPI
document's `Job` shows its fields, and `<kind>.succeeded` and `<kind>.failed` are event types
(`events/types.py`).
"""

from __future__ import annotations

from units_api.jobs.kinds import Kinds

JOB_KINDS = Kinds(
    {
        "export": "units_api.exports.tasks",
        "import": "units_api.imports.tasks",
    }
)
