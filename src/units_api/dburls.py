"""Database URLs: the forms `UNITS_API_DATABASE_URL` and the replica URLs may take, read into
one SQLAlchemy URL, and written back as asyncpg takes them.

A PostgreSQL URL may name several hosts, as libpq does, for failover:
`postgresql://u@h1:5432,h2:5432/db?target_session_attrs=read-write`, or in the query:
`?host=h1,h2&port=5432,5433` or `?host=h1:5432&host=h2:5433`. Each is read into SQLAlchemy's
own form (`?host=h1:5432&host=h2:5433`, every host with its port), which its asyncpg dialect
passes on as lists; `driver_dsn` writes libpq's form back for asyncpg's own connections (the
fast pool, LISTEN, COPY, the checks). A connection then goes to the first host that answers
and is what `target_session_attrs` asks for (`read-write`: the primary).
"""

from __future__ import annotations

import re
from urllib.parse import quote, urlencode

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

DEFAULT_PORT = 5432
# What asyncpg (like libpq) takes for `target_session_attrs`.
SESSION_ATTRS = ("any", "primary", "standby", "prefer-standby", "read-write", "read-only")
# The hosts part of a URL: between `//` (and any `user@`) and the path or query.
_NETLOC = re.compile(r"^(?P<head>[a-zA-Z][a-zA-Z0-9+.-]*://(?:[^@/?#]*@)?)(?P<hosts>[^/?#]*)")
# A host of a list, with an optional port: a name or an IPv4 address.
_HOST_PORT = re.compile(r"^(?P<host>[^:\[\],/]+)(?::(?P<port>[^:]*))?$")
# Between URLs of a comma list: a comma followed by the next URL's scheme.
_NEXT_URL = re.compile(r",\s*(?=[a-zA-Z][a-zA-Z0-9+.-]*://)")


def parse(value: str) -> URL:
    """`value` as one SQLAlchemy URL; ValueError, saying what is wrong, when it cannot be."""
    netloc = _NETLOC.match(value)
    hosts: list[tuple[str, int]] = []
    if netloc and "," in netloc["hosts"]:
        hosts = [_host_port(part, DEFAULT_PORT) for part in netloc["hosts"].split(",")]
        value = f"{netloc['head']}{value[netloc.end() :]}"
    try:
        url = make_url(value)
    except (ArgumentError, ValueError):
        raise ValueError(
            "must be a URL such as sqlite:///path.db or postgresql://user@host:5432/db"
        ) from None
    if url.get_backend_name() != "postgresql":
        return url
    if hosts and ("host" in url.query or "port" in url.query):
        raise ValueError("names hosts both before the database and in ?host=; use one form")
    hosts = hosts or _query_hosts(url)
    _check_session_attrs(url)
    if not hosts:
        return url
    query = {name: v for name, v in url.query.items() if name not in ("host", "port")}
    query["host"] = tuple(f"{host}:{port}" for host, port in hosts)
    return url.set(host=None, port=None, query=query)


def hosts(url: URL) -> list[tuple[str, int]]:
    """The hosts a parsed PostgreSQL URL names, each with its port."""
    listed = url.query.get("host")
    if isinstance(listed, tuple):
        return [_host_port(item, DEFAULT_PORT) for item in listed]
    return [(url.host or "localhost", url.port or DEFAULT_PORT)]


def where(url: URL) -> str:
    """The hosts of a parsed PostgreSQL URL as a message names them: `h1:5432,h2:5433`."""
    return ",".join(f"{host}:{port}" for host, port in hosts(url))


def driver_dsn(url: URL | str, hide_password: bool = False) -> str:
    """A PostgreSQL URL as asyncpg takes it: libpq's form, several hosts before the path
    (`hide_password`: as a message or log may show it)."""
    parsed = parse(url) if isinstance(url, str) else url
    listed = parsed.query.get("host")
    if not isinstance(listed, tuple):
        plain = parsed.set(drivername="postgresql")
        return plain.render_as_string(hide_password=hide_password)
    userinfo = ""
    if parsed.username:
        userinfo = quote(parsed.username, safe="")
        if parsed.password is not None:
            userinfo += ":" + ("***" if hide_password else quote(str(parsed.password), safe=""))
        userinfo += "@"
    netloc = ",".join(f"{host}:{port}" for host, port in hosts(parsed))
    rest = [(name, v) for name, v in parsed.query.items() if name != "host"]
    query = f"?{urlencode(rest, doseq=True)}" if rest else ""
    return f"postgresql://{userinfo}{netloc}/{quote(parsed.database or '')}{query}"


def split(value: str) -> tuple[str, ...]:
    """A comma list of URLs, each of which may itself hold commas (several hosts)."""
    return tuple(url.strip() for url in _NEXT_URL.split(value) if url.strip(" ,"))


def _query_hosts(url: URL) -> list[tuple[str, int]]:
    """The hosts of `?host=h1,h2&port=p1,p2` or `?host=h1:p1&host=h2:p2`, when several."""
    given = url.query.get("host")
    ports = url.query.get("port")
    names = list(given) if isinstance(given, tuple) else (given or "").split(",")
    if len(names) < 2 and not isinstance(given, tuple):
        return []
    if isinstance(ports, tuple):
        raise ValueError("gives ?port= more than once; give one comma list")
    port_list = ports.split(",") if ports else []
    if port_list and any(":" in name for name in names):
        raise ValueError("gives ports both in ?host= and ?port=; use one form")
    if port_list and len(port_list) not in (1, len(names)):
        raise ValueError(f"names {len(names)} hosts but {len(port_list)} ports")
    found = []
    for number, name in enumerate(names):
        port = port_list[number if len(port_list) > 1 else 0] if port_list else None
        text = f"{name}:{port}" if port is not None else name
        found.append(_host_port(text, url.port or DEFAULT_PORT))
    return found


def _host_port(text: str, default: int) -> tuple[str, int]:
    match = _HOST_PORT.match(text.strip())
    if match is None or not match["host"].strip():
        raise ValueError(
            f"has a host list with an empty or malformed host ({text!r}; a list takes"
            " names or IPv4 addresses, each with an optional :port)"
        )
    port = match["port"]
    if port is None or port == "":
        return match["host"], default
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"has a host with a port that is not a number from 1 to 65535 ({text!r})")
    return match["host"], int(port)


def _check_session_attrs(url: URL) -> None:
    value = url.query.get("target_session_attrs")
    if value is None:
        return
    if isinstance(value, tuple) or value not in SESSION_ATTRS:
        shown = ", ".join(SESSION_ATTRS)
        raise ValueError(f"target_session_attrs must be one of {shown} (got {value!r})")
