"""The broker's and auth's modules import one another without a cycle, counting every
import: at module level, inside a function, and under `if TYPE_CHECKING:` (a type-only
import is still a module that must be read first). A module names what it needs of the
code above it (a narrow base class or `typing.Protocol` below it), so the graph stays a
ladder; a cycle here is a knot that no module in it can be read or changed without the
others (issue 32 item 2, review section 5.2). The graph is read with `ast`, as
/work/shared/tools/import-cycles.py reads it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import mqttq
from mqttq.broker.connection.client import Client
from mqttq.broker.connection.link import ClientLink
from mqttq.broker.delivery.hub import Hub
from mqttq.broker.delivery.intake import IntakeHost
from mqttq.broker.delivery.publisher import Publisher
from mqttq.broker.sessions.host import SessionHost
from mqttq.broker.sessions.outlet import Outlet

PACKAGE = Path(mqttq.__file__).parent
CHECKED = ("mqttq.broker", "mqttq.auth")
"""The packages whose modules must form no cycle among themselves."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of mqttq it imports, wherever the import stands."""
    files = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        imported: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                if node.level:
                    module = ".".join(
                        base[: len(base) - node.level + 1] + ([module] if module else [])
                    )
                # `from package import module` needs that module, not the whole package.
                modules = {f"{module}.{alias.name}" for alias in node.names} & set(files)
                imported.update(modules)
                if len(modules) < len(node.names):
                    imported.add(module)
        graph[name] = {other for other in imported if other in files and other != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm,
    iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_type_only_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_the_graph_counts_type_checking_and_function_level_imports() -> None:
    graph = import_graph()
    # session.py imports TenantSpace only for type checking; server.py imports ClusterNode
    # inside `Broker.start`.
    assert "mqttq.broker.delivery.tenants" in graph["mqttq.broker.sessions.session"]
    assert "mqttq.broker.distributed.cluster_node" in graph["mqttq.broker.server"]


@pytest.mark.parametrize("package", CHECKED)
def test_no_import_cycle_among_the_modules_of(package: str) -> None:
    graph = import_graph()
    inside = {
        name: {other for other in imported if other.startswith(package + ".")}
        for name, imported in graph.items()
        if name == package or name.startswith(package + ".")
    }
    assert [" <-> ".join(cycle) for cycle in cycles(inside)] == []


def test_client_and_hub_provide_the_narrow_types_named_below_them() -> None:
    # The compiled base classes: one chain each, as mypyc allows a native class one base.
    assert Client.__mro__[1:4] == (ClientLink, Publisher, Outlet)
    assert Hub.__mro__[1:3] == (IntakeHost, SessionHost)
