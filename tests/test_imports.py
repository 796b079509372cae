"""Every module of the package imports in the env that runs it: a moved helper whose old import stayed
behind fails here, not in the one pipeline job that imports it (an ImportError in a CLI module is
otherwise only found by running that job)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import toolcall_repro

# Modules that need the verl env's packages (verl, ray, omegaconf): imported there (scripts/test.sh
# runs tests/engines/verl in .venv-verl); in .venv a missing third-party module is all they may lack.
VERL_ONLY = "toolcall_repro.engines.verl"


def modules() -> list[str]:
    return sorted(m.name for m in pkgutil.walk_packages(toolcall_repro.__path__, "toolcall_repro."))


@pytest.mark.parametrize("name", modules())
def test_module_imports(name):
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as e:
        # a third-party package of the verl env; never one of our own modules
        if not (name.startswith(VERL_ONLY) and e.name and not e.name.startswith("toolcall_repro")):
            raise


def import_graph() -> dict[str, set[str]]:
    """module -> the package's modules it imports (top-level and inside functions), read from the source."""
    import ast
    from pathlib import Path

    root = Path(toolcall_repro.__file__).parent
    files = {}
    for f in root.rglob("*.py"):
        parts = list(f.relative_to(root.parent).with_suffix("").parts)
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f

    def owner(name: str) -> str:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name

    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, f in files.items():
        package = mod if f.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                names = [base, *(f"{base}.{a.name}" for a in node.names)]
            else:
                continue
            for name in names:
                target = owner(name) if name.startswith("toolcall_repro") else ""
                # a package and its own submodules import each other by design (__init__ re-exports)
                if target and target != mod and not mod.startswith(target + ".") and not target.startswith(mod + "."):
                    graph[mod].add(target)
    return graph


def test_no_two_modules_import_each_other_even_through_others():
    """An import loop (even one hidden in a function-level import) means two modules are one: the
    dependency runs one way, from the CLI and workflow glue down to the pure functions."""
    graph = import_graph()
    loops = []
    for start in sorted(graph):
        seen, stack = set(), [(start, [start])]
        while stack:
            node, path = stack.pop()
            for nxt in sorted(graph[node]):
                if nxt == start:
                    loops.append(" -> ".join([*path, start]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*path, nxt]))
    assert not loops, "import loops:\n" + "\n".join(sorted(set(loops))[:10])


def test_the_experiment_imports_without_pandas():
    """Snakemake imports the experiment (and its benchmark registry) in every job's parse, 120 times in a
    `make run`: pandas (~0.3 s of a 0.45 s import) comes in only where frames are loaded or tables built."""
    import subprocess
    import sys

    code = "import sys, toolcall_repro.experiment; print(sorted(m for m in sys.modules if m.split('.')[0] == 'pandas'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out
