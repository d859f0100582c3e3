"""`units-api` with the SQLite writer's batch bounded by WRITER_MAX_BATCH (1: a plain queue,
each write transaction committed alone), for `write_embedded.py --max-batch`.

    WRITER_MAX_BATCH=1 python bench/writer_batch.py serve --port 8000
"""

from __future__ import annotations

import os

from units_api import writer
from units_api.cli import main

writer.MAX_BATCH = int(os.environ["WRITER_MAX_BATCH"])
main()
