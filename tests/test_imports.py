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
