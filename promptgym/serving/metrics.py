"""``/metrics``: Prometheus text for the server (requests, latency, LM calls, tokens, dollars, failures).

Each app has its own registry (prometheus_client), so two servers or tests in one process
never mix their counts::

    metrics = ServingMetrics()
    metrics.observe(program="qa", route="predict", status=200, seconds=0.12, usage=usage)
    metrics.render()   # (bytes, content type)
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from promptgym.lm.usage import Usage

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class ServingMetrics:
    """The server's counters; ``program`` is the served program (or model) name, ``route`` the endpoint kind."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        labels = ("program", "route")
        self.requests = Counter("promptgym_requests_total", "Requests answered, by program, route and HTTP status.",
                                (*labels, "status"), registry=self.registry)
        self.latency = Histogram("promptgym_request_seconds", "Time to answer a request (seconds).", labels,
                                 buckets=LATENCY_BUCKETS, registry=self.registry)
        self.lm_calls = Counter("promptgym_lm_calls_total", "Language-model calls made for requests "
                                "(cache hits included).", labels, registry=self.registry)
        self.tokens = Counter("promptgym_tokens_total", "Tokens of those calls, by kind (prompt, completion).",
                              (*labels, "kind"), registry=self.registry)
        self.cost = Counter("promptgym_cost_usd_total", "Dollars those calls cost, from each model's price "
                            "(cache hits cost nothing; see docs/cost.md).", labels, registry=self.registry)
        self.saved = Counter("promptgym_saved_usd_total", "Dollars the response cache saved (what its hits would "
                             "have cost).", labels, registry=self.registry)
        self.unpriced = Counter("promptgym_unpriced_calls_total", "Calls of models with no known price: their "
                                "dollars are not in promptgym_cost_usd_total.", labels, registry=self.registry)
        self.failures = Counter("promptgym_failures_total", "Requests that failed, by reason "
                                "(invalid_input, model_error, no_output, internal, busy, unauthorized).",
                                ("program", "reason"), registry=self.registry)
        self.in_flight = Gauge("promptgym_requests_in_flight", "Requests running or waiting for a slot.",
                               registry=self.registry)
        self.traces_lost = Gauge("promptgym_traces_lost", "Traces of answered calls the trace store could not "
                                 "keep (serve --record: a full disk, a broken store).", registry=self.registry)

    def observe(self, program: str, route: str, status: int, seconds: float, usage: Usage | None = None) -> None:
        self.requests.labels(program, route, str(status)).inc()
        self.latency.labels(program, route).observe(seconds)
        if usage is not None and usage.calls:
            self.lm_calls.labels(program, route).inc(usage.calls)
            self.tokens.labels(program, route, "prompt").inc(usage.prompt_tokens)
            self.tokens.labels(program, route, "completion").inc(usage.completion_tokens)
            self.cost.labels(program, route).inc(max(0.0, usage.cost_usd))
            self.saved.labels(program, route).inc(max(0.0, usage.saved_usd))
            self.unpriced.labels(program, route).inc(usage.unpriced_calls)

    def failed(self, program: str, reason: str) -> None:
        self.failures.labels(program, reason).inc()

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


def sample_value(metrics: ServingMetrics, name: str, **labels: Any) -> float:
    """One sample's value (0 when absent), for tests and the benchmark."""
    value = metrics.registry.get_sample_value(name, {key: str(item) for key, item in labels.items()})
    return float(value or 0.0)
