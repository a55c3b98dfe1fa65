"""``kompakt serve`` loads only what accepting connections needs; the rest loads on first use.

Start time is mostly import time. numpy (first Produce, Fetch or index read), prometheus_client
(first ``/metrics`` scrape), the log map's explain engine (first map request), crc32c (first
checksum; its package imports importlib.metadata), h11 (first admin request), re2 (the first
client regex) and typer (any command line but a plain ``kompakt serve``) stay out of the start
path; this test keeps a refactoring from pulling them back in unnoticed.
"""

from __future__ import annotations

import json
import subprocess
import sys

DEFERRED = (
    "numpy",
    "numba",
    "prometheus_client",
    "kompakt.server.admin_metrics",
    "kompakt.server.web.live",
    "kompakt.inspect.explain_report",
    "kompakt.cleaner.kernels",
    "kompakt.records.scan",
    "kompakt.records.native",
    "typer",
    "click",
    "rich",
    "crc32c",
    "importlib.metadata",
    "h11",
    "re2",
)


def test_serve_start_path_does_not_import_deferred_modules() -> None:
    code = (
        "import json, sys\n"
        "import kompakt.cli.main, kompakt.cli.serve, kompakt.server.app\n"
        f"print(json.dumps([m for m in {list(DEFERRED)!r} if m in sys.modules]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(result.stdout) == []
