"""The server path (vLLM at paper scale) against a fake OpenAI-compatible server: concurrency, seeds, sampling."""

import dataclasses
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from toolcall_repro.eval.bfcl.generate import generate
from toolcall_repro.eval.bfcl.handler import query_seed
from toolcall_repro.eval.bfcl.runner import score_run
from toolcall_repro.eval.seeds import summarise_seeds
from toolcall_repro.protocol import Protocol

ANSWER = "[calculate_triangle_area(base=10, height=5)]"


class FakeCompletions(BaseHTTPRequestHandler):
    requests: list = []
    lock = threading.Lock()

    def _reply(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # noqa: N802 - http.server's naming
        self._reply({"object": "list", "data": [{"id": "tiny", "object": "model"}]})

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.lock:
            self.requests.append(body)
        # a model that knows one answer: the triangle entry gets it, everything else gets prose
        text = ANSWER if "triangle with a base of 10" in body["prompt"] else "No function fits."
        self._reply(
            {
                "id": "c",
                "object": "text_completion",
                "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "text": text, "finish_reason": "stop", "logprobs": None}],
                "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
            }
        )

    def log_message(self, *args):
        pass


@pytest.fixture()
def fake_server():
    FakeCompletions.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeCompletions)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def test_server_generation_is_concurrent_seeded_and_scored(tiny_model_dir, fake_server, tmp_path):
    protocol = Protocol(
        system_prompt="bfcl_default", backend="vllm", temperature=0.6, top_p=0.95, max_tokens=16, seed=7
    )
    out = generate(
        model_dir=tiny_model_dir,
        model_tag="served",
        protocol=protocol,
        protocol_id="default",
        categories=["simple_python", "irrelevance"],
        limit=3,
        out_dir=tmp_path / "results",
        workers=4,
        server_url=fake_server,
        log=lambda *_: None,
    )
    reqs = FakeCompletions.requests
    assert len(reqs) == 6
    assert {r["seed"] for r in reqs} == {
        query_seed(7, f"{c}_{i}", 0) for c in ("simple_python", "irrelevance") for i in range(3)
    }
    assert all(r["temperature"] == 0.6 and r["top_p"] == 0.95 and r["max_tokens"] == 16 for r in reqs)
    assert all(r["top_k"] == -1 and r["repetition_penalty"] == 1.0 for r in reqs)  # no model defaults
    lines = (
        (out / "toolcallrepro-served" / "non_live" / "BFCL_v4_simple_python_result.json")
        .read_text()
        .splitlines()
    )
    assert [json.loads(x)["id"] for x in lines] == ["simple_python_0", "simple_python_1", "simple_python_2"]
    card = json.loads((out / "card.json").read_text())
    assert card["generation_server"] == {"url": fake_server, "started_here": False, "workers": 4}

    doc = score_run(out, protocol)
    assert doc["categories"]["simple_python"]["correct"] == 1  # only entry 0 is the triangle
    assert doc["categories"]["irrelevance"]["correct"] == 3


@pytest.mark.parametrize("workers", [1, 3])
def test_generation_logs_entries_done_with_elapsed_and_left(
    tiny_model_dir, fake_server, tmp_path, monkeypatch, workers
):
    """A progress line per entry here (progress.EVERY_S 0; 30s apart in a job): entries done of all
    categories, the entry's category, elapsed time and an estimate left."""
    import re

    import toolcall_repro.progress as progress

    monkeypatch.setattr(progress, "EVERY_S", 0.0)
    lines = []
    protocol = Protocol(system_prompt="bfcl_default", backend="vllm", max_tokens=16, seed=7)
    generate(
        model_dir=tiny_model_dir, model_tag="served", protocol=protocol, protocol_id="default",
        categories=["simple_python", "irrelevance"], limit=2, out_dir=tmp_path / "results", workers=workers,
        server_url=fake_server, log=lines.append,
    )  # fmt: skip
    assert [m.split(",")[0] for m in lines] == [
        "bfcl generation: 1/4 entries (25%) category simple_python",
        "bfcl generation: 2/4 entries (50%) category simple_python",
        "bfcl generation: 3/4 entries (75%) category irrelevance",
        "bfcl generation: 4/4 entries (100%) category irrelevance",
    ]
    assert all(re.search(r", \d+s elapsed, ~\d+s left$", m) for m in lines), lines


