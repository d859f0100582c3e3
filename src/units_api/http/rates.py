"""Rates as settings and key policies write them: `600/minute`."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

_UNITS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(second|minute|hour|day)\s*$")


@dataclass(frozen=True, slots=True)
class Rate:
    quota: int
    window: int

    @property
    def policy(self) -> str:
        return f'"default";q={self.quota};w={self.window}'


# Bounded: a key's rate is also checked here as a client sent it, and those are many.
@functools.lru_cache(maxsize=256)
def parse_rate(text: str) -> Rate:
    """`600/minute` -> Rate(600, 60); raises ValueError on anything else."""
    match = _RATE.match(text)
    if not match or int(match.group(1)) < 1:
        raise ValueError("must look like 600/minute (per second, minute, hour or day)")
    return Rate(int(match.group(1)), _UNITS[match.group(2)])
