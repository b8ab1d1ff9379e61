"""The browser's modules stay a house a newcomer can change (docs/architecture.md, static/):
each says at its top what it owns, every import names a module that is there, no two modules
import each other round a circle, and the views draw without deciding (they import no
controller: what the player's choice does is decided outside them, and handed to them)."""

from __future__ import annotations

import re
from pathlib import Path

from server.web.app import STATIC_DIR
from server.web.page_rules import PATH as ENGINE_RULES

JS = STATIC_DIR / "js"
IMPORT = re.compile(r"""^import\s[^"']*?from\s+["']([^"']+)["'];?""", re.M | re.S)
#: Modules that decide what happens (requests, routes, the wiring): never imported by views/.
CONTROLLERS = {
    "app.js",
    "games.js",
    "races.js",
    "invite.js",
    "session.js",
    "router.js",
    "friends.js",
}


def _modules() -> dict[str, list[str]]:
    """Each module (path under static/js) and the modules it imports (same form)."""
    graph: dict[str, list[str]] = {}
    for path in sorted(JS.rglob("*.js")):
        name = path.relative_to(JS).as_posix()
        imports = []
        for spec in IMPORT.findall(path.read_text(encoding="utf-8")):
            if spec.startswith("/static/"):
                target = (STATIC_DIR / spec.removeprefix("/static/")).resolve()
            else:
                assert spec.startswith("."), (name, spec)  # nothing from elsewhere
                target = (path.parent / spec).resolve()
            if target.is_relative_to(JS.resolve()):
                imports.append(target.relative_to(JS.resolve()).as_posix())
            else:
                assert target.is_file(), (name, spec)  # e.g. the translations, beside js/
        graph[name] = imports
    return graph


def test_every_module_says_what_it_owns_and_imports_what_is_there() -> None:
    graph = _modules()
    assert "app.js" in graph and "store.js" in graph and "rules.js" in graph
    served = ENGINE_RULES.removeprefix("/static/js/")
    for name, imports in graph.items():
        text = (JS / name).read_text(encoding="utf-8")
        assert text.startswith("// "), f"{name} opens without a comment saying what it owns"
        for target in imports:
            assert target in graph or target == served, (name, target)


def test_no_import_cycle_and_views_import_no_controller() -> None:
    graph = _modules()
    for name, imports in graph.items():
        if name.startswith("views/"):
            assert not CONTROLLERS & set(imports), (name, sorted(CONTROLLERS & set(imports)))
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, " → ".join((*path, name))
        if name in done:
            return
        for target in graph.get(name, []):
            visit(target, (*path, name))
        done.add(name)

    for name in graph:
        visit(name, ())


def test_the_page_loads_one_module() -> None:
    """index.html loads app.js, which loads the rest (no script of its own, no bundle)."""
    html = (STATIC_DIR / "index.html").read_text(encoding="utf-8")
    scripts = re.findall(r"<script\b[^>]*>", html)
    assert scripts == ['<script type="module" src="/static/js/app.js">'], scripts
    assert Path(JS / "app.js").is_file()
