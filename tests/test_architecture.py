"""The package's shape (guide): no module imports another module's private names,
and no import cycle among msprof_cli's modules (module-level or lazy imports; TYPE_CHECKING
imports excepted).  Pure AST reading: fast, no imports."""
from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "msprof_cli"


def _modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        parts = p.relative_to(PKG.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = p
    return out


def _resolve(p: Path, node: ast.ImportFrom) -> str:
    mod = node.module or ""
    if node.level:
        base = p.relative_to(PKG.parent).parent.parts
        base = base[:len(base) - (node.level - 1)]
        mod = ".".join(base) + ("." + mod if mod else "")
    return mod


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip |= {id(n) for n in ast.walk(node)}
    return skip


def test_no_module_uses_another_modules_private_names():
    bad = []
    for name, p in _modules().items():
        tree = ast.parse(p.read_text())
        aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                mod = _resolve(p, node)
                if not mod.startswith("msprof_cli"):
                    continue
                for a in node.names:
                    if a.name.startswith("_") and not a.name.startswith("__"):
                        bad.append(f"{name}: from {mod} import {a.name}")
                    aliases[a.asname or a.name] = f"{mod}.{a.name}"
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("msprof_cli") and a.asname:
                        aliases[a.asname] = a.name
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id in aliases and node.attr.startswith("_") \
                    and not node.attr.startswith("__"):
                bad.append(f"{name}: {node.value.id}.{node.attr}")
    assert not bad, "\n".join(sorted(set(bad)))


def test_no_import_cycles():
    mods = _modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for name, p in mods.items():
        tree = ast.parse(p.read_text())
        skip = _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.ImportFrom):
                mod = _resolve(p, node)
                for a in node.names:
                    target = f"{mod}.{a.name}"
                    edges[name].add(target if target in mods else mod)
            elif isinstance(node, ast.Import):
                edges[name] |= {a.name for a in node.names if a.name in mods}
    # strongly connected components (Tarjan, iterative enough for this package's depth)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in mods or w == v:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for m in mods:
        if m not in index:
            visit(m)
    assert not cycles, cycles
