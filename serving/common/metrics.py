"""Prometheus metrics of a serving replica: requests, time to first token, tokens per second."""

from __future__ import annotations

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

_TTFT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_TPS_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)


class Metrics:
    """One registry per app, so several apps in one process (tests) do not collide."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self, model: str) -> None:
        self.registry = CollectorRegistry()
        self.model = model
        self.requests = Counter(
            "llmctl_requests",
            "Requests answered, by route and HTTP status.",
            ["model", "route", "status"],
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "llmctl_requests_in_flight", "Requests being generated.", ["model"], registry=self.registry
        )
        self.ttft = Histogram(
            "llmctl_time_to_first_token_seconds",
            "Time from request to first generated token.",
            ["model"],
            buckets=_TTFT_BUCKETS,
            registry=self.registry,
        )
        self.tokens_per_second = Histogram(
            "llmctl_output_tokens_per_second",
            "Decode speed of each request (after the first token).",
            ["model"],
            buckets=_TPS_BUCKETS,
            registry=self.registry,
        )
        self.tokens = Counter(
            "llmctl_tokens", "Prompt and generated tokens.", ["model", "kind"], registry=self.registry
        )
        self.slots_in_use = Gauge(
            "llmctl_slots_in_use",
            "Generation requests admitted (holding a slot until their response ends).",
            ["model"],
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "llmctl_queue_depth", "Requests waiting for a slot.", ["model"], registry=self.registry
        )
        self.rejections = Counter(
            "llmctl_requests_rejected",
            "Requests refused before any work: too_large (413), queue_full (429), draining (503).",
            ["model", "reason", "status"],
            registry=self.registry,
        )
        self.draining = Gauge(
            "llmctl_draining", "1 once the replica drains (stopping).", ["model"], registry=self.registry
        )

    def request(self, route: str, status: int) -> None:
        """Count one answered request."""
        self.requests.labels(self.model, route, str(status)).inc()

    def rejected(self, route: str, status: int, reason: str) -> None:
        """Count one request refused by the overload guard."""
        self.request(route, status)
        self.rejections.labels(self.model, reason, str(status)).inc()

    def generation(self, ttft_s: float | None, decode_s: float, prompt: int, completion: int) -> None:
        """Record one finished generation."""
        if ttft_s is not None:
            self.ttft.labels(self.model).observe(ttft_s)
        if completion > 1 and decode_s > 0:
            self.tokens_per_second.labels(self.model).observe((completion - 1) / decode_s)
        self.tokens.labels(self.model, "prompt").inc(prompt)
        self.tokens.labels(self.model, "completion").inc(completion)

    def render(self) -> bytes:
        """The text exposition format."""
        return generate_latest(self.registry)
