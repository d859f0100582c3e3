"""Refusing targets inside the network (SSRF).

A webhook's host must be, and resolve only to, global addresses. At send time the check and
the connection use the same addresses: the resolver that aiohttp calls refuses the host if any
address is not global and otherwise returns the addresses it checked, which are the ones
connected to, so a name that resolves differently a moment later (DNS rebinding) cannot slip
in. aiohttp does not call the resolver for an IP literal, so literals are checked apart.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from typing import Any
from urllib.parse import SplitResult, urlsplit

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import ThreadedResolver

from units_api.config import PREFIX

MAX_URL_LENGTH = 2048
# The setting that lets targets inside the network through (config.Settings).
ALLOW_PRIVATE = f"{PREFIX}WEBHOOK_ALLOW_PRIVATE"
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class UnsafeTarget(OSError):
    """The target is not a public HTTP(S) address."""


class PrivateTarget(UnsafeTarget):
    """The target is inside the network: its message says which setting allows it."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"{reason} (private targets are allowed with {ALLOW_PRIVATE}=true)")


# IPv6 ranges that carry an IPv4 address in their low 32 bits (IPv4-compatible, SIIT,
# NAT64): judged as that IPv4 address.
_EMBEDDING = tuple(
    ipaddress.IPv6Network(net) for net in ("::/96", "::ffff:0:0:0/96", "64:ff9b::/96")
)


def is_public(address: Address) -> bool:
    """A global unicast address. An IPv6 address that carries an IPv4 address (mapped,
    compatible, SIIT, NAT64, 6to4) is judged as that IPv4 address too."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour
        if embedded is None and any(address in net for net in _EMBEDDING):
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if embedded is not None and not is_public(embedded):
            return False
    return address.is_global and not address.is_multicast


def literal(host: str) -> Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]").split("%")[0])
    except ValueError:
        return None


def split_url(url: str) -> SplitResult:
    """A webhook URL's parts; UnsafeTarget if it is not an absolute http(s) URL with a host
    and no credentials."""
    if len(url) > MAX_URL_LENGTH:
        raise UnsafeTarget(f"must be at most {MAX_URL_LENGTH} characters")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (a bad port raises here)
    except ValueError:
        raise UnsafeTarget("is not a valid URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UnsafeTarget("must be an absolute http:// or https:// URL")
    if parts.username is not None or parts.password is not None:
        raise UnsafeTarget("must not carry credentials")
    if any(c.isspace() for c in url):
        raise UnsafeTarget("must not contain whitespace")
    return parts


def check_literal(host: str) -> None:
    """Refuses an IP literal that is not public, and the names reserved for loopback."""
    name = host.lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        raise PrivateTarget(f"{host} is a loopback name")
    address = literal(host)
    if address is not None and not is_public(address):
        raise PrivateTarget(f"{address} is not a public address")


async def check_url(url: str, allow_private: bool) -> None:
    """At create and update: a well-formed URL whose host is, or resolves only to, public
    addresses. A name that does not resolve now is let through (it is checked at each send)."""
    parts = split_url(url)
    if allow_private:
        return
    host = parts.hostname or ""
    check_literal(host)
    if literal(host) is not None:
        return
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(
            host, parts.port or 443, type=socket.SOCK_STREAM
        )
    except (OSError, UnicodeError):
        return
    for info in infos:
        check_literal(str(info[4][0]))


class GuardedResolver(AbstractResolver):
    """Resolves with the system's resolver and refuses the host if any address is not
    public; the addresses returned are the ones checked."""

    def __init__(self) -> None:
        self._resolver = ThreadedResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = await self._resolver.resolve(host, port, family)
        for result in found:
            address = literal(result["host"])
            if address is None or not is_public(address):
                raise PrivateTarget(f"{host} resolves to {result['host']}, not a public address")
        return found

    async def close(self) -> None:
        await self._resolver.close()


def resolver_args(allow_private: bool) -> dict[str, Any]:
    return {} if allow_private else {"resolver": GuardedResolver()}
