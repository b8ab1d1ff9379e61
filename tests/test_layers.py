"""What the layers above storage may know of the database: no SQLAlchemy error is named outside
``server/storage`` (storage raises only StorageError), and the services whose queries have
moved into their stores import nothing of SQLAlchemy or the driver."""

from __future__ import annotations

import ast
from pathlib import Path

import server

SERVER = Path(server.__file__).parent
#: Outside storage these are never caught nor named: storage translates them once.
DRIVER_ERRORS = {
    "SQLAlchemyError",
    "DBAPIError",
    "IntegrityError",
    "OperationalError",
    "InterfaceError",
    "PostgresError",
    "InternalClientError",
    "ConnectionDoesNotExistError",
}
#: Modules whose queries live in ``server/storage`` (one store per aggregate), so that they
#: import nothing of SQLAlchemy or asyncpg (a room operation's transaction is storage's opaque
#: ``Transaction``). The list grows as ``services/__init__.py`` and ``web/`` follow.
WITHOUT_SQL = [
    "services/players.py",
    "services/daily.py",
    "services/leaderboards.py",
    "services/moderation.py",
    "services/bans.py",
    "services/review.py",
    "services/addresses.py",
    "services/friends.py",
    "services/profiles.py",
    "services/games.py",
    "services/races.py",
    "services/room_presence.py",
    "services/presence.py",
]
#: Storage modules that state a store's contract and rows apart from its PostgreSQL class (in
#: the ``*_postgres.py`` module beside them), so that they name nothing of SQLAlchemy or asyncpg.
CONTRACTS_APART = {
    "storage/races.py": "storage/races_postgres.py",
    "storage/presence.py": "storage/presence_postgres.py",
}


def _imports(tree: ast.AST) -> list[tuple[str, list[str]]]:
    """Every absolute import of a module: the module and the names taken from it."""
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, [alias.name for alias in node.names]))
    return found


#: Outside the server's layers: the load generator and the failover harness (``server/bench``)
#: are clients of the databases they set up (a pg_auto_failover monitor, a throw-away database),
#: not parts of the server, and read them with the driver directly.
OUTSIDE_THE_LAYERS = {"storage", "bench"}


def test_no_module_outside_storage_names_a_database_error() -> None:
    paths = sorted(
        p for p in SERVER.rglob("*.py") if not OUTSIDE_THE_LAYERS & set(p.relative_to(SERVER).parts)
    )
    assert any(p.parent.name == "services" for p in paths)
    assert any(p.parent.name == "web" for p in paths)
    for path in paths:
        where = path.relative_to(SERVER)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for module, names in _imports(tree):
            assert module.split(".")[:2] != ["sqlalchemy", "exc"], (where, module)
            assert module.split(".")[:2] != ["asyncpg", "exceptions"], (where, module)
            assert not DRIVER_ERRORS & set(names), (where, module, names)
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                assert node.id not in DRIVER_ERRORS, (where, node.lineno, node.id)
            elif isinstance(node, ast.Attribute):
                assert node.attr not in DRIVER_ERRORS, (where, node.lineno, node.attr)


def test_services_split_into_stores_import_nothing_of_sqlalchemy_or_the_driver() -> None:
    for name in WITHOUT_SQL:
        path = SERVER / name
        assert path.is_file(), name
        for module, _ in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            assert module.split(".")[0] not in ("sqlalchemy", "asyncpg"), (name, module)


def test_store_contracts_kept_apart_import_nothing_of_sqlalchemy_or_the_driver() -> None:
    for name, postgres in CONTRACTS_APART.items():
        path = SERVER / name
        assert (SERVER / postgres).is_file(), postgres
        for module, _ in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            assert module.split(".")[0] not in ("sqlalchemy", "asyncpg"), (name, module)


def _module_name(path: Path) -> str:
    parts = ["server", *path.relative_to(SERVER).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_two_storage_modules_import_each_other() -> None:
    """Counting imports made only for the type checker: a module that needs a type of another
    which imports it holds the type itself, or both take it from a third."""
    modules = {_module_name(path): path for path in (SERVER / "storage").rglob("*.py")}
    imports: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for module, names in _imports(ast.parse(path.read_text())):
            found.add(module)
            found.update(f"{module}.{imported}" for imported in names)
        imports[name] = found & set(modules) - {name}
    mutual = sorted(
        (a, b) for a, theirs in imports.items() for b in theirs if a < b and a in imports[b]
    )
    assert not mutual, mutual
