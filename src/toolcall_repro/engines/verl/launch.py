"""The two ends of a verl training job around `main.train`: prepare the inputs, collect the outputs.

prepare:  our parquets -> verl's RL parquets (+ data report), the Hydra override file, `run.json`;
          the override file is composed against verl's config schema and validated before any GPU
          or Ray process starts, so a bad config fails on the login node in seconds. On a retry it
          points verl at the newest complete checkpoint of the same run (`resume_point`): a job that
          was preempted or timed out loses only the steps since that checkpoint.
finalize: verl's JSONL log -> `metrics.jsonl`, `curve.jsonl`, `summary.json` (GPU-hours from the job's
          wall-clock x GPUs); the last FSDP checkpoint -> `final/` (a Hugging Face model directory).
"""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from toolcall_repro.engines.fingerprint import run_fingerprint
from toolcall_repro.engines.verl import hydra
from toolcall_repro.engines.verl.data import ChatMessages, Render, to_verl_rows, verl_table
from toolcall_repro.engines.verl.metrics import convert, read_log, summary
from toolcall_repro.io import atomic_path, atomic_write_json, atomic_write_text, write_jsonl

RUN_JSON = "run.json"
OVERRIDES = "overrides.txt"
DATA_REPORT = "data_report.json"
PREVIOUS_LOG = "log.previous.jsonl"  # verl's log lines of earlier attempts, up to the resumed step
ATTEMPTS = "attempts.json"
TRACKER = "latest_checkpointed_iteration.txt"  # verl writes it last: a checkpoint is complete
CHECKPOINT_STATE = "toolcall_state.json"  # adapter.CHECKPOINT_STATE (adapter imports verl; this may not)


def to_stderr(message: str) -> None:
    """prepare's log: the job log (stdout and stderr both go there), on stderr."""
    print(message, file=sys.stderr)


def flash_attn_installed() -> bool:
    """Whether this env (the job's: prepare runs in it) can import flash-attn."""
    return importlib.util.find_spec("flash_attn") is not None


def resume_point(checkpoints: str | Path, fingerprint: str, log=to_stderr) -> Path | None:
    """The newest complete checkpoint of this run, or None after moving whatever is there aside.

    Complete: verl's marker names `global_step_<N>` and that folder holds the actor, verl's
    dataloader state and our state. Same run: our state carries this run's fingerprint. Anything else
    is moved to `checkpoints.stale-<its fingerprint[:12], or "incomplete">-<n>` beside it, never deleted:
    a changed config may be a mistake, and the checkpoints of a long run are days of GPUs.
    """
    root = Path(checkpoints)
    if not root.exists():
        return None
    tracker = root / TRACKER
    reason, folder, theirs = None, None, None
    if not tracker.is_file():
        reason = f"no {TRACKER}: no checkpoint was completed"
    else:
        folder = root / f"global_step_{int(tracker.read_text().strip())}"
        missing = [p for p in ("actor", "data.pt", CHECKPOINT_STATE) if not (folder / p).exists()]
        if missing:
            reason = f"{folder.name} lacks {missing}"
        else:
            theirs = json.loads((folder / CHECKPOINT_STATE).read_text()).get("fingerprint")
            if theirs != fingerprint:
                reason = f"{folder.name} is another run's (config, seed, data or base weights differ)"
    if reason is None:
        log(f"resuming from {folder}")
        return folder
    aside = move_aside(root, str(theirs or "incomplete")[:12])
    log(f"not resuming from {root}: {reason}; moved to {aside} (delete it when you do not need it)")
    return None


def move_aside(root: Path, tag: str) -> Path:
    """Rename `root` to `<root>.stale-<tag>-<n>`, the first n not taken."""
    n = 1
    while (target := root.with_name(f"{root.name}.stale-{tag}-{n}")).exists():
        n += 1
    root.rename(target)
    return target


def _log_lines(path: Path) -> list[tuple[int, str]]:
    """(step, line) of a verl log; a kill -9 may have cut its last line short: that one is dropped."""
    if not path.is_file():
        return []
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    out = []
    for number, line in enumerate(lines, start=1):
        try:
            out.append((int(json.loads(line)["step"]), line))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            if number < len(lines):
                raise ValueError(f"{path}:{number} is not a verl log line: {line[:80]!r}") from None
    return out


