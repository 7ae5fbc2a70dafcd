"""Benchmarks of the kernel: run each from the repository root as `python -m bench.NAME`.

`harness` (processes, the kernel child, SSE, CPU), `report` (results and the table of figures
beside their targets), `profiles` (py-spy and cProfile summaries) and `fakes` (the tests' fake
provider) are shared; every other module is one benchmark. See bench/README.md.
"""
