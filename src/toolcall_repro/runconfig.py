"""One training run's config, for both engines: composed from the workflow config, typed, checked once.

A run is `train.settings.<setting>` merged with `train.variants.<variant>` (`compose_run`, which the
workflow's `run_config` calls). `parse_run` turns that dict into a `RunConfig` for one engine;
`preflight.validate_config` checks every run the DAG builds before any job, so a bad config fails in
`snakemake -n` with a few lines naming the key, the value and what is allowed.

The allowed values have one home each: selections, advantage scopes and filter semantics are the RL
core's registries (`rl.SELECTORS`, `rl.SCOPES`, `rl.SEMANTICS`), loss aggregation the modes each engine
implements (`LOSS_AGG`), m's range `m_problem` (and the m a run back-propagates `effective_m`), the
filter's probe schedule rule `rl.filter_problems`. The JSON Schema (workflow/schemas/config.schema.yaml)
holds their types only; tests/test_runconfig.py fails if it lists them again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

from toolcall_repro.rl import LOSS_AGG_MODES, SCOPES, SELECTIONS, filter_problems

ENGINES = ("local", "verl")
# verl 0.9.1's core_algos.agg_loss also implements these; rl/loss.py (the local engine) does not, so
# they are refused there when the config is read, not after the warm start and the filters have run.
VERL_ONLY_LOSS_AGG = ("seq-mean-token-sum", "token-sum")
LOSS_AGG = {"local": LOSS_AGG_MODES, "verl": LOSS_AGG_MODES + VERL_ONLY_LOSS_AGG}
FILTER_KEYS = ("k", "probe_every", "probe_fraction", "semantics", "all_wrong_k")
DOWNSAMPLE_KEYS = ("m", "selection", "advantage_scope")
# m >= 2 on both engines (neither needs more in code: rl.downsample selects any 1 <= m <= n): a subset
# of one rollout has no variance to maximise, and with advantage_scope subset its advantage is 0 by
# definition, so the update would be empty. The embedded default and paper.yaml use m >= 2.
M_MIN = 2
# Held-out prompts scored at checkpoints: verl 0.9.1's trainer asserts a non-empty validation dataloader;
# the local engine runs without one (no held-out curve: engine tests, benchmarks). The workflow's schema
# asks >= 1 on both, since the curves and the efficiency report read held-out accuracy.
HELDOUT_MIN = {"local": 0, "verl": 1}
# The paper's filter policy: 80 GRPO steps on Tool-N1's data with the single-turn settings.
FILTER_POLICY_STEPS = 80
SETTINGS = ("single_turn", "multi_turn")

REQUIRED = (
    "lr",
    "batch_size",
    "n",
    "temperature",
    "top_p",
    "max_prompt_tokens",
    "max_new_tokens",
    "epochs",
    "clip_low",
    "clip_high",
    "loss_agg",
    "checkpoint_every",
    "heldout_size",
    "filter",
    "downsample",
)
OPTIONAL = (
    "setting",
    "variant",
    "max_steps",
    "micro_batch_size",
    "ppo_mini_batches",
    "grad_clip",
    "weight_decay",
    "keep_checkpoints",
    "eval_batch_size",
    "share_prefix",
    "enable_thinking",
)
PASSTHROUGH = ("model",)  # the setting's hub model at paper scale: read by the workflow, not the engine
# read by one engine only: verl's hydra.py, the local engine's held-out evaluation (grpo.py)
ENGINE_KEYS = {"local": ("heldout_samples",), "verl": ("max_response_tokens",)}


class ConfigError(ValueError):
    """A config a run would reject (or accept and then train wrongly); the message names key and value."""


def must(key: str, allowed: str, value: object) -> str:
    """The one shape of a config complaint: key, what is allowed, the value."""
    return f"{key} must be {allowed}, got {value!r}"


@dataclass(frozen=True)
class FilterConfig:
    k: int
    probe_every: int | None = None
    probe_fraction: float = 0.0
    semantics: str = "temporary"
    all_wrong_k: int | None = None


@dataclass(frozen=True)
class DownsampleConfig:
    m: int
    selection: str = "max_variance"
    advantage_scope: str = "group"


@dataclass(frozen=True)
class RunConfig:
    lr: float
    batch_size: int
    n: int
    temperature: float
    top_p: float
    max_prompt_tokens: int
    max_new_tokens: int
    epochs: int
    clip_low: float
    clip_high: float
    loss_agg: str
    checkpoint_every: int
    heldout_size: int
    filter: FilterConfig | None
    downsample: DownsampleConfig | None
    setting: str | None = None
    variant: str | None = None
    max_steps: int | None = None
    micro_batch_size: int = 1  # unpadded rows are fastest on a CPU (see update.response_log_probs)
    ppo_mini_batches: int = 1
    grad_clip: float = 1.0
    weight_decay: float = 0.01
    keep_checkpoints: int = 2
    eval_batch_size: int = 20
    share_prefix: bool = True
    # sampled responses per held-out prompt at each checkpoint, at the training temperature and top_p
    # (0: greedy only); the evaluation protocols sample too, which is why BFCL scores have seeds
    heldout_samples: int = 0
    # the chat template's thinking switch of the run's model (config model.enable_thinking; None: not passed)
    enable_thinking: bool | None = None
    extra: dict = field(default_factory=dict)  # PASSTHROUGH keys (e.g. `model` at paper scale)

    def to_dict(self) -> dict:
        return asdict(self)


def effective_m(run: Mapping) -> int:
    """The rollouts a group back-propagates: downsample.m, or all n without down-sampling (a run config
    as composed, or a RunConfig's dict)."""
    down = run.get("downsample") or {}
    return int(down.get("m") or run["n"])


def m_problem(m: object, n: object) -> str | None:
    """What is wrong with downsample.m for a group of n (None: fine): an int in [M_MIN, n]."""
    if not _int(m) or (_int(n) and not M_MIN <= m <= n):
        return f"an int in [{M_MIN}, n={n}]"
    return None


def _int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def run_problems(raw: Mapping, engine: str = "local", where: Mapping[str, str] | None = None) -> list[str]:
    """Everything wrong with one run config for `engine`; `where` maps a run key to its config path."""
    where = where or {}

    def at(key: str) -> str:
        head, _, rest = key.partition(".")
        return where.get(head, head) + (f".{rest}" if rest else "")

    if engine not in ENGINES:
        return [must("engines.training", f"one of {ENGINES}", engine)]
    missing = [k for k in REQUIRED if k not in raw]
    unknown = sorted(set(raw) - set(REQUIRED) - set(OPTIONAL) - set(PASSTHROUGH) - set(ENGINE_KEYS[engine]))
    if missing or unknown:
        return [f"run config: missing keys {missing}, unknown keys {unknown}"]
    return [
        *_number_problems(raw, engine, at),
        *_filter_problems(raw["filter"], at),
        *_downsample_problems(raw["downsample"], raw["n"], where, at),
        *_optional_problems(raw, at),
    ]


def _number_problems(raw: Mapping, engine: str, at) -> list[str]:
    """The sizes, rates and the loss mode of a run (its required keys)."""
    out = []
    for key in ("batch_size", "n", "max_prompt_tokens", "max_new_tokens", "epochs", "checkpoint_every"):
        if not _int(raw[key]) or raw[key] < 1:
            out.append(must(at(key), "an int >= 1", raw[key]))
    if not _int(raw["heldout_size"]) or raw["heldout_size"] < HELDOUT_MIN[engine]:
        out.append(
            must(
                at("heldout_size"),
                f"an int >= {HELDOUT_MIN[engine]} on engines.training {engine}",
                raw["heldout_size"],
            )
        )
    n = raw["n"]
    if _int(n) and n == 1:
        out.append(must(at("n"), "an int >= 2 (a group of one has no advantage)", n))
    for key in ("lr", "temperature", "top_p", "clip_low", "clip_high"):
        if not _number(raw[key]):
            out.append(must(at(key), "a number", raw[key]))
    if _number(raw["temperature"]) and raw["temperature"] <= 0:
        out.append(must(at("temperature"), "> 0 for training rollouts", raw["temperature"]))
    if _number(raw["top_p"]) and not 0 < raw["top_p"] <= 1:
        out.append(must(at("top_p"), "in (0, 1] for training rollouts", raw["top_p"]))
    if raw["loss_agg"] not in LOSS_AGG[engine]:
        others = [e for e in ENGINES if e != engine and raw["loss_agg"] in LOSS_AGG[e]]
        note = f" (only engines.training {others[0]} implements it)" if others else ""
        out.append(
            must(at("loss_agg"), f"one of {LOSS_AGG[engine]} on engines.training {engine}", raw["loss_agg"])
            + note
        )
    return out


def _filter_problems(filt: object, at) -> list[str]:
    """The pre-rollout filter's keys and its probe schedule (rl.filter_problems); null: no filter."""
    if filt is None:
        return []
    if not isinstance(filt, Mapping) or set(filt) - set(FILTER_KEYS) or "k" not in filt:
        keys = sorted(filt) if isinstance(filt, Mapping) else filt
        return [f"{at('filter')}: filter needs k and only {list(FILTER_KEYS)}, got {keys}"]
    out = [f"{at('filter')}.{p}" for p in filter_problems(**filt)]
    if filt["k"] is None:
        out.append(must(at("filter.k"), "an int >= 1 (no filter: filter null)", None))
    return out


def _downsample_problems(down: object, n: object, where: Mapping[str, str], at) -> list[str]:
    """Down-sampling's keys, m's range (m_problem), the selection and the advantage scope; null: none."""
    if down is None:
        return []
    if not isinstance(down, Mapping) or set(down) - set(DOWNSAMPLE_KEYS) or "m" not in down:
        keys = sorted(down) if isinstance(down, Mapping) else down
        return [f"{at('downsample')}: downsample needs m and only {list(DOWNSAMPLE_KEYS)}, got {keys}"]
    out = []
    problem = m_problem(down["m"], n)
    if problem:
        n_from = f" ({where['n']}: {n})" if "n" in where else ""
        out.append(must(at("downsample.m"), f"{problem}{n_from}", down["m"]))
    if down.get("selection", "max_variance") not in SELECTIONS:
        out.append(must(at("downsample.selection"), f"one of {SELECTIONS}", down["selection"]))
    if down.get("advantage_scope", "group") not in SCOPES:
        out.append(must(at("downsample.advantage_scope"), f"one of {SCOPES}", down["advantage_scope"]))
    return out


def _optional_problems(raw: Mapping, at) -> list[str]:
    """The optional keys a run may set (null: the default)."""
    out = []
    if raw.get("max_steps") is not None and (not _int(raw["max_steps"]) or raw["max_steps"] < 1):
        out.append(must(at("max_steps"), "an int >= 1 or null", raw["max_steps"]))
    for key in ("micro_batch_size", "ppo_mini_batches", "keep_checkpoints", "eval_batch_size"):
        if raw.get(key) is not None and (not _int(raw[key]) or raw[key] < 1):
            out.append(must(at(key), "an int >= 1", raw[key]))
    if raw.get("enable_thinking") is not None and not isinstance(raw["enable_thinking"], bool):
        out.append(must(at("enable_thinking"), "true, false or null", raw["enable_thinking"]))
    if raw.get("heldout_samples") is not None and (not _int(raw["heldout_samples"]) or raw["heldout_samples"] < 0):
        out.append(must(at("heldout_samples"), "an int >= 0 (0: greedy only)", raw["heldout_samples"]))
    return out


def parse_run(raw: Mapping, engine: str = "local") -> RunConfig:
    """The typed run config; the first problem (`run_problems`) is a `ConfigError`."""
    problems = run_problems(raw, engine)
    if problems:
        raise ConfigError(problems[0])
    filt, down = raw["filter"], raw["downsample"]
    return RunConfig(
        lr=float(raw["lr"]),
        batch_size=raw["batch_size"],
        n=raw["n"],
        temperature=float(raw["temperature"]),
        top_p=float(raw["top_p"]),
        max_prompt_tokens=raw["max_prompt_tokens"],
        max_new_tokens=raw["max_new_tokens"],
        epochs=raw["epochs"],
        clip_low=float(raw["clip_low"]),
        clip_high=float(raw["clip_high"]),
        loss_agg=raw["loss_agg"],
        checkpoint_every=raw["checkpoint_every"],
        heldout_size=raw["heldout_size"],
        filter=FilterConfig(**filt) if filt is not None else None,
        downsample=DownsampleConfig(**down) if down is not None else None,
        extra={k: raw[k] for k in PASSTHROUGH if k in raw},
        **{k: raw[k] for k in OPTIONAL if raw.get(k) is not None},  # null: the default
        **({"heldout_samples": raw["heldout_samples"]} if raw.get("heldout_samples") is not None else {}),
    )


# --- the workflow's composition -------------------------------------------------------------------------


def dataset_setting(config: Mapping, dataset: str) -> str:
    """The setting whose hyper-parameters a training set uses (format study: train.format_study.setting)."""
    if dataset in SETTINGS:
        return dataset
    if dataset == "tooln1":
        return "single_turn"
    return config["train"]["format_study"]["setting"]


def compose_sources(config: Mapping, dataset: str, variant: str) -> tuple[dict, dict]:
    """(run config, {run key: the config path it came from}) of one training run."""
    setting = dataset_setting(config, dataset)
    hp = dict(config["train"]["settings"][setting])
    src = {k: f"train.settings.{setting}.{k}" for k in hp}
    if dataset.startswith("format_"):
        hp["epochs"] = config["train"]["format_study"]["epochs"]
        src["epochs"] = "train.format_study.epochs"
    if dataset == "tooln1":
        hp["max_steps"] = FILTER_POLICY_STEPS
        src["max_steps"] = "the Tool-N1 filter policy's max_steps"
    var = dict(config["train"]["variants"][variant])
    vsrc = {k: f"train.variants.{variant}.{k}" for k in var}
    # per_setting: what a variant changes for one setting only (the paper's n=16 is multi-turn only).
    per = var.pop("per_setting", {}).get(setting) or {}
    var.update(per)
    vsrc.update({k: f"train.variants.{variant}.per_setting.{setting}.{k}" for k in per})
    if "n" in var:
        hp["n"] = var.pop("n")
        src["n"] = vsrc["n"]
    src.update({k: vsrc[k] for k in var})
    model = hp.get("model") or config["model"]["base"]
    thinking = (config["model"].get("enable_thinking") or {}).get(model)
    if thinking is not None:  # the model's chat-template switch, as filtering and evaluation pass it
        hp["enable_thinking"] = thinking
        src["enable_thinking"] = f"model.enable_thinking.{model}"
    return {"setting": setting, "variant": variant, **hp, **var}, src


def compose_run(config: Mapping, dataset: str, variant: str) -> dict:
    """Hyper-parameters of one training run: its setting and its variant, nothing else."""
    return compose_sources(config, dataset, variant)[0]


def stage_problems(config: Mapping) -> list[str]:
    """Cross-key rules outside training: the reserve the held-out splits need, where archives go."""
    import os.path

    out: list[str] = []
    reserve = config["filter"]["reserve_fraction"]
    if config["model"]["base"] == "tiny" and reserve == 0:
        out.append(
            "filter.reserve_fraction must be > 0 with model.base: tiny: the warm start would train on "
            "the held-out splits (see config/README.md)"
        )
    if config["evaluate"].get("heldout") and reserve == 0:
        out.append(
            "evaluate.heldout needs filter.reserve_fraction > 0 (the reserve is its prompts); set it or "
            "remove evaluate.heldout"
        )
    for setting in ("single_turn", "multi_turn"):
        chain = config["filter"][setting]
        for key in ("heldout_from", "train_from"):  # defaults (data.filters) never need the reserve
            if chain.get(key) == "reserve" and reserve == 0:
                out.append(
                    f"filter.{setting}.{key}: reserve needs filter.reserve_fraction > 0 (the reserve is "
                    f"what the warm start never saw), got {reserve}"
                )
    engines = config.get("engines") or {}
    remote = sorted(set(engines.get("tracking") or []) - {"tensorboard"})
    if remote and engines.get("training") == "local":
        out.append(
            f"engines.tracking: {remote} are verl's loggers (engines.training: verl); the local engine writes "
            "TensorBoard only: use [tensorboard] or []"
        )
    run = os.path.abspath(os.path.join("results", config["run_id"]))
    archives = os.path.abspath((config.get("archive") or {}).get("dir", os.path.join("results", "archives")))
    if os.path.commonpath([archives, run]) == run:
        out.append(
            f"archive.dir: {config['archive']['dir']!r} lies inside results/{config['run_id']}, which a "
            "rerun rewrites: choose a folder outside it (default results/archives)"
        )
    return out


def schema_problem(config: Mapping, schema: Mapping) -> str | None:
    """The config's first JSON Schema failure in one line (None: valid), validated with jsonschema itself
    (snakemake's `validate` would print the whole schema and config with it)."""
    import jsonschema

    validator = jsonschema.validators.validator_for(schema)(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(config))
    return None if error is None else schema_error(error)


def schema_error(e) -> str:
    """One jsonschema `ValidationError` in a few words: the offending key, its value, what is allowed."""
    import jsonschema

    if e.context:  # oneOf / anyOf: the branch that came closest says more than "not valid under any"
        e = jsonschema.exceptions.best_match(e.context)
    key = ".".join(str(p) for p in e.absolute_path) or "(top level)"
    if e.validator == "additionalProperties":
        allowed = sorted(e.schema.get("properties", {}))
        return f"config {key}: {e.message.split(' (')[-1].rstrip(')')}; allowed keys: {allowed}"
    if e.validator == "required":
        return f"config {key}: {e.message}"
    if e.validator == "enum":
        return must(f"config {key}", f"one of {e.validator_value}", e.instance)
    message = e.message if len(e.message) <= 160 else e.message[:157] + "..."
    shown = repr(e.instance)
    if shown in message:  # jsonschema's message already quotes the value
        return f"config {key}: {message}"
    return f"config {key}: {message} (value {shown if len(shown) <= 80 else shown[:77] + '...'})"
