"""The shared package's layering (pyproject's [tool.importlinter], lint-imports in make
test): no import circle among its modules, and `statewise run`'s path loads no test
harness, generator or local daemon."""

import subprocess
import sys

import grimp

RUN_PATH_NEVER_LOADS = ("shared.testing", "shared.generation", "shared.ops")


def import_circles(graph: grimp.ImportGraph, package: str) -> list[list[str]]:
    """The groups of modules that import each other, directly or not (Tarjan's strongly
    connected components over the package's own imports, counting those inside functions
    and under TYPE_CHECKING)."""
    modules = sorted(m for m in graph.modules if m.split(".")[0] == package)
    imports = {m: sorted(i for i in graph.find_modules_directly_imported_by(m)
                         if i.split(".")[0] == package) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in imports[module]:
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for module in modules:
        if module not in index:
            visit(module)
    return circles


def test_no_module_of_shared_imports_itself_through_others():
    graph = grimp.build_graph("shared", cache_dir=None)
    assert import_circles(graph, "shared") == []


def test_a_circle_is_found():
    graph = grimp.ImportGraph()
    for module in ("p", "p.a", "p.b", "p.c"):
        graph.add_module(module)
    graph.add_import(importer="p.a", imported="p.b")
    graph.add_import(importer="p.b", imported="p.a")
    graph.add_import(importer="p.c", imported="p.a")
    assert import_circles(graph, "p") == [["p.a", "p.b"]]


def test_the_run_path_loads_no_harness_generator_or_daemon():
    """What `statewise run` imports (the command line's module and the run command's), in
    a fresh interpreter: lazily imported commands would not show in import-linter's
    contract on shared.cli.run alone."""
    code = ("import sys, shared.cli.main, shared.cli.run\n"
            f"print(sorted(m for m in sys.modules if m.startswith({RUN_PATH_NEVER_LOADS!r})))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout.strip()
    assert loaded == "[]"
