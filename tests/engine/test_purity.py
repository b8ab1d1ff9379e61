"""The engine is pure: it imports only the standard library and nothing of ours but itself."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import server.engine

ENGINE_DIR = Path(server.engine.__file__).parent
FORBIDDEN = {"asyncio", "time", "datetime", "socket", "os", "io", "random", "sqlite3", "logging"}


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_engine_modules_import_only_the_standard_library_and_the_engine() -> None:
    files = sorted(ENGINE_DIR.glob("*.py"))
    assert files
    for path in files:
        for name in imported_modules(path):
            top = name.split(".")[0]
            if name.startswith("server."):
                assert name.startswith("server.engine"), (path.name, name)
                continue
            assert top in sys.stdlib_module_names, (path.name, name)
            assert top not in FORBIDDEN, (path.name, name)
