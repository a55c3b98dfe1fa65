"""Suite-wide configuration: the hypothesis profiles (see :mod:`tests.support.profiles`).

``quick`` is loaded here, before any test module is imported, so every ``@settings`` decorator
inherits it; ``pytest --hypothesis-profile=fuzz`` (``make fuzz``) replaces it when pytest configures.
"""

from __future__ import annotations

from hypothesis import settings

from tests.support import profiles

settings.load_profile("quick")

__all__ = ["profiles"]
