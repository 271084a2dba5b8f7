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


# --- tools/ in three layers (README, "tools/ in three layers") -------------------------------------

def first_party_imports(path: Path, *, skip_type_checking: bool = True) -> set[str]:
    """The first-party modules a file imports (dotted, as written), at any depth; imports under
    `if TYPE_CHECKING:` are annotations, not dependencies, and are left out."""
    tree = ast.parse(path.read_text(), filename=str(path))
    skipped = set()
    if skip_type_checking:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                skipped |= {id(n) for child in node.body for n in ast.walk(child)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    packages = {"chat", "tools", "inspector", "tools.mcp", "tools.runtime"}  # (`from tools import x` names x)
    return {name for name in found if name.split(".")[0] in ("chat", "tools", "inspector") and name not in packages}


def module_name(relative: str) -> str:
    return relative[:-3].replace("/", ".").removesuffix(".__init__")


def test_the_mcp_client_is_django_free_and_imports_nothing_above_it():
    offenders = {}
    for name, path in modules("tools/mcp"):
        text = path.read_text()
        above = {m for m in first_party_imports(path) if not m.startswith("tools.mcp")}
        if above or "import django" in text or "from django" in text:
            offenders[name] = sorted(above) or ["django"]
    assert offenders == {}


def test_the_runtime_never_imports_the_web_layer():
    # Below the runtime: the client, and the data both floors above it share (the models, who
    # started a call, the signals tools sends to the apps above it).
    allowed = ("tools.mcp", "tools.runtime", "tools.models", "tools.callers", "tools.signals", "inspector")
    offenders = {name: sorted(m for m in first_party_imports(path) if not m.startswith(allowed))
                 for name, path in modules("tools/runtime")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_no_import_circle_in_tools():
    """Strongly connected modules (Tarjan) over every import, function-level ones included."""
    names = {module_name(rel): path for rel, path in modules("tools")}

    def resolve(dotted: str) -> str | None:
        while dotted and dotted not in names:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    graph = {m: {t for t in map(resolve, first_party_imports(p)) if t and t != m} for m, p in names.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for v in graph:
        if v not in index:
            visit(v)
    assert circles == []


def test_only_the_lifecycle_sends_the_tools_apps_tasks():
    senders = [name for name, path in modules("tools") if any(
        call in path.read_text() for call in (".send_task(", ".delay(", ".apply_async("))]
    assert senders == ["tools/runtime/lifecycle.py"]


def test_the_data_both_floors_share_imports_only_the_client():
    """tools/models/, callers.py and signals.py sit between the client and the runtime: they may
    use the client (tools.mcp) and inspector, never the runtime or the web layer."""
    shared = [*modules("tools/models"), *[(n, p) for n, p in modules("tools") if n in ("tools/callers.py", "tools/signals.py")]]
    allowed = ("tools.mcp", "tools.models", "tools.callers", "tools.signals", "inspector")
    offenders = {name: sorted(m for m in first_party_imports(path) if not m.startswith(allowed)) for name, path in shared}
    assert {k: v for k, v in offenders.items() if v} == {}
