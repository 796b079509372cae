"""An entry that fails at inference is recorded in the result file as bfcl generate records it (the error in
`result`, a `traceback` beside it), but with the same bytes wherever the checkout and the venv live: two
clones of one commit used to write different raw results (absolute paths in the traceback)."""

import importlib.util
import sys
from types import SimpleNamespace

from toolcall_repro.eval.bfcl.generate import _infer
from toolcall_repro.eval.bfcl.score import INFERENCE_ERROR_PREFIX

FAILING = """
def explode(entry):
    raise ValueError("the request has 26683 tokens in the prompt")
"""


def _handler_from(root, monkeypatch):
    """A handler whose inference fails inside pkgx/boom.py under `root` (on sys.path, as a venv or a
    checkout's src/ is)."""
    (root / "pkgx").mkdir(parents=True)
    (root / "pkgx" / "boom.py").write_text(FAILING)
    monkeypatch.syspath_prepend(str(root))
    spec = importlib.util.spec_from_file_location(f"boom_{root.name}", root / "pkgx" / "boom.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def inference(entry, include_input_log, exclude_state_log):
        return module.explode(entry)

    return SimpleNamespace(inference=inference)


def test_a_failed_entry_is_recorded_alike_from_two_checkouts(tmp_path, monkeypatch):
    entry = {"id": "multi_turn_base_0"}
    logged = []
    records = []
    for where in ("clone_a", "elsewhere/clone_b"):
        with monkeypatch.context() as m:
            record, failed = _infer(_handler_from(tmp_path / where, m), entry, logged.append)
        assert failed
        records.append(record)
        sys.modules.pop(f"boom_{(tmp_path / where).name}", None)

    assert records[0] == records[1]
    record = records[0]
    assert record["id"] == "multi_turn_base_0"
    assert record["result"] == f"{INFERENCE_ERROR_PREFIX}: the request has 26683 tokens in the prompt"
    trace = record["traceback"]
    assert str(tmp_path) not in trace
    assert "  pkgx/boom.py, in explode" in trace.splitlines()
    assert "toolcall_repro/eval/bfcl/generate.py, in _infer" in trace  # the project's frame, from src/
    assert trace.splitlines()[-1] == "ValueError: the request has 26683 tokens in the prompt"
    assert ", line " not in trace  # line numbers move with any edit; the job log has them
    # the job's log keeps the whole traceback, absolute paths and line numbers included
    assert str(tmp_path / "clone_a" / "pkgx" / "boom.py") in logged[0] and ", line 3, in explode" in logged[0]
