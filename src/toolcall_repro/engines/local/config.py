"""GRPO run configuration: the merged `train.settings.<setting>` + `train.variants.<variant>` subtree."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

from toolcall_repro.rl import SCOPES, SELECTIONS, SEMANTICS
from toolcall_repro.rl.loss import LOSS_AGG_MODES

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
FILTER_KEYS = {"k", "probe_every", "probe_fraction", "semantics", "all_wrong_k"}
DOWNSAMPLE_KEYS = {"m", "selection", "advantage_scope"}


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
class GRPOConfig:
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
    extra: dict = field(default_factory=dict)  # keys for other engines (e.g. `model` at paper scale)

    def to_dict(self) -> dict:
        return asdict(self)


OPTIONAL = {
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
}
PASSTHROUGH = {"model"}  # paper-scale keys this engine does not use


def _positive(name: str, value, kind=int) -> None:
    if not isinstance(value, kind) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} must be a positive {kind.__name__}, got {value!r}")


def parse_config(raw: Mapping) -> GRPOConfig:
    """Validate the run config; a missing, unknown or out-of-range key is a clear error."""
    missing = [k for k in REQUIRED if k not in raw]
    unknown = sorted(set(raw) - set(REQUIRED) - OPTIONAL - PASSTHROUGH)
    if missing or unknown:
        raise ValueError(f"GRPO config: missing keys {missing}, unknown keys {unknown}")
    for key in ("batch_size", "n", "max_prompt_tokens", "max_new_tokens", "epochs", "checkpoint_every"):
        _positive(key, raw[key])
    if not isinstance(raw["heldout_size"], int) or raw["heldout_size"] < 0:
        raise ValueError(f"heldout_size must be an int >= 0, got {raw['heldout_size']!r}")
    if raw["n"] < 2:
        raise ValueError("n must be >= 2 (a group of one has no advantage)")
    if not 0 < float(raw["top_p"]) <= 1 or float(raw["temperature"]) <= 0:
        raise ValueError("need temperature > 0 and 0 < top_p <= 1 for training rollouts")
    if raw["loss_agg"] not in LOSS_AGG_MODES:
        raise ValueError(f"loss_agg must be one of {LOSS_AGG_MODES}, got {raw['loss_agg']!r}")
    filt = raw["filter"]
    if filt is not None:
        bad = set(filt) - FILTER_KEYS
        if bad or "k" not in filt:
            raise ValueError(f"filter needs k and only {sorted(FILTER_KEYS)}, got {sorted(filt)}")
        if filt.get("semantics", "temporary") not in SEMANTICS:
            raise ValueError(f"filter.semantics must be one of {SEMANTICS}")
        filt = FilterConfig(**filt)
    down = raw["downsample"]
    if down is not None:
        if set(down) - DOWNSAMPLE_KEYS or "m" not in down:
            raise ValueError(f"downsample needs m and only {sorted(DOWNSAMPLE_KEYS)}, got {sorted(down)}")
        down = DownsampleConfig(**down)
        if down.selection not in SELECTIONS or down.advantage_scope not in SCOPES:
            raise ValueError(f"downsample.selection in {SELECTIONS}, advantage_scope in {SCOPES}")
        if not 1 <= down.m <= raw["n"]:
            raise ValueError(f"downsample.m must be in [1, n={raw['n']}], got {down.m}")
    opts = {k: raw[k] for k in OPTIONAL if k in raw}
    if opts.get("max_steps") is not None:
        _positive("max_steps", opts["max_steps"])
    for key in ("micro_batch_size", "ppo_mini_batches", "keep_checkpoints", "eval_batch_size"):
        if key in opts:
            _positive(key, opts[key])
    return GRPOConfig(
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
        filter=filt,
        downsample=down,
        extra={k: raw[k] for k in PASSTHROUGH if k in raw},
        **opts,
    )
