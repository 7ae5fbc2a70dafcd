"""`python -m app` runs the same CLI as the `foya` console script."""

from app.cli import main

main()
