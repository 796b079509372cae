"""GRPO on the CPU for the embedded default (verl cannot train on a CPU; its loss and advantage are
reproduced exactly by `toolcall_repro.rl`). Variants differ only in the filter and down-sampling config.

The train_grpo job calls `train_grpo` here for the local engine (`engines.train`); by hand:
`toolcall-repro stage train_grpo --describe`.

One step: take the next batch of the epoch's active set, sample n responses per prompt (prompt KV cache
shared by the n), score them, update streaks, pick the rows to back-propagate (all n, or m of them),
compute GRPO advantages, a token-mean clipped update in `ppo_mini_batches` optimizer steps. Checkpoints every `checkpoint_every` steps with
held-out accuracy; `resume` continues from the newest checkpoint with identical later metrics.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from toolcall_repro.engines.fingerprint import run_fingerprint
from toolcall_repro.engines.local.checkpoint import (
    checkpoint_fingerprint,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from toolcall_repro.engines.local.model import load_policy, save_hf_dir, set_threads
from toolcall_repro.engines.local.prompts import PromptRecord, build_prompts, load_samples
from toolcall_repro.engines.local.rollout import sample_groups
from toolcall_repro.engines.local.tracking import Tracker
from toolcall_repro.engines.local.update import UpdateRow, policy_update
from toolcall_repro.io import write_jsonl
from toolcall_repro.progress import Progress, duration
from toolcall_repro.rewards import reward_for_setting
from toolcall_repro.rl import StreakFilter, group_advantages, select_subset, step_metrics
from toolcall_repro.rl.metrics import epoch_report
from toolcall_repro.runconfig import RunConfig, parse_run


@dataclass
class TrainState:
    """Everything besides weights and optimizer that a resumed run needs to continue identically."""

    step: int = 0
    epoch: int = 0
    position: int = 0  # prompts of the epoch's shuffled active set already used
    cumulative_s: float = 0.0
    cumulative_device_s: float = 0.0
    eval_s: float = 0.0
    metrics: list = field(default_factory=list)
    curve: list = field(default_factory=list)
    filter: dict = field(default_factory=dict)
    fingerprint: str = ""
    resumed_from: list = field(default_factory=list)



def parse_config(raw) -> RunConfig:
    """The run config on engines.training local (runconfig.parse_run): a missing, unknown or out-of-range
    key is a clear error."""
    return parse_run(raw, engine="local")

def _seed_for(*parts: int) -> int:
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1)[0])


def fingerprint(cfg: RunConfig, seed: int, records: list[PromptRecord], base_dir: str | Path) -> str:
    """A resumed run must be the same run: same config, seed, prompts and base weights (the rule the
    verl engine resumes by too: engines/fingerprint.py)."""
    return run_fingerprint(cfg.to_dict(), seed, [(r.id, str(r.prompt_ids)) for r in records], base_dir)


def _decode(tokenizer, ids) -> str:
    ids = list(ids)
    if ids and ids[-1] == tokenizer.eos_token_id:
        ids = ids[:-1]
    return tokenizer.decode(ids, skip_special_tokens=False)


def heldout_scores(
    model, tokenizer, records: list[PromptRecord], reward_fn, cfg: RunConfig, log=None
) -> list[float] | None:
    """Greedy-decoding reward of each held-out prompt, in order; None without any.

    log: where progress lines go while it runs long (progress.EVERY_S apart; none for a quick one)."""
    if not records:
        return None
    progress = Progress(len(records), "held-out greedy", log, unit="prompts")
    scores = []
    for start in range(0, len(records), cfg.eval_batch_size):
        chunk = records[start : start + cfg.eval_batch_size]
        groups = sample_groups(
            model,
            [r.prompt_ids for r in chunk],
            1,
            temperature=0.0,
            top_p=1.0,
            max_new_tokens=cfg.max_new_tokens,
            eos_id=tokenizer.eos_token_id,
            pad_id=tokenizer.pad_token_id,
        )
        for r, group in zip(chunk, groups, strict=True):
            scores.append(float(reward_fn(_decode(tokenizer, group[0].response_ids), r.ground_truth).score))
        progress.update(len(chunk))
    return scores


# Held-out sampling draws from a generator seeded by the prompt's position alone: every checkpoint and
# every run (vanilla, efficient, any training seed) sees the same random numbers for the same prompt,
# so a change in a prompt's sampled score is the policy's, not the draw's (common random numbers).
HELDOUT_SAMPLE_SALT = 20260


def heldout_sampled_scores(
    model, tokenizer, records: list[PromptRecord], reward_fn, cfg: RunConfig, log=None
) -> list[float] | None:
    """Mean reward of `cfg.heldout_samples` responses per held-out prompt, sampled at the training
    temperature and top_p, in order; None without prompts or with heldout_samples 0. log: as
    heldout_scores'."""
    if not records or cfg.heldout_samples < 1:
        return None
    progress = Progress(len(records), "held-out sampled", log, unit="prompts")
    scores = []
    for i, r in enumerate(records):
        generator = torch.Generator().manual_seed(_seed_for(HELDOUT_SAMPLE_SALT, i))
        (group,) = sample_groups(
            model,
            [r.prompt_ids],
            cfg.heldout_samples,
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            max_new_tokens=cfg.max_new_tokens,
            eos_id=tokenizer.eos_token_id,
            pad_id=tokenizer.pad_token_id,
            generator=generator,
        )
        rewards = [float(reward_fn(_decode(tokenizer, ro.response_ids), r.ground_truth).score) for ro in group]
        scores.append(float(np.mean(rewards)))
        progress.update()
    return scores