FAKE_VLLM = """#!{python}
# Stands in for the vLLM env's `vllm` (stdlib only, starts fast): records its argv, then serves a
# completions API on --port that knows the triangle answer.
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
assert sys.argv[1] == "serve", sys.argv
open({record!r}, "w").write(json.dumps(sys.argv[1:]))

class H(BaseHTTPRequestHandler):
    def reply(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def do_GET(self):
        self.reply({{"object": "list", "data": [{{"id": "m", "object": "model"}}]}})
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        text = {answer!r} if "triangle with a base of 10" in body["prompt"] else "No."
        self.reply({{"id": "c", "object": "text_completion", "created": 0, "model": body["model"],
                    "choices": [{{"index": 0, "text": text, "finish_reason": "stop", "logprobs": None}}],
                    "usage": {{"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}}})
    def log_message(self, *args):
        pass

ThreadingHTTPServer(("127.0.0.1", int(sys.argv[sys.argv.index("--port") + 1])), H).serve_forever()
"""


def test_bfcl_starts_vllm_serve_from_the_vllm_env(tiny_model_dir, tmp_path, monkeypatch):
    """No vllm in this env: bfcl-eval's own spin-up runs the vLLM env's `vllm serve`, found via VERL_PYTHON."""
    import sys

    from toolcall_repro.eval.bfcl.serve import VLLMNotFound, vllm_executable

    vllm_env = tmp_path / "verl-env" / "bin"
    vllm_env.mkdir(parents=True)
    record = tmp_path / "argv.json"
    fake = vllm_env / "vllm"
    fake.write_text(FAKE_VLLM.format(python=sys.executable, record=str(record), answer=ANSWER))
    fake.chmod(0o755)
    monkeypatch.delenv("VLLM_BIN", raising=False)
    monkeypatch.setenv("VERL_PYTHON", str(vllm_env / "python"))
    protocol = Protocol(system_prompt="bfcl_default", backend="vllm", temperature=0.6, max_tokens=16, seed=1)
    out = generate(
        model_dir=tiny_model_dir,
        model_tag="served",
        protocol=protocol,
        protocol_id="default",
        categories=["simple_python"],
        limit=2,
        out_dir=tmp_path / "results",
        workers=2,
        gpus=2,
        gpu_memory_utilization=0.8,
        log=lambda *_: None,
    )
    argv = json.loads(record.read_text())
    assert argv[:2] == ["serve", str(tiny_model_dir)]
    assert argv[argv.index("--tensor-parallel-size") + 1] == "2"
    assert argv[argv.index("--gpu-memory-utilization") + 1] == "0.8"
    card = json.loads((out / "card.json").read_text())
    assert card["generation_server"] == {"url": None, "started_here": True, "workers": 2, "serve_args": []}
    assert card["inference_errors"] == {"simple_python": 0}
    assert score_run(out, protocol)["categories"]["simple_python"]["correct"] == 1
    # a second seed serves on another free port; the two score files summarise as seeds of one protocol
    again = dataclasses.replace(protocol, seed=2)
    other = generate(
        model_dir=tiny_model_dir, model_tag="served", protocol=again, protocol_id="default",
        categories=["simple_python"], limit=2, out_dir=tmp_path / "results2", workers=2, gpus=2,
        gpu_memory_utilization=0.8, log=lambda *_: None,
    )  # fmt: skip
    summary = summarise_seeds([score_run(out, protocol), score_run(other, again)])
    per_seed = summary["metrics"]["category/simple_python"]["per_seed"]
    assert len(per_seed) == 2 and per_seed[0] == per_seed[1] > 0
    # a named executable that is not there is an error, not a silent fallback to PATH
    with pytest.raises(VLLMNotFound, match="VLLM_BIN"):
        vllm_executable(environ={"VLLM_BIN": str(tmp_path / "nope"), "PATH": str(vllm_env)})
    with pytest.raises(VLLMNotFound, match="export VLLM_BIN"):
        vllm_executable(environ={"PATH": str(tmp_path)})


