"""The log map page: one self-contained HTML file (inline CSS and JavaScript, no external requests).

Served live by the admin endpoint at ``GET /`` (the page then polls ``/v1/map``), or written with
its data embedded by ``kompakt log explain PATH --html FILE`` (:func:`static_page`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from kompakt.inspect.explain_report import PartitionExplain, PartitionSource

PAGE_RESOURCE: Final = "index.html"
#: The page reads its data from this element; ``null`` means "live: poll the admin endpoint".
DATA_PLACEHOLDER: Final = '<script id="kompakt-map-data" type="application/json">null</script>'


def page_html() -> str:
    """The page as the broker serves it (no data embedded)."""
    return resources.files(__package__).joinpath(PAGE_RESOURCE).read_text(encoding="utf-8")


def embed_json(data: Mapping[str, Any]) -> str:
    """JSON safe inside a ``<script>`` element (no ``</script>``, ``<!--`` or ``&`` sequences)."""
    text = json.dumps(data, default=str, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def static_page(data: Mapping[str, Any]) -> str:
    """The page with ``data`` (a map from :func:`kompakt.inspect.log_map.build_map`) embedded."""
    page = page_html()
    if DATA_PLACEHOLDER not in page:
        raise RuntimeError("the log map page has no data placeholder")
    embedded = f'<script id="kompakt-map-data" type="application/json">{embed_json(data)}</script>'
    return page.replace(DATA_PLACEHOLDER, embedded, 1)


def export_page(pairs: Sequence[tuple[PartitionExplain, PartitionSource]], now_ms: int, where: str) -> str:
    """The static log map of explained partitions (``kompakt log explain PATH --html FILE``):
    every partition's report and per-segment tombstones, embedded in :func:`static_page`."""
    from kompakt.inspect.log_map import build_map, partition_entry, segment_tombstones

    entries = [
        partition_entry(report.to_dict(), tombstones_by_segment=segment_tombstones(source))
        for report, source in pairs
    ]
    return static_page(build_map(entries, now_ms, source="static", title=f"kompakt log map of {where}"))
