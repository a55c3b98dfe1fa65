"""Per-API request counts and latency histograms, recorded by the connections of the listener.

Kafka exposes these as ``kafka.network:type=RequestMetrics,name=RequestsPerSec|TotalTimeMs,
request=<Api>``. kompakt counts every request it decoded, per API name (Kafka's spelling, e.g.
``Produce``, ``JoinGroup``), with the time from the frame being decoded to the response being
handed to the socket; a parked Fetch or JoinGroup counts its wait, as in Kafka's TotalTimeMs.
The buckets are fixed so a snapshot is a handful of integers per API and the recording cost on the
request path is one lock and one bisect.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass, field

#: Upper bounds in seconds (``+Inf`` is implicit), from sub-millisecond metadata calls to long polls.
LATENCY_BUCKETS_S: tuple[float, ...] = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)


def kafka_request_name(snake_name: str) -> str:
    """``"join_group"`` -> ``"JoinGroup"``: the ``request=`` tag Kafka's RequestMetrics carry."""
    return "".join(part.capitalize() for part in snake_name.split("_"))


@dataclass(slots=True)
class ApiStats:
    """Counters of one API; ``buckets[i]`` counts latencies ``<= LATENCY_BUCKETS_S[i]`` (not cumulative),
    the last slot counts the rest."""

    count: int = 0
    errors: int = 0
    sum_s: float = 0.0
    buckets: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS_S) + 1))

    def copy(self) -> ApiStats:
        return ApiStats(self.count, self.errors, self.sum_s, list(self.buckets))


class RequestMetrics:
    """Thread-safe request statistics by API name."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._apis: dict[str, ApiStats] = {}

    def record(self, api: str, seconds: float, *, failed: bool = False) -> None:
        """One finished request of ``api`` that took ``seconds`` (``failed``: the handler raised)."""
        slot = bisect.bisect_left(LATENCY_BUCKETS_S, seconds)
        with self._lock:
            stats = self._apis.get(api)
            if stats is None:
                stats = self._apis[api] = ApiStats()
            stats.count += 1
            stats.sum_s += seconds
            stats.buckets[slot] += 1
            if failed:
                stats.errors += 1

    def snapshot(self) -> dict[str, ApiStats]:
        """A consistent copy, by API name."""
        with self._lock:
            return {api: stats.copy() for api, stats in self._apis.items()}
