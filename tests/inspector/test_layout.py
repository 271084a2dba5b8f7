"""Dependencies run one way, chat → tools → inspector (README, "Where things live"): read from
the source, so a new import against the direction fails here before a reviewer has to find it."""

from __future__ import annotations

import ast
from pathlib import Path

BASE = Path(__file__).resolve().parents[2]
# The project-level parts of `inspector` that gather every app: URL and WebSocket routing, the home page.
PROJECT_LEVEL = {"inspector/urls.py", "inspector/routing.py", "inspector/views.py"}


def imported_apps(path: Path) -> set[str]:
    """The first-party apps a module imports, at any depth (a function-level import counts too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else []
        found |= {n.split(".")[0] for n in names} & {"chat", "tools", "inspector"}
    return found


def modules(app: str):
    for path in sorted((BASE / app).rglob("*.py")):
        if "migrations" not in path.parts:
            yield path.relative_to(BASE).as_posix(), path


def test_tools_never_imports_chat():
    offenders = [name for name, path in modules("tools") if "chat" in imported_apps(path)]
    assert offenders == []


def test_inspector_imports_no_app_outside_its_project_level_modules():
    offenders = {name: sorted(imported_apps(path) - {"inspector"}) for name, path in modules("inspector")
                 if name not in PROJECT_LEVEL and imported_apps(path) - {"inspector"}}
    assert offenders == {}
