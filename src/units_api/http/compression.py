"""gzip for a streamed response, when the client accepts it (RFC 9110 section 12.5.3)."""

from __future__ import annotations

import zlib

GZIP = "gzip"
# deflate's level: 6 (zlib's default) compresses a listings feed about 8:1; 1 is faster but
# makes the file half as large again.
LEVEL = 6


def _quality(parameters: list[str]) -> float:
    for parameter in parameters:
        name, _, value = parameter.strip().partition("=")
        if name.strip().lower() == "q":
            try:
                return float(value)
            except ValueError:
                return 0.0
    return 1.0


def accepts_gzip(header: str | None) -> bool:
    """Whether Accept-Encoding allows gzip: named (or `*`) with a quality above 0."""
    if not header:
        return False
    qualities: dict[str, float] = {}
    for item in header.split(","):
        coding, *parameters = item.split(";")
        qualities[coding.strip().lower()] = _quality(parameters)
    if GZIP in qualities or "x-gzip" in qualities:
        return max(qualities.get(GZIP, 0.0), qualities.get("x-gzip", 0.0)) > 0
    return qualities.get("*", 0.0) > 0


class GzipStream:
    """One gzip member written piece by piece: `add` each piece, then `finish`."""

    def __init__(self, level: int = LEVEL) -> None:
        self._compressor = zlib.compressobj(level, zlib.DEFLATED, 16 + zlib.MAX_WBITS)

    def add(self, data: bytes) -> bytes:
        return self._compressor.compress(data)

    def finish(self) -> bytes:
        return self._compressor.flush()
