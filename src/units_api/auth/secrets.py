"""API key secrets: random, prefixed so scanners can spot them, stored only as a hash."""

from __future__ import annotations

import hashlib
import hmac
import secrets

KEY_PREFIX = "uak_"
VISIBLE_CHARS = 12


def new_secret() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def visible_prefix(secret: str) -> str:
    return secret[:VISIBLE_CHARS]


def same_hash(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())
