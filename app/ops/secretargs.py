"""One rule for every `foya` flag or argument that can carry a secret: never as a literal.

A process's arguments are world-readable (`ps`, `/proc/<pid>/cmdline`) for as long as it runs,
and they land in the shell's history; its environment (`/proc/<pid>/environ`) and a 0600 file
are its owner's only, and stdin is nobody else's. So a command refuses (one line on stderr,
exit 2) a secret it was handed as a literal and names the safe channel instead:

- `check_literal`: a value that is always a secret (a passphrase, an API key) is accepted only
  as `-`, which reads it from stdin (`read_stdin`); its environment variable, where it has one,
  is read by the command itself.
- `check_url`: a URL is refused when it holds a password (`user:PASSWORD@host`) or a query
  parameter named like a credential (`?token=…`, `?sig=…`, `?access_key=…`).

`mask_url` is the same rule for messages and logs: it shows such a URL with `***` in place of
each secret. Imports nothing but the standard library and typer (the CLI's start-up budget).
"""

from __future__ import annotations

import re
import sys
from typing import NoReturn
from urllib.parse import SplitResult, parse_qsl, urlencode, urlsplit, urlunsplit

import typer

STDIN = "-"
EXIT_CONFIG = 2
SEEN_BY_ALL = "any local user can read a command line (ps, /proc/PID/cmdline)"
# Query parameters that carry a credential, by name (lower case, `-` read as `_`): these names,
# and any name with one of the words (`client_secret`, `x_amz_signature`, `secret_access_key`).
_SECRET_NAMES = frozenset({"pwd", "pass", "key", "access_key", "sig", "sas", "auth", "credential"})
_SECRET_WORDS = ("password", "passwd", "secret", "token", "signature", "apikey", "api_key")
# What urlsplit cannot parse (a bad IPv6 host) may still hold `user:password@`.
_RAW_PASSWORD = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/?#@]*:[^/?#@]*@")


def _refuse(flag: str, what: str, instead: str) -> NoReturn:
    typer.echo(f"foya: {flag}: refused {what}: {SEEN_BY_ALL}; {instead}", err=True)
    raise typer.Exit(EXIT_CONFIG)


def is_secret_name(name: str) -> bool:
    """Whether a query parameter called `name` carries a credential."""
    key = name.strip().lower().replace("-", "_")
    return key in _SECRET_NAMES or any(word in key for word in _SECRET_WORDS)


def _split(url: str) -> SplitResult | None:
    try:
        parts = urlsplit(url)
        parts.password  # noqa: B018 (parses the netloc: a bad one raises here)
    except ValueError:
        return None
    return parts


def secret_in_url(url: str) -> str | None:
    """What in `url` is a secret ("a password in the URL", "the URL's 'token' parameter"), or
    None when it holds none."""
    parts = _split(url)
    if parts is None:
        return "a password in the URL" if _RAW_PASSWORD.match(url) else None
    if parts.password:
        return "a password in the URL"
    for name, _ in parse_qsl(parts.query, keep_blank_values=True):
        if is_secret_name(name):
            return f"the URL's {name!r} parameter"
    return None


def mask_url(url: str) -> str:
    """`url` with `***` for its password and each credential parameter's value."""
    parts = _split(url)
    if parts is None:
        return _RAW_PASSWORD.sub(lambda m: m[0].split("://", 1)[0] + "://***@", url)
    if parts.password is not None:
        host = parts.netloc.rpartition("@")[2]
        parts = parts._replace(netloc=f"{parts.username}:***@{host}")
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    if any(is_secret_name(name) for name, _ in pairs):
        masked = [(n, "***" if is_secret_name(n) else v) for n, v in pairs]
        parts = parts._replace(query=urlencode(masked, safe="*"))
    return urlunsplit(parts)


def check_url(value: str | None, flag: str, instead: str) -> None:
    """Refuse (exit 2) a URL given as `flag` that holds a secret; `instead` says what to do."""
    if value is None or value == STDIN:
        return
    what = secret_in_url(value)
    if what is not None:
        _refuse(flag, what, instead)


def check_literal(value: str | None, flag: str, instead: str) -> None:
    """Refuse (exit 2) a secret given as `flag` itself: only `-` (read stdin) is accepted."""
    if value is not None and value != STDIN:
        _refuse(flag, "a secret given on the command line", instead)


def read_stdin(flag: str) -> str:
    """The one line `flag -` stands for, from stdin (exit 2 if there is none)."""
    line = sys.stdin.readline().strip()
    if not line:
        typer.echo(f"foya: {flag} -: nothing on stdin", err=True)
        raise typer.Exit(EXIT_CONFIG)
    return line
