"""Run every benchmark in bench/ and print one JSON document.

Each benchmark is a script that prints a JSON object at the end of its stdout; it runs in its own
process so page cache, JIT and allocator state do not leak between them. Figures are only
meaningful next to the baseline each script measures in the same run (these machines are noisy).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BENCHES: list[str | tuple[str, str, dict[str, str]]] = [
    "bench_log.py",
    "bench_kernels.py",
    # The same kernels through numba's JIT (tuned for this CPU) against the precompiled ones above
    # (generic x86-64, what a wheel install runs).
    ("bench_kernels_jit", "bench_kernels.py", {"KOMPAKT_KERNELS": "jit"}),
    "bench_cleaner.py",
    "bench_broker.py",
    "bench_tls.py",
    "bench_recovery.py",
    "bench_backup.py",
    "bench_protocol.py",
    "bench_transactions.py",
    "bench_table.py",
    "bench_throttle.py",
    "bench_readers.py",
    "bench_connections.py",
    "bench_sasl.py",
    "bench_replay_check.py",
]


def _last_json(stdout: str) -> object:
    """The benchmark's JSON: its last line, or the whole output when it is pretty-printed."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    try:
        return json.loads(lines[-1])
    except json.JSONDecodeError:
        start = stdout.rfind("\n{")
        return json.loads(stdout[start + 1 :] if start >= 0 else stdout)


def main() -> int:
    here = Path(__file__).parent
    results: dict[str, object] = {}
    failed = False
    for bench in BENCHES:
        label, name, env = (bench.removesuffix(".py"), bench, {}) if isinstance(bench, str) else bench
        script = here / name
        if not script.exists():
            continue
        proc = subprocess.run(
            [sys.executable, str(script), *sys.argv[1:]],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, **env},
        )
        lines = [line for line in proc.stdout.splitlines() if line.strip()]
        if proc.returncode != 0 or not lines:
            results[label] = {"error": proc.stderr.strip().splitlines()[-5:]}
            failed = True
            continue
        results[label] = _last_json(proc.stdout)
    print(json.dumps(results, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