def carry_log(work: Path, resume_step: int | None, job_start_s: float | None) -> None:
    """Keep earlier attempts' log lines up to the resumed step (verl's FileLogger truncates its file).

    A fresh start drops every trace of an earlier attempt: log, filter state, final score, attempts.
    """
    current, previous = work / "log.jsonl", work / PREVIOUS_LOG
    attempts_file = work / ATTEMPTS
    if resume_step is None:
        for stale in (
            current,
            previous,
            attempts_file,
            work / "filter_state.json",
            work / "final_validation.json",
        ):
            stale.unlink(missing_ok=True)
        attempts: list = []
    else:
        last_log_s = current.stat().st_mtime if current.is_file() else None
        kept = [line for step, line in _log_lines(previous) + _log_lines(current) if step <= resume_step]
        atomic_write_text(previous, "".join(f"{line}\n" for line in kept))
        current.unlink(missing_ok=True)
        attempts = json.loads(attempts_file.read_text()) if attempts_file.is_file() else []
        if attempts:
            attempts[-1]["last_log_s"] = last_log_s
    attempts.append({"job_start_s": job_start_s, "resumed_from_step": resume_step, "last_log_s": None})
    _write_json(attempts_file, attempts)


def prompts_for_fingerprint(rows: list[dict]) -> list[tuple[str, str]]:
    return [(str(r["extra_info"]["id"]), json.dumps(r, sort_keys=True, default=str)) for r in rows]


def training_protocol_fns(tokenizer, enable_thinking: bool | None = None) -> tuple[ChatMessages, Render]:
    """The training protocol's chat messages (what verl templates) and its `render` (the check), with
    the model's thinking switch (`enable_thinking`, verl's data.apply_chat_template_kwargs)."""
    from toolcall_repro import protocol

    if not hasattr(protocol, "chat_messages"):
        raise RuntimeError(
            "toolcall_repro.protocol.chat_messages(messages, tools, protocol) -> [{'role', 'content'}] is "
            "needed: verl applies the chat template itself, so it takes messages, not rendered text"
        )
    proto = protocol.training_protocol(enable_thinking=enable_thinking)
    return (
        lambda messages, tools: protocol.chat_messages(messages, tools, proto),
        lambda messages, tools: protocol.render(messages, tools, proto, tokenizer),
    )


def _finite(obj: object) -> object:
    """NaN (an undefined ratio, e.g. coverage of an empty set) becomes null in JSON."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, Mapping):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def _write_json(path: Path, obj: object) -> None:
    atomic_write_json(path, _finite(obj), indent=1, ensure_ascii=True, allow_nan=False)


def _write_parquet(rows: list[dict], path: str) -> None:
    import pyarrow.parquet as pq

    with atomic_path(path) as tmp:
        pq.write_table(verl_table(rows), tmp)


def split_config(config: Mapping, verl_config: Mapping | None, nodes: int | None, gpus_per_node: int | None):
    """(run config, train.verl) from the rule's JSON; `verl` may ride inside the run config."""
    run = dict(config)
    verl = dict(run.pop("verl", None) or {})
    verl.update(verl_config or {})
    if nodes is not None:
        verl["nodes"] = int(nodes)
    if gpus_per_node is not None:
        verl["gpus_per_node"] = int(gpus_per_node)
    return run, hydra.merged_verl(verl)


