"""`python -m app` and the `foya` console script: the CLI, started without garbage collection.

What start-up imports and builds (modules, CLI, routes, schemas) lives as long as the process
and holds no garbage: collecting meanwhile only re-scans it, ~10% of `foya serve`'s time to
listen. Commands other than `serve` turn the collector back on as they begin (`app.cli`);
`foya serve` once it listens, with start-up's objects frozen out of later collections.
"""

import gc


def main() -> None:
    gc.disable()
    from app.cli import main as cli

    cli()


if __name__ == "__main__":
    main()
