"""A few process-local Prometheus counters, kept without a dependency."""

from __future__ import annotations

from collections import Counter, defaultdict

_requests: Counter[tuple[str, str]] = Counter()
_durations: defaultdict[str, float] = defaultdict(float)


def observe(method: str, status: int, seconds: float) -> None:
    _requests[(method, f"{status // 100}xx")] += 1
    _durations[method] += seconds


def render_metrics() -> str:
    lines = [
        "# HELP units_api_requests_total HTTP requests answered, by method and status class.",
        "# TYPE units_api_requests_total counter",
    ]
    lines += [
        f'units_api_requests_total{{method="{m}",status="{s}"}} {n}'
        for (m, s), n in sorted(_requests.items())
    ]
    lines += [
        "# HELP units_api_request_seconds_sum Time spent answering, by method.",
        "# TYPE units_api_request_seconds_sum counter",
    ]
    lines += [
        f'units_api_request_seconds_sum{{method="{m}"}} {v:.6f}'
        for m, v in sorted(_durations.items())
    ]
    return "\n".join(lines) + "\n"
