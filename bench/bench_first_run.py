"""The first compaction after ``pip install`` on a fresh venv (issue 17): a benchmark, not a test.

The wheel build compiles the kernels ahead of time (``hatch_build.py``); before that, numba
compiled them on first use. This measures what a new user sees. For each source tree given
(default: this one) it

1. creates a fresh venv and ``pip install``s the tree (a wheel build, not editable, so numba's
   cache lands in the venv's ``site-packages`` as it does for a user);
2. starts ``kompakt serve`` on free ports and times ``kompakt ready``;
3. creates a compacted topic, produces 2,000 keyed records, rolls, and times ``kompakt admin
   compact`` right away (``immediate``: with JIT-only kernels the broker is still compiling in
   the background then and the clean waits for it) and, on a second topic, after the background compile
   has finished (``after_warmup``); with ``--idle-first`` the first compaction itself comes after
   that wait (``after_idle``: what a user sees who starts the broker and writes for a while).

Run ``python bench/bench_first_run.py --source /path/to/main`` to measure a tree from before the
change. Needs network or a pip cache for kompakt's dependencies; takes a few minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
READY = re.compile(r"listening on [^:]+:(?P<port>\d+),.*admin (?P<admin>http://\S+)")


def _run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload, no-any-return]


def measure(
    source: Path, root: Path, after_warmup_wait_s: float, idle_first: bool = False, warmup: bool = False
) -> dict[str, object]:
    venv = root / "venv"
    started = time.monotonic()
    _run([sys.executable, "-m", "venv", str(venv)])
    _run([str(venv / "bin" / "pip"), "install", "--quiet", str(source)])
    install_s = time.monotonic() - started
    kompakt = str(venv / "bin" / "kompakt")
    warmup_s = None
    if warmup:
        started = time.monotonic()
        _run([kompakt, "warmup"])
        warmup_s = round(time.monotonic() - started, 1)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    started = time.monotonic()
    broker = subprocess.Popen(
        [kompakt, "serve", "--data-dir", str(root / "data"), "--port", "0", "--admin-port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert broker.stdout is not None
    line = broker.stdout.readline()
    ready_s = time.monotonic() - started
    match = READY.search(line)
    assert match, line
    bootstrap, admin = f"127.0.0.1:{match['port']}", match["admin"]
    result: dict[str, object] = {
        "source": str(source),
        "install_s": round(install_s, 1),
        "warmup_s": warmup_s,
        "ready_s": round(ready_s, 3),
    }
    try:
        plan = (
            [("after_idle", after_warmup_wait_s)]
            if idle_first
            else [("immediate", 0.0), ("after_warmup", after_warmup_wait_s)]
        )
        for label, wait_s in plan:
            topic = f"first-run-{label}"
            _run(
                [
                    kompakt,
                    "topic",
                    "create",
                    topic,
                    "--config",
                    "cleanup.policy=compact",
                    "--bootstrap",
                    bootstrap,
                ]
            )
            lines = "".join(f"k{i % 200}:v{i}\n" for i in range(2000))
            _run([kompakt, "produce", topic, "-K", ":", "--bootstrap", bootstrap], input=lines)
            _run([kompakt, "admin", "roll", topic, "--admin-url", admin])
            time.sleep(wait_s)
            started = time.monotonic()
            done = _run([kompakt, "admin", "compact", topic, "--admin-url", admin, "-o", "json"], env=env)
            result[f"{label}_compact_s"] = round(time.monotonic() - started, 2)
            stats = json.loads(done.stdout)
            result[f"{label}_clean_s"] = [round(p["seconds"], 3) for p in stats["partitions"]]
    finally:
        broker.terminate()
        broker.wait(30)
    # A bare CLI round trip, to separate the command's own start-up from the clean.
    started = time.monotonic()
    _run([kompakt, "--version"])
    result["cli_start_s"] = round(time.monotonic() - started, 2)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", action="append", type=Path, help="A kompakt source tree (repeatable).")
    parser.add_argument(
        "--after-warmup-wait", type=float, default=45.0, help="Seconds before the second clean."
    )
    parser.add_argument(
        "--idle-first",
        action="store_true",
        help="Make the first compaction come after --after-warmup-wait seconds of idle broker.",
    )
    parser.add_argument("--warmup", action="store_true", help="Run `kompakt warmup` after installing.")
    args = parser.parse_args()
    results = []
    for source in args.source or [ROOT]:
        with tempfile.TemporaryDirectory(prefix="kompakt-first-run-") as tmp:
            results.append(
                measure(source.resolve(), Path(tmp), args.after_warmup_wait, args.idle_first, args.warmup)
            )
    print(json.dumps({"first_run": results}))  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main())
