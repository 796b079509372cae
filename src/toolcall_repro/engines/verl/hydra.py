"""Hydra overrides for verl 0.9.1's `ppo_trainer` config, generated from our run config.

Pure: config dicts in, a list of override strings out. Three inputs:
  run      one training run (`train.settings.<setting>` merged with `train.variants.<variant>`, as the
           `train_grpo` rule passes it): lr, batch_size, n, temperature, top_p, max_prompt_tokens,
           max_response_tokens (or max_new_tokens), epochs, clip_low, clip_high, loss_agg,
           checkpoint_every, filter, downsample, and max_steps (optional: verl's total_training_steps);
  verl     the cluster knobs (`train.verl`): nodes, gpus_per_node, tensor_parallel, ...;
  paths    where the data, the base model and every output live (all inside the results tree).
Our own settings (filter, down-sampling, seed, metric paths) travel in a `toolcall` section of the same
config, so the trainer reads one object and verl's logged config records them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields

from toolcall_repro.backends.vllm import CPU_KV_CACHE_BYTES
from toolcall_repro.runconfig import (
    LOSS_AGG,
    REQUIRED,
    ConfigError,
    DownsampleConfig,
    FilterConfig,
    RunConfig,
    effective_m,
    m_problem,
    must,
    parse_run,
)

REWARD_MODULE = "pkg://toolcall_repro.engines.verl.reward"
PROJECT = "toolcall-repro"

VERL_DEFAULTS: dict = {
    # gpu: the cluster. cpu: verl's real trainer and vLLM on the host CPU at toy scale (cpu_platform.py),
    # to run a paper config end to end before a cluster is paid for (and in `make test`).
    "device": "gpu",
    # The actor's and reference's FSDP: fsdp2 (torch's fully_shard), verl's recommended one and the one that
    # runs on a CPU too, so a CPU run checks the code path the cluster runs (fsdp: verl's FSDP1 default).
    "strategy": "fsdp2",
    "nodes": 1,
    "gpus_per_node": 8,
    "tensor_parallel": 2,
    "gpu_memory_utilization": 0.6,
    "ppo_mini_batch_size": None,  # prompts per optimizer step; None = batch_size (one update a step)
    "max_token_len_per_gpu": 16384,
    "ulysses_sp": 1,
    "param_offload": False,
    "optimizer_offload": False,
    "gradient_checkpointing": True,
    "max_checkpoints_to_keep": 2,
    "ray_num_cpus": None,  # None: let Ray count (multi-node joins a cluster started by `ray start`)
    "val_temperature": 0.0,
    # HF attention of the actor: auto = flash_attention_2 if flash-attn is importable in the job's env,
    # else sdpa (verl's own default, flash_attention_2, fails at from_pretrained without flash-attn).
    "attn_implementation": "auto",
    "vllm": {"enforce_eager": False, "max_num_batched_tokens": 8192, "max_num_seqs": 256},
    "extra_overrides": [],
    # verl loggers besides console and file: tensorboard, wandb, mlflow (the workflow passes engines.tracking)
    "trackers": [],
}
# train.verl keys that change how fast or where a step runs, never what it computes nor how the actor's
# checkpoint is laid out: the resume fingerprint leaves them out (run_identity), so retuning one for a retry
# (an OOM, a busier node) resumes the run. Each: the overrides it writes, and why it is performance only.
# Not here on purpose: nodes, gpus_per_node and ulysses_sp (the FSDP checkpoint is sharded by rank and
# mesh), max_token_len_per_gpu (verl weights each micro-batch's loss by its rows: the cut can move the
# gradient), ppo_mini_batch_size (optimizer steps), val_temperature (what the held-out curve measures).
PERFORMANCE_ONLY: dict[str, tuple[tuple[str, ...], str]] = {
    "gpu_memory_utilization": (
        ("actor_rollout_ref.rollout.gpu_memory_utilization",),
        "vLLM's share of GPU memory (KV cache): how many sequences fit at once",
    ),
    "tensor_parallel": (
        ("actor_rollout_ref.rollout.tensor_model_parallel_size",),
        "how vLLM shards the rollout engine; the actor and its checkpoint are FSDP's",
    ),
    "vllm": (
        (
            "actor_rollout_ref.rollout.enforce_eager",
            "actor_rollout_ref.rollout.max_num_batched_tokens",
            "actor_rollout_ref.rollout.max_num_seqs",
        ),
        "vLLM's CUDA graphs and scheduler batch sizes",
    ),
    "gradient_checkpointing": (
        ("actor_rollout_ref.model.enable_gradient_checkpointing",),
        "activations recomputed instead of kept: the same gradients",
    ),
    "param_offload": (("actor_rollout_ref.actor.fsdp_config.param_offload",), "where FSDP keeps parameters"),
    "optimizer_offload": (
        ("actor_rollout_ref.actor.fsdp_config.optimizer_offload",),
        "where FSDP keeps optimizer state",
    ),
    "attn_implementation": (
        (
            "actor_rollout_ref.model.override_config.attn_implementation",
            "actor_rollout_ref.model.use_remove_padding",
        ),
        "the attention kernel (exact attention either way); `auto` follows the job's env",
    ),
    "ray_num_cpus": (("ray_kwargs.ray_init.num_cpus",), "CPUs Ray schedules workers on"),
    "max_checkpoints_to_keep": (("trainer.max_actor_ckpt_to_keep",), "how many checkpoints stay on disk"),
    "extra_overrides": ((), "site-specific settings (NCCL, logging, timeouts); the math has run-config keys"),
    "trackers": (("trainer.logger",), "where live curves go (TensorBoard, W&B, MLflow): logging only"),
}


# The run keys verl's overrides need (runconfig.REQUIRED less what verl reads elsewhere or may leave out:
# response length from max_response_tokens or max_new_tokens, the held-out set, the two speed-ups).
RUN_KEYS = tuple(k for k in REQUIRED if k not in ("max_new_tokens", "heldout_size", "filter", "downsample"))
LOSS_AGG_MODES = LOSS_AGG["verl"]  # the registry is runconfig.LOSS_AGG (local modes + verl-only ones)
ATTN_IMPLEMENTATIONS = ("auto", "flash_attention_2", "sdpa", "eager")
DEVICES = ("gpu", "cpu")
STRATEGIES = ("fsdp2", "fsdp")
# Ray's logical CPUs for a CPU run when train.verl.ray_num_cpus is unset: verl's placement group asks for
# more CPUs than a 2-core machine has (it waits forever with 2); logical CPUs cost nothing.
CPU_RAY_NUM_CPUS = 8


# A run config that verl would reject (or accept and then train wrongly): the one config error type.
VerlConfigError = ConfigError


@dataclass(frozen=True)
class RunPaths:
    """Every path the verl run reads or writes; the launch script derives them from `--out`."""

    train_files: str
    val_files: str
    model: str
    checkpoints: str
    log_jsonl: str
    filter_state: str
    final_validation: str
    validation_dir: str
    tensorboard_dir: str = ""  # verl's tensorboard logger writes here (TENSORBOARD_DIR): live curves

    @classmethod
    def under(cls, out_dir: str, model: str) -> RunPaths:
        work = f"{out_dir.rstrip('/')}/verl"
        return cls(
            train_files=f"{work}/train.parquet",
            val_files=f"{work}/heldout.parquet",
            model=model,
            checkpoints=f"{out_dir.rstrip('/')}/checkpoints",
            log_jsonl=f"{work}/log.jsonl",
            filter_state=f"{work}/filter_state.json",
            final_validation=f"{work}/final_validation.json",
            validation_dir=f"{work}/validation",
            tensorboard_dir=f"{out_dir.rstrip('/')}/tensorboard",
        )


def merged_verl(verl: Mapping | None) -> dict:
    """`train.verl` over the defaults (nested `vllm` merged key by key); unknown keys are an error."""
    verl = dict(verl or {})
    unknown = sorted(set(verl) - set(VERL_DEFAULTS))
    if "gpu_model" in unknown:  # a site setting: one place for the GPU type of every GPU job
        raise VerlConfigError(
            "train.verl.gpu_model is a site setting now: set gpu_model in the site settings of "
            "profiles/slurm/config.yaml and remove it here"
        )
    if unknown:
        raise VerlConfigError(f"train.verl has unknown keys {unknown}; known: {sorted(VERL_DEFAULTS)}")
    out = {**VERL_DEFAULTS, **verl}
    out["vllm"] = {**VERL_DEFAULTS["vllm"], **(verl.get("vllm") or {})}
    if out["device"] not in DEVICES:
        raise VerlConfigError(f"train.verl.device={out['device']!r}; allowed: {list(DEVICES)}")
    if out["strategy"] not in STRATEGIES:
        raise VerlConfigError(f"train.verl.strategy={out['strategy']!r}; allowed: {list(STRATEGIES)}")
    if out["device"] == "cpu" and out["strategy"] != "fsdp2":
        raise VerlConfigError(
            "train.verl.device=cpu needs train.verl.strategy=fsdp2 (FSDP1 asks for an accelerator device)"
        )
    return out


def device_environment(verl: Mapping | None) -> dict[str, str]:
    """The environment variables a verl process of this run needs before `import verl` ({} on a GPU)."""
    if merged_verl(verl)["device"] != "cpu":
        return {}
    # The driver and every Ray worker: one OpenMP thread each (several workers share the job's cores).
    return {
        "VERL_USE_EXTERNAL_MODULES": "toolcall_repro.engines.verl.cpu_platform",
        "VERL_PLATFORM": "cpu",
        # verl registers its FSDP engine for cuda/npu only: the lookup finds it under cuda/nvidia
        "VERL_ENGINE_DEVICE": "cuda",
        "VERL_ENGINE_VENDOR": "nvidia",
        "VLLM_CPU_KVCACHE_SPACE": str(CPU_KV_CACHE_BYTES >> 30),  # GiB: the rollout's, as generation's
        "VLLM_CPU_OMP_THREADS_BIND": "nobind",  # the job's cores are whatever its scheduler gave it
        "OMP_NUM_THREADS": "1",
    }


def device_overrides(verl: Mapping) -> list[str]:
    """What a CPU run changes in verl's config (none on a GPU): see cpu_platform.py."""
    if verl["device"] != "cpu":
        return []
    gpus = int(verl["nodes"]) * int(verl["gpus_per_node"])
    return [
        "trainer.device=cpu",
        # the workers' GPU resources, as logical ones of the local Ray (one per worker)
        f"+ray_kwargs.ray_init.num_gpus={gpus}",
        # vLLM on a CPU: no sleep mode ("not supported on current platform"), no CUDA graphs
        "+actor_rollout_ref.rollout.enable_sleep_mode=false",
    ]