def prepare(
    *,
    train: str,
    heldout: str,
    base: str,
    config: Mapping,
    out: str,
    seed: int,
    nodes: int | None = None,
    gpus_per_node: int | None = None,
    verl_config: Mapping | None = None,
    chat_messages: ChatMessages | None = None,
    render: Render | None = None,
    tokenizer=None,
    validate: bool = True,
    flash_attn: bool | None = None,
    job_start_s: float | None = None,
    log=None,
) -> list[str]:
    """Write `<out>/verl/{train,heldout}.parquet, data_report.json, overrides.txt, run.json`.

    `chat_messages` and `render` default to the training protocol's (tests pass their own);
    `flash_attn` to whether this env has flash-attn.
    """
    from toolcall_repro.data.schema import read_samples

    run, verl = split_config(config, verl_config, nodes, gpus_per_node)
    paths = hydra.RunPaths.under(str(Path(out).resolve()), str(Path(base).resolve()))
    flash_attn = flash_attn_installed() if flash_attn is None else bool(flash_attn)
    # fails fast on a bad geometry; the run's identity (fingerprint) is what it computes, not how fast
    identity = hydra.run_identity(run, verl, paths, seed, flash_attn_installed=flash_attn)
    if tokenizer is None:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(base, local_files_only=True)
    if chat_messages is None:
        chat_messages, render = training_protocol_fns(tokenizer, run.get("enable_thinking"))
    kwargs = hydra.template_kwargs(run)
    max_prompt = int(run["max_prompt_tokens"])
    report, fingerprint_rows = {}, []
    for name, src, dst, limit in (
        ("train", train, paths.train_files, None),
        ("heldout", heldout, paths.val_files, run.get("heldout_size")),
    ):
        samples = [s.row() for s in read_samples(src)]
        rows, rep = to_verl_rows(
            samples, chat_messages, tokenizer, max_prompt, limit=limit, render=render, template_kwargs=kwargs
        )
        if not rows:
            raise ValueError(f"{name}: no sample left of {rep.rows_in} ({rep.as_dict()['dropped_counts']})")
        _write_parquet(rows, dst)
        report[name] = rep.as_dict()
        fingerprint_rows += prompts_for_fingerprint(rows)
    work = Path(paths.log_jsonl).parent
    _write_json(work / DATA_REPORT, report)
    fingerprint = run_fingerprint({"overrides": identity}, int(seed), fingerprint_rows, base)
    folder = resume_point(paths.checkpoints, fingerprint, log=log or to_stderr)
    carry_log(work, None if folder is None else int(folder.name.split("_")[-1]), job_start_s)
    overrides = hydra.build_overrides(
        run,
        verl,
        paths,
        seed,
        flash_attn_installed=flash_attn,
        fingerprint=fingerprint,
        resume_from=None if folder is None else str(folder),
    )
    if validate:
        from toolcall_repro.engines.verl.main import check_config, check_model_config, compose_config

        composed = compose_config(overrides)
        check_config(composed)
        check_model_config(composed)
    (work / OVERRIDES).write_text(hydra.overrides_text(overrides))
    geo = hydra.geometry(run, verl)
    _write_json(
        work / RUN_JSON,
        {
            "run": run,
            "verl": verl,
            "seed": int(seed),
            "paths": vars(paths),
            "geometry": vars(geo),
            "fingerprint": fingerprint,
            "resume_from": None if folder is None else str(folder),
        },
    )
    return overrides


def latest_actor_checkpoint(checkpoints: str | Path) -> Path:
    """`global_step_<N>/actor` named by verl's `latest_checkpointed_iteration.txt`."""
    tracker = Path(checkpoints) / "latest_checkpointed_iteration.txt"
    if not tracker.is_file():
        raise FileNotFoundError(f"{tracker} is missing: the run saved no checkpoint")
    step = int(tracker.read_text().strip())
    actor = Path(checkpoints) / f"global_step_{step}" / "actor"
    if not actor.is_dir():
        raise FileNotFoundError(f"{actor} is missing although {tracker} names step {step}")
    return actor


def merge_checkpoint(actor_dir: Path, target: Path) -> None:
    """FSDP shards -> one Hugging Face directory with verl's own merger (CPU is enough)."""
    cmd = [sys.executable, "-m", "verl.model_merger", "merge", "--backend", "fsdp"]
    cmd += ["--local_dir", str(actor_dir), "--target_dir", str(target)]
    subprocess.run(cmd, check=True)


