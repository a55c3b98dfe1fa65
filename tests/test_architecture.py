"""Module boundaries that import-linter cannot see: no kompakt module uses another's private names.

import-linter checks which modules import which (``pyproject.toml``); this checks *what* they
take. A name with a leading underscore is its module's business, so ``from kompakt.x import _y``
and ``x._y`` on an imported kompakt module are refused anywhere in ``src/kompakt``: a name that
another module needs is public, with a docstring that says what it promises (issue 20).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "kompakt"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_uses(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[str] = []
    modules: set[str] = set()  # local names bound to kompakt modules or their members
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "kompakt":
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"{node.lineno}: from {node.module} import {alias.name}")
                else:
                    modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            modules.update(
                a.asname or a.name.split(".")[0] for a in node.names if a.name.startswith("kompakt")
            )
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and _private(node.attr)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
        ):
            found.append(f"{node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_no_module_uses_another_modules_private_names() -> None:
    offenders = {
        str(path.relative_to(SRC.parent)): uses
        for path in sorted(SRC.rglob("*.py"))
        if (uses := _private_uses(path))
    }
    assert offenders == {}
