"""The package's imports, read from the source (``ast``), form no circle and never run back up a layer.

The layers, from the ground up, are declared here as data: a module belongs to the layer of the longest
prefix that names it. An import from a module to one in a higher layer is a failure (but for the known
exception below), so is a circle of modules importing each other, at any layer, and so is a module no layer
names. Imports inside functions and under ``TYPE_CHECKING`` count: they are dependencies all the same.

    python -m pytest tests/test_layers.py -q      # or: python tests/test_layers.py, to print the graph
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "spoolparse"

#: The layers, lowest first: each may import its own and those below it, never those above.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    # what everything may use: bounds, errors, the public data model, terminal text, our own signals, dir fds,
    # patterns compiled on first use, what closes as a context manager
    ("base", ("spoolparse._limits", "spoolparse.errors", "spoolparse.types", "spoolparse._terminal",
              "spoolparse._signals", "spoolparse._dirfd", "spoolparse._regex", "spoolparse._closing")),
    # the operating system's side of a child: starting, containing, waiting, ending it
    ("os", ("spoolparse._os",)),
    # the files a child's output goes to: where spools live, how they are made and closed, when one is full
    # (the line scanner's spill files for a long kept line are made as spools are)
    ("spools", ("spoolparse.spool", "spoolparse.spool_full")),
    # bytes into JSON values, within bounds (decoding: the line scanner and its helpers)
    ("decoding", ("spoolparse.lines", "spoolparse._decode")),
    # what each agent CLI's events mean, and what ok means
    ("providers", ("spoolparse.providers", "spoolparse.verdict", "spoolparse.result", "spoolparse.cost")),
    # one child: its options, its parser, the child itself and the events it hands on
    ("engine", ("spoolparse.options", "spoolparse.parser", "spoolparse.child", "spoolparse._relay")),
    # following one child: from a thread (run), from an event loop (arun)
    ("drivers", ("spoolparse.process", "spoolparse.aio")),
    # many children, and the command line (the package's own face is here: it names everything)
    ("runner and CLI", ("spoolparse.runner", "spoolparse.progress", "spoolparse.report", "spoolparse._cli_common",
                        "spoolparse.cli", "spoolparse.__main__", "spoolparse")),
]

#: Imports that run back up a layer and are known (the test fails while an entry here names an import the code
#: no longer has). None today.
KNOWN_UPWARD: set[tuple[str, str]] = set()


def modules() -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its own name: its ``__init__``)."""
    found: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    """The package's modules ``name`` imports (a name imported from a package is that package, or its module)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "spoolparse":
                    yield _nearest(alias.name, known)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "spoolparse":
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                yield sub if sub in known else _nearest(target, known)


def _nearest(dotted: str, known: dict[str, Path]) -> str:
    while dotted not in known and "." in dotted:
        dotted = dotted.rpartition(".")[0]
    return dotted


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: {t for t in imports(name, path, known) if t != name} for name, path in known.items()}


def layer_of(name: str) -> int | None:
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), i)
    return None if best is None else best[1]


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    break
                if child in on:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def upward(edges: dict[str, set[str]]) -> set[tuple[str, str]]:
    return {(a, b) for a, targets in edges.items() for b in targets
            if (la := layer_of(a)) is not None and (lb := layer_of(b)) is not None and lb > la}


def test_every_module_has_a_layer() -> None:
    unplaced = sorted(name for name in modules() if layer_of(name) is None)
    assert unplaced == [], f"place these modules in a layer of tests/test_layers.py's LAYERS: {unplaced}"


def test_no_import_circle() -> None:
    found = circles(graph())
    assert found == [], "modules that import each other: " + "; ".join(" -> ".join(c) for c in found)


def test_no_import_runs_back_up_a_layer() -> None:
    found = upward(graph())
    names = [name for name, _ in LAYERS]
    wrong = sorted(found - KNOWN_UPWARD)
    assert wrong == [], "imports from a lower layer to a higher one: " + "; ".join(
        f"{a} ({names[layer_of(a) or 0]}) -> {b} ({names[layer_of(b) or 0]})" for a, b in wrong)
    stale = sorted(KNOWN_UPWARD - found)
    assert stale == [], f"known exceptions the code no longer has (remove them from KNOWN_UPWARD): {stale}"


def test_the_checks_catch_what_they_are_for() -> None:
    """A circle and an upward import made up here are found (a check that cannot fail is no check)."""
    made = {"spoolparse.errors": {"spoolparse.child"}, "spoolparse.child": {"spoolparse.parser"},
            "spoolparse.parser": {"spoolparse.child"}, "spoolparse.cli": {"spoolparse.errors"}}
    assert circles(made) == [["spoolparse.child", "spoolparse.parser"]]
    assert upward(made) == {("spoolparse.errors", "spoolparse.child")}
    assert layer_of("spoolparse._os.spawn") == 1 and layer_of("spoolparse.runner.scheduler") == len(LAYERS) - 1
    assert layer_of("spoolparse") == len(LAYERS) - 1 and layer_of("elsewhere") is None
    known = modules()
    edges = graph()
    assert "spoolparse.child" in edges["spoolparse.process"]  # a plain import is read
    assert "spoolparse.runner.cli" in edges["spoolparse.cli"]  # so is one inside a function
    assert "spoolparse.child" in edges["spoolparse.progress"]  # and one under TYPE_CHECKING
    assert "spoolparse._os.cgroup" in known and "spoolparse._os" in known


#: A module and a class of one idea, small enough to read in one sitting.
MAX_MODULE_LINES = 700
MAX_CLASS_ATTRIBUTES = 40


def attributes(cls: ast.ClassDef) -> set[str]:
    """The names a class holds state in: its class-level assignments and every ``self.<name> =`` in it."""
    names: set[str] = set()
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    for node in ast.walk(cls):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(sub.attr for sub in ast.walk(target) if isinstance(sub, ast.Attribute)
                             and isinstance(sub.value, ast.Name) and sub.value.id == "self")
    return names - {"__slots__", "__all__"}


def test_modules_and_classes_are_small_enough_to_read() -> None:
    long_modules, big_classes = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        if (n := len(text.splitlines())) > MAX_MODULE_LINES:
            long_modules.append(f"{path.relative_to(ROOT)}: {n} lines")
        big_classes += [f"{path.relative_to(ROOT)}:{node.name}: {len(attributes(node))} attributes"
                        for node in ast.walk(ast.parse(text)) if isinstance(node, ast.ClassDef)
                        and len(attributes(node)) > MAX_CLASS_ATTRIBUTES]
    assert long_modules == [], f"over {MAX_MODULE_LINES} lines: split by idea"
    assert big_classes == [], f"over {MAX_CLASS_ATTRIBUTES} attributes: split by idea"


def test_the_attribute_count_counts_what_a_class_holds() -> None:
    cls = ast.parse("class C(B):\n    a: int = 0\n    b = 1\n    __slots__ = ()\n    def m(self, o):\n"
                    "        self.c = self.d = 2\n        self.a += 1\n        o.e = 3\n        (self.f, x) = 4, 5\n")
    node = cls.body[0]
    assert isinstance(node, ast.ClassDef) and attributes(node) == {"a", "b", "c", "d", "f"}
    assert len(attributes(next(n for n in ast.walk(ast.parse((PACKAGE / "runner" / "scheduler.py").read_text()))
                               if isinstance(n, ast.ClassDef) and n.name == "Batch"))) > 20


if __name__ == "__main__":  # the graph, a layer at a time
    g = graph()
    for i, (layer, _) in enumerate(LAYERS):
        print(f"{i} {layer}")
        for name in sorted(n for n in g if layer_of(n) == i):
            print(f"    {name} -> {', '.join(sorted(g[name])) or '-'}")
    sys.exit(0)