def test_locate_vllm_records_the_vllm_envs_vllm_and_generate_bfcl_serves_with_it(
    tiny_model_dir, tmp_path, monkeypatch, run_stage
):
    """Paper scale under plain `--sdm conda`, nothing exported: locate_vllm runs in the vLLM env
    (eval-vllm.yaml, its bin on PATH as conda activates it) and records that env's `vllm`; generate_bfcl runs
    in the BFCL env, where no `vllm` is on PATH, and serves with the recorded one."""
    import os
    import shutil
    import sys

    vllm_env = tmp_path / "conda" / "eval-vllm" / "bin"
    vllm_env.mkdir(parents=True)
    record = tmp_path / "argv.json"
    (vllm_env / "vllm").write_text(FAKE_VLLM.format(python=sys.executable, record=str(record), answer=ANSWER))
    (vllm_env / "vllm").chmod(0o755)
    for name in ("VLLM_BIN", "VERL_PYTHON"):
        monkeypatch.delenv(name, raising=False)
    bfcl_path = os.environ["PATH"]
    assert shutil.which("vllm", path=bfcl_path) is None
    location = tmp_path / "eval" / "bfcl" / "vllm.json"
    monkeypatch.setenv("PATH", f"{vllm_env}{os.pathsep}{bfcl_path}")
    manifest = run_stage(
        "locate_vllm", input={}, config={}, seeds={},
        output={"vllm": str(location), "manifest": str(tmp_path / "manifests" / "locate_vllm" / "all.json")},
    )  # fmt: skip
    assert json.loads(location.read_text())["vllm"] == str(vllm_env / "vllm")
    assert manifest["rule"] == "locate_vllm"

    monkeypatch.setenv("PATH", bfcl_path)  # the BFCL env: no vLLM (numpy)
    protocol = {"id": "default", "system_prompt": "bfcl_default", "template": "native", "thinking": "drop",
                "temperature": 0.7, "top_p": 1.0, "max_tokens": 16, "seed": 0, "backend": "vllm"}  # fmt: skip
    results = tmp_path / "eval" / "bfcl" / "base" / "default" / "raw" / "seed0"
    run_stage(
        "generate_bfcl", input={"model": str(tiny_model_dir), "vllm": str(location)},
        output={"results": str(results),
                "manifest": str(tmp_path / "manifests" / "generate_bfcl" / "base-default-0.json")},
        config={"bfcl": {"categories": ["simple_python"], "limit": 2}, "protocol": protocol,
                "model": {"tag": "base", "source": "base"}},
        seeds={"eval": 0}, threads=1,
    )  # fmt: skip
    assert json.loads(record.read_text())[:2] == ["serve", str(tiny_model_dir)]
    score = tmp_path / "eval" / "bfcl" / "base" / "default" / "seed0.json"
    run_stage(
        "score_bfcl", input={"results": str(results)},
        output={"score": str(score), "manifest": str(tmp_path / "manifests" / "score_bfcl" / "base-default-0.json")},
        config={"protocol": protocol}, seeds={"eval": 0},
    )  # fmt: skip
    doc = json.loads(score.read_text())
    assert doc["categories"]["simple_python"]["total"] == 2 and doc["summary"]["inference_errors"] == 0


def test_serve_flags_spell_engine_arguments_as_vllms_cli():
    from toolcall_repro.eval.bfcl.locate import serve_flags

    assert serve_flags(
        {"enable_chunked_prefill": False, "kv_cache_memory_bytes": 1024, "enforce_eager": True}
    ) == [
        "--no-enable-chunked-prefill",
        "--kv-cache-memory-bytes",
        "1024",
        "--enforce-eager",
    ]
    assert serve_flags({}) == []


