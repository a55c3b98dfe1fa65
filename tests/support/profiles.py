"""The suite's hypothesis profiles, and example counts that scale with the loaded one.

``quick`` (the default, what ``make test`` runs) is deterministic: derandomized, no example database,
no deadline (a numba kernel's first call compiles, and a loaded 2-core machine makes any per-example
time limit flaky) and the too-slow health check off. ``fuzz`` (``make fuzz``, or ``pytest
--hypothesis-profile=fuzz``) draws fresh random examples, ``KOMPAKT_FUZZ_EXAMPLES`` (default 1000) of
them where a test does not say, and keeps the local example database so that a failure it finds is
replayed first on the next run.

A test that needs a count of its own (a slow one fewer, a cheap one more) says it with
``@settings(max_examples=examples(n))``: ``n`` under ``quick``, scaled by the same factor as the
profile's default under ``fuzz``, so ``make fuzz`` deepens every property test, not only the
unsized ones.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

QUICK_EXAMPLES = 100
FUZZ_EXAMPLES = int(os.environ.get("KOMPAKT_FUZZ_EXAMPLES", "1000"))

settings.register_profile(
    "quick",
    max_examples=QUICK_EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "fuzz",
    max_examples=FUZZ_EXAMPLES,
    derandomize=False,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def examples(quick: int) -> int:
    """``quick`` examples under the quick profile, proportionally more under a longer one."""
    return max(1, quick * settings.default.max_examples // QUICK_EXAMPLES)