def heldout_accuracy(
    model, tokenizer, records: list[PromptRecord], reward_fn, cfg: RunConfig
) -> float | None:
    """Greedy-decoding accuracy (mean reward) on the held-out prompts; None without any."""
    scores = heldout_scores(model, tokenizer, records, reward_fn, cfg)
    return None if scores is None else float(np.mean(scores))


class GRPOTrainer:
    def __init__(self, cfg, model, tokenizer, train, heldout, reward_fn, seed, out_dir):
        self.cfg, self.model, self.tokenizer = cfg, model, tokenizer
        self.train, self.heldout, self.reward_fn = train, heldout, reward_fn
        self.seed, self.out_dir = seed, Path(out_dir)
        self.by_id = {r.id: r for r in train}
        self.all_ids = [r.id for r in train]
        f = cfg.filter
        self.streaks = (
            StreakFilter(f.k, f.probe_every, f.probe_fraction, f.semantics, seed, all_wrong_k=f.all_wrong_k)
            if f is not None
            else StreakFilter(None)  # tracking only: group types and transitions for vanilla runs
        )
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.tracker = None  # engines.local.tracking.Tracker: live curves (TensorBoard), never read back
        self.state = TrainState()

    # --- one step -------------------------------------------------------------------------------
    def _select(self, rewards: list[float], step: int, g: int) -> tuple[list[int], np.ndarray]:
        d = self.cfg.downsample
        if d is None:
            return list(range(len(rewards))), group_advantages(rewards, "group")[0]
        rng = np.random.default_rng(_seed_for(self.seed, step, g, 7))
        kept = select_subset(d.selection, rewards, d.m, rng)
        return kept, group_advantages(rewards, d.advantage_scope, kept)[0]

    def train_step(self, batch_ids: list[str]) -> dict:
        cfg, st, tok = self.cfg, self.state, self.tokenizer
        wall0, cpu0 = time.perf_counter(), time.process_time()
        records = [self.by_id[i] for i in batch_ids]
        generator = torch.Generator().manual_seed(_seed_for(self.seed, st.step))
        groups = sample_groups(
            self.model,
            [r.prompt_ids for r in records],
            cfg.n,
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            max_new_tokens=cfg.max_new_tokens,
            eos_id=tok.eos_token_id,
            pad_id=tok.pad_token_id,
            generator=generator,
            share_prefix=cfg.share_prefix,
        )
        gen_s, gen_cpu_s = time.perf_counter() - wall0, time.process_time() - cpu0
        rewards = [
            [self.reward_fn(_decode(tok, ro.response_ids), r.ground_truth).score for ro in group]
            for r, group in zip(records, groups, strict=True)
        ]
        self.streaks.update(st.epoch, dict(zip(batch_ids, rewards, strict=True)))
        rows = []
        for g, (r, group, rw) in enumerate(zip(records, groups, rewards, strict=True)):
            kept, adv = self._select(rw, st.step, g)
            rows += [
                UpdateRow(r.prompt_ids, group[j].response_ids, group[j].old_log_probs, float(adv[j]))
                for j in kept
            ]
        upd = policy_update(
            self.model,
            self.optimizer,
            rows,
            temperature=cfg.temperature,
            clip_low=cfg.clip_low,
            clip_high=cfg.clip_high,
            loss_agg=cfg.loss_agg,
            micro_batch_size=cfg.micro_batch_size,
            grad_clip=cfg.grad_clip,
            pad_id=tok.pad_token_id,
            mini_batches=cfg.ppo_mini_batches,
        )
        step_s, cpu_s = time.perf_counter() - wall0, time.process_time() - cpu0
        st.cumulative_s += step_s
        st.cumulative_device_s += cpu_s
        gen_tokens = sum(len(ro.response_ids) for group in groups for ro in group)
        prompt_tokens = sum(r.num_tokens for r in records) * cfg.n
        line = step_metrics(
            step=st.step + 1,
            epoch=st.epoch,
            groups=rewards,
            filter_stats=self.streaks.stats(),
            skipped_reward_mean=self.streaks.skipped_reward_mean(),
            gen_tokens=gen_tokens,
            update_tokens=upd["update_tokens"],
            total_num_tokens=gen_tokens + prompt_tokens,
            gen_rows=len(records) * cfg.n,
            update_rows=len(rows),
            timings={
                "gen": gen_s,
                "update_actor": upd["update_s"],
                "optimizer": upd["optimizer_s"],
                "step": step_s,
            },
            cumulative_s=st.cumulative_s,
            cumulative_device_s=st.cumulative_device_s,
        )
        line.update(
            {
                "timing_cpu_s/gen": gen_cpu_s,
                "timing_cpu_s/update_actor": upd["update_cpu_s"],
                "timing_cpu_s/optimizer": upd["optimizer_cpu_s"],
                "timing_cpu_s/step": cpu_s,
                "actor/pg_loss": upd["loss"],
                "actor/pg_clipfrac": upd["pg_clipfrac"],
                "actor/pg_clipfrac_lower": upd["pg_clipfrac_lower"],
                "actor/pg_clipfrac_later_minibatches": upd["pg_clipfrac_later"],
                "actor/ppo_kl": upd["ppo_kl"],
                "actor/optimizer_steps": upd["optimizer_steps"],
                "actor/grad_norm": upd["grad_norm"],
                "response_length/mean": gen_tokens / (len(records) * cfg.n),
            }
        )
        return line

    # --- checkpoints and evaluation ---------------------------------------------------------------
    def evaluate(self, log=None) -> float:
        """Score the held-out prompts at the current step (a curve row); returns the seconds it took."""
        st = self.state
        t0 = time.perf_counter()
        scores = heldout_scores(self.model, self.tokenizer, self.heldout, self.reward_fn, self.cfg, log)
        sampled = heldout_sampled_scores(self.model, self.tokenizer, self.heldout, self.reward_fn, self.cfg, log)
        took = time.perf_counter() - t0
        st.eval_s += took
        st.curve.append(
            {
                "step": st.step,
                "epoch": st.epoch,
                "heldout_accuracy": None if scores is None else float(np.mean(scores)),
                # per prompt, in held-out order (summary.json: heldout_ids): paired intervals need them
                "heldout_outcomes": scores,
                # the same prompts sampled (heldout_samples a prompt): each outcome a fraction correct
                "heldout_sampled_accuracy": None if sampled is None else float(np.mean(sampled)),
                "heldout_sampled_outcomes": sampled,
                "time/cumulative_s": st.cumulative_s,
                "time/cumulative_device_s": st.cumulative_device_s,
            }
        )
        return took

    def checkpoint(self) -> None:
        self.state.filter = self.streaks.state_dict()
        save_checkpoint(
            self.out_dir / "checkpoints",
            self.state.step,
            self.model,
            self.optimizer,
            self.state.__dict__,
            keep=self.cfg.keep_checkpoints,
        )

    def restore(self, path: Path) -> None:
        saved = load_checkpoint(path, self.model, self.optimizer)
        self.state = TrainState(**saved)
        self.streaks.load_state_dict(self.state.filter)
        self.state.resumed_from.append(self.state.step)

    # --- the loop -------------------------------------------------------------------------------
    def done(self) -> bool:
        st, cfg = self.state, self.cfg
        return st.epoch >= cfg.epochs or (cfg.max_steps is not None and st.step >= cfg.max_steps)

    def steps_estimate(self, epoch_prompts: int) -> tuple[int, bool]:
        """(steps the run will have taken, whether that is an estimate), after a step of an epoch of
        `epoch_prompts` active prompts: the epochs left are taken to be as long as that one (exact without
        a filter, whose epochs shrink)."""
        st, cfg = self.state, self.cfg
        per_epoch = -(-epoch_prompts // cfg.batch_size)
        if st.position:  # mid-epoch: the rest of this one, then whole ones
            left = -(-(epoch_prompts - st.position) // cfg.batch_size) + (cfg.epochs - st.epoch - 1) * per_epoch
        else:
            left = (cfg.epochs - st.epoch) * per_epoch
        total = st.step + max(0, left)
        if cfg.max_steps is not None and cfg.max_steps <= total:
            return cfg.max_steps, False
        return total, cfg.filter is not None

    def fit(self, log=print) -> None:
        st, cfg = self.state, self.cfg
        if not st.curve:
            took = self.evaluate(log)
            self._track_checkpoint()
            log(f"step 0 heldout_accuracy {st.curve[-1]['heldout_accuracy']} (held-out eval {duration(took)})")
        # A log line per step, with the steps left and the time they will take at this run's pace so far
        # (this process's steps, checkpoints included); wall time, in the log only, never in a result.
        progress = Progress(None, "grpo", None, start=st.step)
        while not self.done():
            active = self.streaks.active_set(st.epoch, self.all_ids)
            order = [active[i] for i in np.random.default_rng([self.seed, st.epoch]).permutation(len(active))]
            if st.position >= len(order):  # an epoch with nothing left to generate for
                st.epoch, st.position = st.epoch + 1, 0
                continue
            batch = order[st.position : st.position + cfg.batch_size]
            line = self.train_step(batch)
            st.step, st.position = st.step + 1, st.position + len(batch)
            if st.position >= len(order):
                st.epoch, st.position = st.epoch + 1, 0
            st.metrics.append(line)
            if self.tracker is not None:
                self.tracker.step(st.step, line)
            total, approx = self.steps_estimate(len(order))
            progress.advance(done=st.step, total=total, approx=approx)
            log(
                f"step {progress.status()} epoch {line['epoch']} reward {line['reward/active_mean']:.3f} "
                f"mixed {line['group/mixed_frac']:.2f} skipped {line['filter/skipped']} "
                f"gen {line['timing_s/gen']:.2f}s update {line['timing_s/update_actor']:.2f}s, "
                f"{progress.estimate()}"
            )
            if st.step % cfg.checkpoint_every == 0 or self.done():
                took = self.evaluate(log)
                self._track_checkpoint()
                self.checkpoint()
                log(
                    f"checkpoint step {st.step} heldout_accuracy {st.curve[-1]['heldout_accuracy']} "
                    f"(held-out eval {duration(took)})"
                )

    def _track_checkpoint(self) -> None:
        if self.tracker is not None:
            self.tracker.checkpoint(self.state.step, self.state.curve[-1])

    def summary(self, setting: str, variant: str | None, dropped: dict) -> dict:
        st, m = self.state, self.state.metrics
        s = self.streaks.stats()
        epochs_built = (s["epoch"] + 1) if s["epoch"] is not None else 0
        # on the CPU clock, as the analysis reads it (runstats.clock): wall seconds grow when the job waits
        step_s = sum(x["timing_cpu_s/step"] for x in m)
        update_s = sum(x["timing_cpu_s/update_actor"] + x["timing_cpu_s/optimizer"] for x in m)
        accs = [c["heldout_accuracy"] for c in st.curve if c["heldout_accuracy"] is not None] or [None]
        sampled = [c.get("heldout_sampled_accuracy") for c in st.curve]
        sampled = [a for a in sampled if a is not None] or [None]
        return {
            "setting": setting,
            "variant": variant,
            "seed": self.seed,
            "config": self.cfg.to_dict(),
            "steps": st.step,
            "epochs": st.epoch,
            "train_prompts": len(self.train),
            "heldout_prompts": len(self.heldout),
            "heldout_ids": [r.id for r in self.heldout],
            "dropped": dropped,
            "heldout_accuracy": {
                "initial": accs[0],
                "final": accs[-1],
                "best": None if accs[0] is None else max(accs),
            },
            "heldout_sampled_accuracy": {
                "samples": self.cfg.heldout_samples,
                "initial": sampled[0],
                "final": sampled[-1],
                "best": None if sampled[0] is None else max(sampled),
            },
            "filter_rate": s["cumulative_skips"] / (epochs_built * len(self.train)) if epochs_built else 0.0,
            "filter_precision": s["precision"],
            "update_share": update_s / step_s if step_s else None,
            "gen_tokens": sum(x["perf/gen_tokens"] for x in m),
            "update_tokens": sum(x["perf/update_tokens"] for x in m),
            "first_step_group_fractions": {
                k: m[0][f"group/{k}_frac"] for k in ("all_correct", "all_wrong", "mixed")
            }
            if m
            else None,
            # the regime: group types of each whole epoch, filter counts, coverage, transition matrix
            "epochs_report": epoch_report(m),
            "time/cumulative_s": st.cumulative_s,
            "time/cumulative_device_s": st.cumulative_device_s,
            "time/eval_s": st.eval_s,
            "resumed_from": st.resumed_from,
            "torch_threads": torch.get_num_threads(),
        }


def train_grpo(
    *,
    train: str,
    heldout: str,
    base: str,
    config: RunConfig,
    out: str,
    seed: int,
    threads: int | None = None,
    resume: bool = False,
    log=print,
    trackers: tuple[str, ...] = (),
) -> dict:
    """One GRPO run from the typed run config (parse_config); writes the run's outputs under out.

    The train_grpo job (engines.train.train_grpo) calls this. threads: torch's thread
    count (None: leave it as set); resume: continue from the newest checkpoint of the same run;
    trackers: live curves under out/tensorboard (engines.local.tracking; config engines.tracking).
    """
    cfg = config
    if threads is not None:
        set_threads(threads)
    variant = cfg.variant
    model, tokenizer = load_policy(base)
    thinking = cfg.enable_thinking
    train_records, dropped_train = build_prompts(load_samples([train]), tokenizer, cfg.max_prompt_tokens, thinking)
    heldout_records, dropped_heldout = build_prompts(
        load_samples([heldout]), tokenizer, cfg.max_prompt_tokens, thinking
    )
    heldout_records = heldout_records[: cfg.heldout_size]
    if not train_records:
        raise ValueError(f"{train}: no training prompt fits max_prompt_tokens={cfg.max_prompt_tokens}")
    settings = {r.setting for r in train_records}
    setting = cfg.setting or (settings.pop() if len(settings) == 1 else None)
    if setting is None:
        raise ValueError(f"{train} mixes settings {sorted(settings)}: name the run config's setting")
    out_dir = Path(out)
    trainer = GRPOTrainer(
        cfg, model, tokenizer, train_records, heldout_records, reward_for_setting(setting), seed, out_dir
    )
    fp = fingerprint(cfg, seed, train_records, base)
    trainer.state.fingerprint = fp
    latest = latest_checkpoint(out_dir / "checkpoints")
    if latest is not None and resume and checkpoint_fingerprint(latest) == fp:
        trainer.restore(latest)
        log(f"resumed from {latest}")
    elif latest is not None:
        # Another run's checkpoints (config, seed, data or base model changed, or no --resume): never
        # continue from them; a later --resume must not find them either.
        log(
            f"discarding checkpoints in {out_dir / 'checkpoints'}: "
            + ("another run's" if resume else "no --resume")
        )
        shutil.rmtree(out_dir / "checkpoints")
    trainer.tracker = Tracker(out_dir / "tensorboard", setting, tuple(trackers)) if trackers else None
    try:
        trainer.fit(log)
    finally:
        if trainer.tracker is not None:
            trainer.tracker.close()
    summary = trainer.summary(setting, variant, {"train": dropped_train, "heldout": dropped_heldout})
    save_hf_dir(model, tokenizer, out_dir / "final")
    write_jsonl(trainer.state.curve, out_dir / "curve.jsonl")
    write_jsonl(trainer.state.metrics, out_dir / "metrics.jsonl")
    write_jsonl([summary], out_dir / "summary.json")  # one line, written last: the run's completion marker
    return summary


def summary_line(summary: dict) -> str:
    """The line a finished run prints (steps, held-out accuracy, time)."""
    return json.dumps({k: summary[k] for k in ("steps", "heldout_accuracy", "time/cumulative_s")})