def test_the_vllm_on_path_runs_the_env_vllm_with_the_recorded_flags_last(tmp_path):
    """bfcl-eval runs `vllm serve <model> ...` from PATH: with serve args the `vllm` it finds passes its own
    arguments through and appends them (quoted); without, it is the env's executable itself."""
    import os
    import shutil
    import subprocess
    import sys

    from toolcall_repro.eval.bfcl.serve import vllm_first_on_path

    env_vllm = tmp_path / "env dir" / "vllm"
    env_vllm.parent.mkdir()
    env_vllm.write_text(f"#!{sys.executable}\nimport json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    env_vllm.chmod(0o755)
    flags = ["--no-enable-chunked-prefill", "--kv-cache-memory-bytes", "1073741824"]
    with vllm_first_on_path(str(env_vllm), flags):
        found = shutil.which("vllm")
        argv = json.loads(
            subprocess.run(["vllm", "serve", "/m o", "--port", "1"], capture_output=True, text=True).stdout
        )
    assert argv == ["serve", "/m o", "--port", "1", *flags]
    assert not os.path.exists(found)  # the shim is gone with the context
    with vllm_first_on_path(str(env_vllm)):
        assert os.path.realpath(shutil.which("vllm")) == str(env_vllm)


def test_locate_vllm_records_no_flags_and_an_unknown_platform_where_the_env_cannot_import_vllm(tmp_path):
    from toolcall_repro.eval.bfcl.locate import serve_args

    (tmp_path / "vllm").write_text("#!/bin/sh\n")
    assert serve_args(str(tmp_path / "vllm")) == ([], "unknown")  # no python beside it
    (tmp_path / "python").symlink_to(__import__("sys").executable)  # this env: no vLLM
    assert serve_args(str(tmp_path / "vllm")) == ([], "unknown")


HUNG_VLLM = """#!{python}
# A `vllm serve` that hangs before it opens its port (a stuck model load): records its pid, then sleeps.
import os, time
open({record!r}, "w").write(str(os.getpid()))
time.sleep(3600)
"""


def test_a_hung_vllm_serve_fails_the_job_after_the_server_timeout_and_is_stopped(tiny_model_dir, tmp_path):
    """bfcl-eval waits for its server without a limit; evaluate.bfcl.server_timeout_s bounds the wait, the
    hung server is stopped, and the error names the key."""
    import os
    import sys
    import time

    from toolcall_repro.eval.bfcl.serve import ServerTimeout

    record = tmp_path / "pid"
    fake = tmp_path / "bin" / "vllm"
    fake.parent.mkdir()
    fake.write_text(HUNG_VLLM.format(python=sys.executable, record=str(record)))
    fake.chmod(0o755)
    protocol = Protocol(system_prompt="bfcl_default", backend="vllm", max_tokens=16, seed=1)
    start = time.monotonic()
    with pytest.raises(ServerTimeout, match=r"within 3 s \(evaluate.bfcl.server_timeout_s\)"):
        generate(
            model_dir=tiny_model_dir, model_tag="hung", protocol=protocol, protocol_id="default",
            categories=["simple_python"], limit=1, out_dir=tmp_path / "results", vllm_bin=str(fake),
            server_timeout_s=3, log=lambda *_: None,
        )  # fmt: skip
    assert time.monotonic() - start < 60
    pid = int(record.read_text())
    for _ in range(50):  # terminated (and reaped by bfcl-eval's wait loop)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the hung vllm serve (pid {pid}) is still running")


def test_a_given_server_that_never_answers_fails_after_the_server_timeout(tiny_model_dir, tmp_path):
    import socket

    from toolcall_repro.eval.bfcl.serve import ServerTimeout

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    protocol = Protocol(system_prompt="bfcl_default", backend="vllm", max_tokens=16, seed=1)
    with pytest.raises(ServerTimeout, match="did not answer at .*/v1/models within 2 s"):
        generate(
            model_dir=tiny_model_dir, model_tag="gone", protocol=protocol, protocol_id="default",
            categories=["simple_python"], limit=1, out_dir=tmp_path / "results", server_url=url,
            server_timeout_s=2, log=lambda *_: None,
        )  # fmt: skip
