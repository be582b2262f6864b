"""How the modules may depend on one another, checked on their source."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "computefence"


def _private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__")


def test_no_cli_module_imports_a_private_name_from_another_module():
    # A private name is its module's own business; a command that needs it needs a public step.
    borrowed = []
    for path in sorted((PACKAGE / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("computefence"):
                borrowed += [f"{path.name}: {node.module}.{a.name}" for a in node.names if _private(a.name)]
    assert borrowed == []


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement, in functions too, except those under `if TYPE_CHECKING:`
    (read by type checkers only, never run)."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph() -> dict[str, set[str]]:
    """module -> the computefence modules it imports by name. The probe's parts import each
    other relatively (joined into one script, they become its globals), so they show no edge
    among themselves; any other import of theirs, and the assembler's, is an edge."""
    paths = list(PACKAGE.rglob("*.py"))
    modules = {_module_name(p): p for p in paths}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges: set[str] = set()
        for node in _runtime_imports(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name in modules)
            elif node.module and node.level == 0:
                for alias in node.names:
                    # `from computefence.render import views` imports the module render.views.
                    submodule = f"{node.module}.{alias.name}"
                    edges.add(submodule if submodule in modules else node.module)
        graph[name] = {edge for edge in edges if edge in modules and edge != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected group of modules (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def strongconnect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for edge in sorted(graph[node]):
            if edge not in index:
                strongconnect(edge)
                low[node] = min(low[node], low[edge])
            elif edge in on_stack:
                low[node] = min(low[node], index[edge])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            strongconnect(node)
    return groups


def test_the_import_graph_has_no_circle_function_level_imports_included():
    graph = import_graph()
    assert len(graph) > 80 and graph["computefence.run"] >= {"computefence.evaluate", "computefence.policy"}
    assert _cycles(graph) == []


def test_the_circle_finder_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# ---------------------------------------------------------------- the layers (docs/architecture.md)

# Lowest first: a module may import from its own layer and the layers before it, never after.
LAYERS = ("probe", "models", "sources/connectors", "evaluate", "run", "operations", "render", "cli")
# Module (or package) -> layer.
PLACES = {
    "computefence.probe": "probe",
    "computefence.models": "models",
    "computefence.saved_files": "models",
    "computefence.sources": "sources/connectors",
    "computefence.connectors": "sources/connectors",
    "computefence.demo": "sources/connectors",
    "computefence.evaluate": "evaluate",
    "computefence.policy": "evaluate",
    "computefence.baseline": "evaluate",
    "computefence.run": "run",
    "computefence.session": "run",
    "computefence.watch": "run",
    "computefence.workers": "run",
    "computefence.operations": "operations",
    "computefence.dataset_tools": "operations",
    "computefence.render": "render",
    "computefence.cli": "cli",
    "computefence.__main__": "cli",
}
# Plain helpers every layer may use; they import only each other.
HELPERS = {
    "computefence.errors",
    "computefence.text",
    "computefence.jsontext",
    "computefence.files",
    "computefence.safe_words",
    "computefence.interrupt",
    "computefence.http",
    "computefence.version",
    "computefence.redaction",
    "computefence.yaml_lines",
}
# The package itself: `computefence.check` is forwarded to the run session on first use.
FACADE = "computefence"


def layer_of(module: str) -> str:
    if module in HELPERS:
        return "helpers"
    for prefix, layer in PLACES.items():
        if module == prefix or module.startswith(prefix + "."):
            return layer
    raise KeyError(module)


def upward_arrows(graph: dict[str, set[str]]) -> list[str]:
    rank = {"helpers": -1, **{layer: index for index, layer in enumerate(LAYERS)}}
    found = []
    for module, edges in sorted(graph.items()):
        if module == FACADE:
            continue
        for edge in sorted(edges):
            if rank[layer_of(edge)] > rank[layer_of(module)] or (
                layer_of(module) == "helpers" and layer_of(edge) != "helpers"
            ):
                found.append(f"{module} ({layer_of(module)}) -> {edge} ({layer_of(edge)})")
    return found


def test_every_module_has_a_layer():
    graph = import_graph()
    unplaced = []
    for module in graph:
        try:
            layer_of(module)
        except KeyError:
            unplaced.append(module)
    assert [m for m in unplaced if m != FACADE] == []


def test_no_import_runs_up_the_layers():
    assert upward_arrows(import_graph()) == []


def test_the_arrow_finder_finds_an_arrow_that_runs_up():
    graph = {
        "computefence.operations.history": {"computefence.render.json", "computefence.models"},
        "computefence.errors": {"computefence.models"},
        "computefence.render.json": {"computefence.saved_files"},
    }
    assert upward_arrows(graph) == [
        "computefence.errors (helpers) -> computefence.models (models)",
        "computefence.operations.history (operations) -> computefence.render.json (render)",
    ]


def test_the_architecture_page_states_the_same_layers():
    page = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    rows = [line.split("|")[1].strip() for line in page.splitlines() if line.startswith("| ") and "`" in line]
    assert rows[: len(LAYERS)] == [layer.replace("/", ", ") for layer in LAYERS]


def test_the_probe_and_its_assembler_sit_below_every_layer():
    graph = import_graph()
    assert layer_of("computefence.probe.assemble") == layer_of("computefence.probe.storage") == "probe"
    assert "computefence.probe.assemble" in graph["computefence.connectors.payload"]
    # The assembler holds the parts' order itself: it imports nothing of the package.
    assert graph["computefence.probe.assemble"] == set()
    # A part that imported the models (client-side code) would be an arrow up.
    assert upward_arrows({"computefence.probe.gpu": {"computefence.models"}}) == [
        "computefence.probe.gpu (probe) -> computefence.models (models)"
    ]


# ---------------------------------------------------------------- module size

MAX_MODULE_LINES = 1_000


def oversized_modules(package: Path = PACKAGE) -> dict[str, int]:
    """Module path -> lines, for each module over MAX_MODULE_LINES."""
    sizes = {str(p.relative_to(package.parent)): len(p.read_text().splitlines()) for p in package.rglob("*.py")}
    return {path: lines for path, lines in sorted(sizes.items()) if lines > MAX_MODULE_LINES}


def test_no_module_is_over_a_thousand_lines():
    # Past it a module holds more than one room: split it along its seams (models/, sources/ansible_vars.py).
    assert oversized_modules() == {}


def test_the_size_check_finds_a_module_over_the_limit(tmp_path):
    package = tmp_path / "computefence"
    (package / "models").mkdir(parents=True)
    (package / "models" / "facts.py").write_text("x = 1\n" * 600)
    (package / "models.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    assert oversized_modules(package) == {"computefence/models.py": MAX_MODULE_LINES + 1}


def test_no_check_area_imports_the_engine_that_runs_it():
    # The engine (evaluate.judge) reads the areas through checks.areas; an area that imported
    # it back would load every area to judge with one.
    graph = import_graph()
    areas = [module for module in graph if module.startswith("computefence.evaluate.checks.")]
    assert len(areas) >= 15 and "computefence.evaluate.checks.areas" in areas
    assert [f"{m} -> {e}" for m in areas for e in sorted(graph[m]) if e == "computefence.evaluate.judge"] == []
