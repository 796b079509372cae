"""Generation through an OpenAI-compatible server (vLLM at paper scale), as `bfcl generate` does it.

Either bfcl-eval's own spin-up (`OSSHandler.spin_up_local_server` runs `vllm serve` on a free port and
waits for it) or a server the workflow already started (`server_url`). vLLM cannot live in the BFCL
environment (vLLM 0.24.0 needs numpy>=2, bfcl-eval pins 1.26.4), so the `vllm` that bfcl-eval starts is
the vLLM environment's executable (`locate.py`), put first on PATH for the spin-up only. Many entries run
concurrently against it, so the server can batch; every request carries its own seed, so results do not depend on
which requests happened to share a batch.

bfcl-eval waits for its server with no time limit (a hung `vllm serve` would hold the GPU until the job's
wall-clock limit): `attach_server` stops the server and fails with `ServerTimeout` after `timeout_s`.
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from typing import Any

from openai import OpenAI

from toolcall_repro.backends import Generation
from toolcall_repro.eval.bfcl.handler import ProtocolQwenHandler
from toolcall_repro.eval.bfcl.locate import VLLMNotFound, vllm_executable
from toolcall_repro.protocol import Protocol

__all__ = [
    "ServerTimeout",
    "VLLMNotFound",
    "attach_server",
    "server_generate_fn",
    "vllm_executable",
    "vllm_first_on_path",
]
# evaluate.bfcl.server_timeout_s when unset: loading a 4-8B model and capturing CUDA graphs takes minutes
DEFAULT_SERVER_TIMEOUT_S = 1800.0

# Sampling is exactly the protocol's: switch off the model's own generation defaults (Qwen3 ships top_k=20).
NEUTRAL_SAMPLING = {"top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def vllm_first_on_path(executable: str, serve_args: Sequence[str] = ()):
    """PATH with only `executable` (as `vllm`) put in front: bfcl-eval runs `vllm` from PATH. With
    `serve_args` (what the vLLM env's platform needs, `locate.serve_args`) that `vllm` is a two-line script
    running `executable` with bfcl-eval's arguments and then these, which come last and so take precedence."""
    shim = tempfile.mkdtemp(prefix="vllm_bin_")
    target = os.path.join(shim, "vllm")
    if serve_args:
        with open(target, "w") as fh:
            fh.write(f'#!/bin/sh\nexec {shlex.quote(executable)} "$@" {shlex.join(serve_args)}\n')
        os.chmod(target, 0o755)
    else:
        os.symlink(executable, target)
    before = os.environ.get("PATH", "")
    os.environ["PATH"] = f"{shim}{os.pathsep}{before}"
    try:
        yield
    finally:
        os.environ["PATH"] = before
        shutil.rmtree(shim, ignore_errors=True)


class ServerTimeout(RuntimeError):
    """The generation server did not answer within evaluate.bfcl.server_timeout_s."""


def _timeout_message(url: str, timeout_s: float, started: bool) -> str:
    what = "`vllm serve` (started by this job, now stopped)" if started else "the server"
    return (
        f"{what} did not answer at {url}/models within {timeout_s:g} s (evaluate.bfcl.server_timeout_s): "
        "see the server log above; raise the timeout if the model loads slowly"
    )


def wait_for_server(url: str, timeout_s: float, poll_s: float = 1.0) -> None:
    """Until `url`/models answers 200; ServerTimeout after timeout_s (a server this job did not start)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=max(1.0, poll_s)) as response:
                if response.status == 200:
                    return
        except (OSError, urllib.error.URLError):
            pass
        if time.monotonic() >= deadline:
            raise ServerTimeout(_timeout_message(url, timeout_s, started=False))
        time.sleep(poll_s)


def _spin_up_within(handler: ProtocolQwenHandler, timeout_s: float, spin_up: dict) -> None:
    """bfcl-eval's spin-up, with its `vllm serve` stopped after timeout_s: bfcl's wait loop then sees the
    process gone and raises, and we say why."""
    lock, state = threading.Lock(), {"ready": False, "stopped": False}

    def stop() -> None:
        with lock:
            process = getattr(handler, "_server_process", None)
            if state["ready"] or process is None or process.poll() is not None:
                return
            state["stopped"] = True
            process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()

    timer = threading.Timer(timeout_s, stop)
    timer.daemon = True
    timer.start()
    try:
        handler.spin_up_local_server(**spin_up)
    except Exception as exc:
        if state["stopped"]:
            raise ServerTimeout(_timeout_message(handler.base_url, timeout_s, started=True)) from exc
        raise
    finally:
        with lock:
            state["ready"] = True
        timer.cancel()
    if state["stopped"]:  # stopped just as it answered
        raise ServerTimeout(_timeout_message(handler.base_url, timeout_s, started=True))


def attach_server(
    handler: ProtocolQwenHandler,
    model_dir: str,
    *,
    server_url: str | None = None,
    gpus: int = 1,
    gpu_memory_utilization: float = 0.9,
    vllm_bin: str | None = None,
    serve_args: Sequence[str] = (),
    timeout_s: float | None = None,
) -> None:
    """Point `handler` at a running server (`server_url`, e.g. http://host:8000/v1) or start `vllm serve`.

    Starting one uses `vllm_executable(vllm_bin)`: the vLLM environment's `vllm`, never this env's, with
    `serve_args` after bfcl-eval's own (locate_vllm's record: what that env's platform needs).

    Afterwards `handler.tokenizer` is the model's tokenizer and `handler.client` talks to the server;
    call `handler.shutdown_local_server()` when done (a no-op for a server we did not start).
    A server that does not answer within `timeout_s` (default DEFAULT_SERVER_TIMEOUT_S) is ServerTimeout.
    """
    timeout_s = DEFAULT_SERVER_TIMEOUT_S if timeout_s is None else float(timeout_s)
    start = server_url is None
    if start:
        handler.local_server_port = free_port()  # several evaluation jobs may share a node
        server_url = f"http://localhost:{handler.local_server_port}/v1"
    handler.base_url = server_url
    handler.client = OpenAI(base_url=server_url, api_key="EMPTY")
    spin_up = dict(
        num_gpus=gpus,
        gpu_memory_utilization=gpu_memory_utilization,
        backend="vllm",
        skip_server_setup=not start,
        local_model_path=model_dir,
    )
    if not start:
        wait_for_server(server_url, timeout_s)
        handler.spin_up_local_server(**spin_up)
        return
    with vllm_first_on_path(vllm_executable(vllm_bin), serve_args):
        _spin_up_within(handler, timeout_s, spin_up)


def server_generate_fn(client: Any, model: str, protocol: Protocol) -> Callable[[str, int], Generation]:
    """(prompt text, seed) -> Generation via the server's /v1/completions (the prompt is already rendered)."""

    def generate(prompt: str, seed: int) -> Generation:
        response = client.completions.create(
            model=model,
            prompt=prompt,
            temperature=protocol.temperature,
            top_p=protocol.top_p,
            max_tokens=protocol.max_tokens,
            seed=seed,
            extra_body={"skip_special_tokens": False, **NEUTRAL_SAMPLING},
            timeout=72000,
        )
        choice = response.choices[0]
        return Generation(
            text=choice.text,
            prompt_tokens=response.usage.prompt_tokens,
            completion_tokens=response.usage.completion_tokens,
            finish_reason="length" if choice.finish_reason == "length" else "stop",
        )

    return generate
