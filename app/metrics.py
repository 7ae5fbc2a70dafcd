"""Prometheus metrics in an app-owned registry (never the global default one).

`Metrics` is built once by the app factory and passed to whoever records; later layers add their
own series to the same registry.
"""

from __future__ import annotations

import platform

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from app import __version__

CONTENT_TYPE = CONTENT_TYPE_LATEST


class Metrics:
    """The service's metric series."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        Info("foya_build", "Build information.", registry=self.registry).info(
            {"version": __version__, "python": platform.python_version()}
        )
        self.requests = Counter(
            "foya_http_requests",
            "HTTP requests by method, route template and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "foya_http_request_duration_seconds",
            "HTTP request duration by method and route template.",
            ["method", "route"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10),
            registry=self.registry,
        )
        self.tokens = Counter(
            "foya_model_tokens",
            "Model tokens by model and kind (input, output, cached).",
            ["model", "kind"],
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "foya_http_requests_in_flight", "HTTP requests being served.", registry=self.registry
        )

    def render(self) -> bytes:
        """The registry in Prometheus text format."""
        return generate_latest(self.registry)