def finalize(*, out: str, job_start_s: float, merge: bool = True, now=time.time) -> dict:
    """Write `metrics.jsonl`, `curve.jsonl`, `final/` and, last, `summary.json` under `out`.

    The summary's wall-clock runs from the job's start (`job_start_s`, Unix seconds) to the end of the
    merge: the whole time the job held its GPUs.
    """
    from toolcall_repro.engines.verl.adapter import make_streak_filter

    out_dir = Path(out)
    work = out_dir / "verl"
    info = json.loads((work / RUN_JSON).read_text())
    paths, verl, run = info["paths"], info["verl"], info["run"]
    n_gpus = int(verl["nodes"]) * int(verl["gpus_per_node"])
    # earlier attempts' lines up to the step this attempt resumed from, then this attempt's
    lines = (work / PREVIOUS_LOG).read_text().splitlines() if (work / PREVIOUS_LOG).is_file() else []
    records = read_log(lines + Path(paths["log_jsonl"]).read_text().splitlines())
    final_val = Path(paths["final_validation"])
    final = json.loads(final_val.read_text()) if final_val.is_file() else None
    metrics, curve = convert(records, n_gpus, final)
    filter_stats = None
    state = Path(paths["filter_state"])
    if state.is_file():
        streak = make_streak_filter(run.get("filter"), int(info["seed"]))
        streak.load_state_dict(json.loads(state.read_text()))
        filter_stats = streak.stats()
    for name, lines in (("metrics.jsonl", metrics), ("curve.jsonl", curve)):
        write_jsonl(lines, out_dir / name, ensure_ascii=True, allow_nan=False)
    data_report = json.loads((work / DATA_REPORT).read_text())
    if merge:
        merge_checkpoint(latest_actor_checkpoint(paths["checkpoints"]), out_dir / "final")
    wall_clock_s = now() - float(job_start_s)
    if wall_clock_s < 0:
        raise ValueError(f"job start {job_start_s} lies in the future")
    result = summary(
        metrics,
        curve,
        wall_clock_s=wall_clock_s,
        nodes=int(verl["nodes"]),
        gpus_per_node=int(verl["gpus_per_node"]),
        run=run,
        data_report=data_report,
        filter_stats=filter_stats,
    )
    attempts = json.loads((work / ATTEMPTS).read_text()) if (work / ATTEMPTS).is_file() else []
    result["resumed_from_steps"] = [a["resumed_from_step"] for a in attempts if a["resumed_from_step"]]
    # a job killed while validating at a checkpoint step resumes after that step, unlogged
    steps = {m["step"] for m in metrics}
    result["missing_steps"] = sorted(set(range(1, max(steps) + 1)) - steps) if steps else []
    # Earlier attempts ran from their start to their last log line (lower bound: a killed attempt
    # may have run on, unlogged, until the kill).
    earlier_s = sum(
        max(0.0, a["last_log_s"] - a["job_start_s"])
        for a in attempts[:-1]
        if a.get("last_log_s") is not None and a.get("job_start_s") is not None
    )
    result["gpu_hours_all_attempts"] = (earlier_s + wall_clock_s) * n_gpus / 3600.0
    _write_json(out_dir / "summary.json", result)
    return result


def wait_for_ray(address: str, nodes: int, gpus: int, timeout_s: float, poll_s: float = 5.0) -> None:
    """Block until the cluster at `address` has `nodes` live nodes and `gpus` GPUs, or fail."""
    import ray

    deadline = time.monotonic() + timeout_s
    seen, last_error = (0, 0.0), None
    while time.monotonic() < deadline:
        try:
            ray.init(address=address, logging_level="ERROR")
            try:
                alive = [n for n in ray.nodes() if n.get("Alive")]
                seen = (len(alive), float(ray.cluster_resources().get("GPU", 0.0)))
            finally:
                ray.shutdown()
            if seen[0] >= nodes and seen[1] >= gpus:
                print(f"ray at {address}: {seen[0]} node(s), {seen[1]:g} GPU(s)")
                return
        except Exception as e:  # the head is not up yet: Ray raises several kinds for that
            last_error = e
        time.sleep(poll_s)
    raise TimeoutError(
        f"ray at {address}: {seen[0]} node(s), {seen[1]:g} GPU(s) after {timeout_s}s, wanted {nodes} and {gpus}"
        f" (last error: {last_error!r})"
    )
