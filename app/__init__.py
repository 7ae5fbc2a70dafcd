"""Foya: a self-hosted, single-tenant agent kernel."""

from functools import cache


@cache
def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("foya")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0.0.0"


def __getattr__(name: str) -> str:
    # `app.__version__`, read on first use: importlib.metadata costs ~18 ms, and every command
    # (`foya --help` included) imports this package.
    if name == "__version__":
        return _version()
    raise AttributeError(name)