def response_tokens(run: Mapping) -> int:
    for key in ("max_response_tokens", "max_new_tokens"):
        if run.get(key) is not None:
            return int(run[key])
    raise VerlConfigError("run config needs max_response_tokens (or max_new_tokens)")


@dataclass(frozen=True)
class Geometry:
    """Batch shapes of one step: prompts, rows generated, rows updated, rows per optimizer step."""

    prompts: int  # data.train_batch_size
    n: int
    m: int  # rollouts kept per prompt (n without down-sampling)
    mini_prompts: int  # ppo_mini_batch_size as configured (prompts)
    scaled_mini_prompts: int  # ppo_mini_batch_size while updating on m of n rollouts
    dp: int  # data-parallel ranks of the actor

    @property
    def update_rows(self) -> int:
        return self.prompts * self.m

    @property
    def mini_rows(self) -> int:
        return self.mini_prompts * self.m


def mini_batch_prompts(run: Mapping, verl: Mapping, prompts: int) -> int:
    """Prompts per optimizer step: train.verl.ppo_mini_batch_size, else the run's `ppo_mini_batches`
    (optimizer steps per batch, the local engine's knob) as batch_size / ppo_mini_batches; both set
    must agree, so one knob means the same in both engines."""
    steps = run.get("ppo_mini_batches")
    if steps is not None and (int(steps) < 1 or prompts % int(steps)):
        raise VerlConfigError(f"ppo_mini_batches={steps} must be >= 1 and divide batch_size={prompts}")
    size = verl["ppo_mini_batch_size"]
    if size is None:
        return prompts // int(steps) if steps is not None else prompts
    if steps is not None and int(size) * int(steps) != prompts:
        raise VerlConfigError(
            f"train.verl.ppo_mini_batch_size={size} and train.settings.<setting>.ppo_mini_batches={steps}"
            f" disagree: batch_size={prompts} / {steps} = {prompts // int(steps)}; set one of them"
        )
    return int(size)


def geometry(run: Mapping, verl: Mapping) -> Geometry:
    """Check that every step's batch splits evenly; raise `VerlConfigError` naming the keys if not.

    verl splits the update batch into mini-batches of `ppo_mini_batch_size x rollout.n` rows and each
    of those evenly over the data-parallel ranks; after down-sampling the worker must see
    `ppo_mini_batch_size x m` rows instead, so the adapter scales ppo_mini_batch_size by m/n.
    """
    verl = merged_verl(verl)
    missing = [k for k in RUN_KEYS if run.get(k) is None]
    if missing:
        raise VerlConfigError(f"run config lacks {missing}")
    prompts, n = int(run["batch_size"]), int(run["n"])
    if n < 2:
        raise VerlConfigError(f"GRPO needs n >= 2 rollouts per prompt, got n={n}")
    m = effective_m(run)
    if run.get("downsample") and m_problem(m, n):
        raise VerlConfigError(must("downsample.m", m_problem(m, n), m))
    mini = mini_batch_prompts(run, verl, prompts)
    if prompts % mini:
        raise VerlConfigError(f"batch_size={prompts} must be a multiple of ppo_mini_batch_size={mini}")
    if (mini * m) % n:
        raise VerlConfigError(
            f"ppo_mini_batch_size={mini} x m={m} must be a multiple of n={n}: verl counts mini-batches"
            " in prompts x rollout.n, so the scaled size ppo_mini_batch_size x m / n must be whole"
        )
    gpus = int(verl["nodes"]) * int(verl["gpus_per_node"])
    if gpus < 1:
        raise VerlConfigError("train.verl needs nodes >= 1 and gpus_per_node >= 1")
    tp, sp = int(verl["tensor_parallel"]), int(verl["ulysses_sp"])
    if int(verl["gpus_per_node"]) % tp:
        raise VerlConfigError(f"tensor_parallel={tp} must divide gpus_per_node={verl['gpus_per_node']}")
    if gpus % sp:
        raise VerlConfigError(f"ulysses_sp={sp} must divide the {gpus} GPUs")
    dp = gpus // sp
    for label, rows in (("generated", prompts * n), ("updated", prompts * m), ("mini-batch", mini * m)):
        if rows % dp:
            raise VerlConfigError(
                f"the {label} batch of {rows} rows does not split over {dp} data-parallel ranks"
                f" (batch_size={prompts}, n={n}, m={m}, ppo_mini_batch_size={mini})"
            )
    return Geometry(prompts, n, m, mini, mini * m // n, dp)


def check_variant(run: Mapping) -> RunConfig:
    """The typed run config both engines read (runconfig), with verl's limits (loss modes, held-out)."""
    return parse_run(run, "verl")


def attention(verl: Mapping, flash_attn_installed: bool) -> str:
    """The actor's attention implementation; one the job's env cannot run is an error here."""
    impl = merged_verl(verl)["attn_implementation"]
    if impl not in ATTN_IMPLEMENTATIONS:
        raise VerlConfigError(f"train.verl.attn_implementation={impl!r}; allowed: {ATTN_IMPLEMENTATIONS}")
    if impl == "auto":
        impl = "flash_attention_2" if flash_attn_installed else "sdpa"
    if impl == "flash_attention_2" and not flash_attn_installed:
        raise VerlConfigError(
            "train.verl.attn_implementation=flash_attention_2 but flash_attn is not importable in this env"
            " (set it to auto or sdpa, or install flash-attn)"
        )
    if int(merged_verl(verl)["ulysses_sp"]) > 1 and impl != "flash_attention_2":
        raise VerlConfigError(f"train.verl.ulysses_sp > 1 needs flash_attention_2, not {impl}")
    return impl


def max_steps(run: Mapping) -> int | None:
    """`max_steps` (the Tool-N1 filter policy's 80): verl's total_training_steps; None = all epochs."""
    value = run.get("max_steps")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise VerlConfigError(f"max_steps must be an int >= 1 or null, got {value!r}")
    return value


_BARE = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")


def hydra_value(value: object) -> str:
    """One value in Hydra's override grammar (strings quoted unless a bare word)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise VerlConfigError(f"non-finite value {value} in the verl config")
        return repr(value)
    if isinstance(value, str):
        if _BARE.match(value) and value not in ("null", "true", "false"):
            return value
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    raise VerlConfigError(f"cannot write {type(value).__name__} {value!r} as a Hydra value")


def flat_overrides(prefix: str, value: object, add: bool = False) -> list[str]:
    """`prefix=value`, or one override per leaf for a mapping (`+` adds keys verl does not define)."""
    plus = "+" if add else ""
    if isinstance(value, Mapping) and value:
        out: list[str] = []
        for key in sorted(value):
            out += flat_overrides(f"{prefix}.{key}", value[key], add)
        return out
    if isinstance(value, Mapping):
        return [f"{plus}{prefix}={{}}"]
    return [f"{plus}{prefix}={hydra_value(value)}"]


@dataclass(frozen=True)
class ToolcallSection:
    """Our settings in verl's composed config (key `toolcall`, written by `toolcall_section`), typed: the
    trainer subclass (adapter.py) reads them back once, through `read`, and then by field."""

    setting: str | None
    variant: str | None
    seed: int
    filter: FilterConfig | None
    downsample: DownsampleConfig | None
    scaled_mini_batch_size: int
    log_jsonl: str
    filter_state: str
    final_validation: str
    tensorboard_dir: str = ""
    fingerprint: str | None = None

    @classmethod
    def read(cls, section: Mapping) -> ToolcallSection:
        """The section as verl's config holds it (a plain mapping: OmegaConf.to_container); an unknown key
        is an error naming the known ones."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(section) - known)
        if unknown:
            raise VerlConfigError(f"toolcall: unknown keys {unknown}; known: {sorted(known)}")
        filt, down = section.get("filter"), section.get("downsample")
        return cls(**{
            **section,
            "filter": FilterConfig(**filt) if filt else None,
            "downsample": DownsampleConfig(**down) if down else None,
        })  # fmt: skip


def toolcall_section(
    run: Mapping, parsed: RunConfig, paths: RunPaths, seed: int, geo: Geometry, fingerprint: str | None = None
) -> dict:
    """Our settings, read by the trainer subclass and the sampler (config key `toolcall`); `parsed` is the
    run as check_variant typed it (its down-sampling with DownsampleConfig's selection/scope defaults)."""
    down = parsed.downsample
    return {
        "setting": run.get("setting"),
        "variant": run.get("variant"),
        "seed": int(seed),
        "filter": dict(run["filter"]) if run.get("filter") else None,
        "downsample": asdict(down) if down else None,
        "scaled_mini_batch_size": geo.scaled_mini_prompts,
        "log_jsonl": paths.log_jsonl,
        "filter_state": paths.filter_state,
        "final_validation": paths.final_validation,
        "tensorboard_dir": paths.tensorboard_dir,
        "fingerprint": fingerprint,  # the run's (engines.fingerprint); a resumed checkpoint must carry it
    }


VERL_TRACKERS = ("tensorboard", "wandb", "mlflow")


def trackers(verl: Mapping) -> list[str]:
    """verl's loggers besides console and file, from train.verl.trackers (the workflow passes
    engines.tracking there); an unknown one is an error naming the allowed ones."""
    names = list(verl.get("trackers") or [])
    unknown = sorted(set(names) - set(VERL_TRACKERS))
    if unknown:
        raise ValueError(f"verl trackers must be among {list(VERL_TRACKERS)}, got {unknown}")
    return names


def build_overrides(
    run: Mapping,
    verl: Mapping | None,
    paths: RunPaths,
    seed: int,
    *,
    flash_attn_installed: bool = False,
    fingerprint: str | None = None,
    resume_from: str | None = None,
) -> list[str]:
    """The complete override list for `verl/trainer/config/ppo_trainer.yaml` (legacy trainer).

    `resume_from`: a complete `global_step_<N>` checkpoint of this same run (launch.resume_point), or
    None for a first attempt. `flash_attn_installed`: whether the job's env can import flash_attn.
    """
    v = merged_verl(verl)
    geo = geometry(run, v)
    parsed = check_variant(run)  # the run's one typed parse on this route
    attn = attention(v, flash_attn_installed)
    ov = {
        **_data_overrides(run, paths, geo, seed),
        **_actor_overrides(run, v, paths, geo, seed, attn),
        **_rollout_overrides(run, v, geo, seed),
        **_trainer_overrides(run, v, paths),
    }
    out = [f"{k}={hydra_value(val)}" for k, val in ov.items()]
    # hf_model.yaml's override_config is an empty dict: the key is added ('+').
    out.append(f"+actor_rollout_ref.model.override_config.attn_implementation={attn}")
    # The chat template's kwargs in verl's dataset and agent loop (an empty dict too): Qwen3's thinking
    # switch, the one filtering and evaluation pass (config model.enable_thinking).
    out += [f"+data.apply_chat_template_kwargs.{k}={hydra_value(v)}" for k, v in template_kwargs(run).items()]
    out += flat_overrides("toolcall", toolcall_section(run, parsed, paths, seed, geo, fingerprint), add=True)
    out += device_overrides(v)
    # A retry continues the same run from its newest complete checkpoint (weights, optimizer, dataloader;
    # the filter's state rides in the same folder); a first attempt starts from the base weights.
    out += [
        f"trainer.resume_mode={'resume_path' if resume_from else 'disable'}",
        f"trainer.resume_from_path={hydra_value(resume_from)}",
    ]
    extra = list(v["extra_overrides"] or [])
    if any(not isinstance(x, str) or "=" not in x for x in extra):
        raise VerlConfigError(f"train.verl.extra_overrides must be 'key=value' strings, got {extra}")
    return out + extra


def _data_overrides(run: Mapping, paths: RunPaths, geo: Geometry, seed: int) -> dict:
    """GRPO itself and the dataset: files, batch, prompt and response lengths, shuffling."""
    max_prompt, max_response = int(run["max_prompt_tokens"]), response_tokens(run)
    return {
        "algorithm.adv_estimator": "grpo",
        "algorithm.norm_adv_by_std_in_grpo": True,
        "algorithm.use_kl_in_reward": False,
        # The legacy RayPPOTrainer is the one that still takes a train_sampler (see adapter.py).
        "trainer.use_v1": False,
        "data.train_files": paths.train_files,
        "data.val_files": paths.val_files,
        "data.prompt_key": "prompt",
        "data.train_batch_size": geo.prompts,
        "data.max_prompt_length": max_prompt,
        "data.max_response_length": max_response,
        "data.filter_overlong_prompts": True,
        "data.truncation": "error",
        "data.shuffle": True,
        "data.seed": int(seed),
    }


def _actor_overrides(run: Mapping, v: Mapping, paths: RunPaths, geo: Geometry, seed: int, attn: str) -> dict:
    """The policy model and its update: weights, attention, optimizer, the clipped loss, FSDP."""
    return {
        "actor_rollout_ref.model.path": paths.model,
        # Padding removal packs sequences into one row: only flash-attn's varlen kernels keep them apart.
        "actor_rollout_ref.model.use_remove_padding": attn == "flash_attention_2",
        "actor_rollout_ref.model.enable_gradient_checkpointing": bool(v["gradient_checkpointing"]),
        "actor_rollout_ref.actor.optim.lr": float(run["lr"]),
        "actor_rollout_ref.actor.ppo_mini_batch_size": geo.mini_prompts,
        "actor_rollout_ref.actor.ppo_epochs": 1,
        "actor_rollout_ref.actor.use_dynamic_bsz": True,
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu": int(v["max_token_len_per_gpu"]),
        "actor_rollout_ref.actor.use_kl_loss": False,
        "actor_rollout_ref.actor.entropy_coeff": 0,
        "actor_rollout_ref.actor.clip_ratio_low": float(run["clip_low"]),
        "actor_rollout_ref.actor.clip_ratio_high": float(run["clip_high"]),
        "actor_rollout_ref.actor.loss_agg_mode": run["loss_agg"],
        "actor_rollout_ref.actor.policy_loss.loss_mode": "vanilla",
        "actor_rollout_ref.actor.ulysses_sequence_parallel_size": int(v["ulysses_sp"]),
        # the legacy workers read actor.strategy (ref.strategy follows it), verl's engine workers each
        # engine's fsdp_config.strategy: all three name one strategy
        "actor_rollout_ref.actor.strategy": v["strategy"],
        "actor_rollout_ref.actor.fsdp_config.strategy": v["strategy"],
        "actor_rollout_ref.ref.fsdp_config.strategy": v["strategy"],
        "actor_rollout_ref.actor.fsdp_config.param_offload": bool(v["param_offload"]),
        "actor_rollout_ref.actor.fsdp_config.optimizer_offload": bool(v["optimizer_offload"]),
        "actor_rollout_ref.actor.data_loader_seed": int(seed),
    }


def _rollout_overrides(run: Mapping, v: Mapping, geo: Geometry, seed: int) -> dict:
    """Generation with vLLM (n rollouts a prompt, sampling, held-out decoding) and the reward function."""
    return {
        "actor_rollout_ref.rollout.name": "vllm",
        "actor_rollout_ref.rollout.n": geo.n,
        "actor_rollout_ref.rollout.temperature": float(run["temperature"]),
        "actor_rollout_ref.rollout.top_p": float(run["top_p"]),
        "actor_rollout_ref.rollout.seed": int(seed),
        "actor_rollout_ref.rollout.tensor_model_parallel_size": int(v["tensor_parallel"]),
        "actor_rollout_ref.rollout.gpu_memory_utilization": float(v["gpu_memory_utilization"]),
        "actor_rollout_ref.rollout.enforce_eager": bool(v["vllm"]["enforce_eager"]) or v["device"] == "cpu",
        "actor_rollout_ref.rollout.max_num_batched_tokens": int(v["vllm"]["max_num_batched_tokens"]),
        "actor_rollout_ref.rollout.max_num_seqs": int(v["vllm"]["max_num_seqs"]),
        # Held-out accuracy at checkpoints: greedy, one sample (the curve's `heldout_accuracy`).
        "actor_rollout_ref.rollout.val_kwargs.temperature": float(v["val_temperature"]),
        "actor_rollout_ref.rollout.val_kwargs.do_sample": float(v["val_temperature"]) > 0,
        "actor_rollout_ref.rollout.val_kwargs.n": 1,
        # Multi-turn samples are LoopTool-style prefixes (history in the prompt, reward on the next
        # call), so no tool is executed during rollout: one generation per sample.
        "actor_rollout_ref.rollout.multi_turn.enable": False,
        "actor_rollout_ref.rollout.agent.default_agent_loop": "single_turn_agent",
        "reward.custom_reward_function.path": REWARD_MODULE,
        "reward.custom_reward_function.name": "compute_score",
        "reward.reward_manager.name": "naive",
    }


def _trainer_overrides(run: Mapping, v: Mapping, paths: RunPaths) -> dict:
    """The trainer loop: loggers, nodes and GPUs, epochs and steps, checkpoints, validation, Ray."""
    steps, nodes, every = max_steps(run), int(v["nodes"]), int(run["checkpoint_every"])
    return {
        # console, our JSONL (engines.verl.metrics reads it) and the trackers config engines.tracking names
        # (tensorboard: event files under the run's tensorboard/; wandb, mlflow: verl's own loggers)
        "trainer.logger": ["console", "file", *trackers(v)],
        "trainer.project_name": PROJECT,
        "trainer.experiment_name": f"{run.get('setting', 'run')}-{run.get('variant', 'run')}",
        "trainer.nnodes": nodes,
        "trainer.n_gpus_per_node": int(v["gpus_per_node"]),
        "trainer.total_epochs": int(run["epochs"]),
        "trainer.total_training_steps": steps,
        "trainer.save_freq": every,
        "trainer.test_freq": every,
        "trainer.val_before_train": True,
        "trainer.critic_warmup": 0,
        "trainer.balance_batch": True,
        "trainer.default_local_dir": paths.checkpoints,
        "trainer.max_actor_ckpt_to_keep": v["max_checkpoints_to_keep"],
        # verl's default contents: a resumed run needs the optimizer's moments and the LR/RNG state
        # ("extra") to continue as the uninterrupted run would; load_contents follows save_contents.
        "actor_rollout_ref.actor.checkpoint.save_contents": ["model", "optimizer", "extra"],
        "trainer.validation_data_dir": paths.validation_dir,
        "ray_kwargs.ray_init.num_cpus": ray_cpus(v),
    }


def ray_cpus(verl: Mapping) -> int | None:
    """Ray's CPUs for one node (several nodes join a cluster started by `ray start`: None)."""
    if int(verl["nodes"]) != 1:
        return None
    if verl["ray_num_cpus"] is None and verl["device"] == "cpu":
        return CPU_RAY_NUM_CPUS
    return verl["ray_num_cpus"]


def template_kwargs(run: Mapping) -> dict:
    """data.apply_chat_template_kwargs of a run: the model's thinking switch when the config sets one."""
    thinking = run.get("enable_thinking")
    return {} if thinking is None else {"enable_thinking": bool(thinking)}


def run_identity(
    run: Mapping, verl: Mapping | None, paths: RunPaths, seed: int, *, flash_attn_installed: bool = False
) -> list[str]:
    """What a run computes, as overrides: build_overrides less the PERFORMANCE_ONLY ones (the resume
    fingerprint hashes this list). Raises as build_overrides does, so a bad geometry fails here first."""
    v = {**merged_verl(verl), "extra_overrides": []}
    skip = {key for keys, _ in PERFORMANCE_ONLY.values() for key in keys}
    full = build_overrides(run, v, paths, seed, flash_attn_installed=flash_attn_installed)
    return [o for o in full if o.split("=", 1)[0].lstrip("+") not in skip]


def overrides_text(overrides: list[str]) -> str:
    """One override a line: the file the launch scripts hand to `python -m toolcall_repro.engines.verl`."""
    return "".join(f"{o}\n" for o in overrides)


def read_overrides(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
