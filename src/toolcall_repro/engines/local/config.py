"""The local engine's run config: the shared typed config (toolcall_repro.runconfig), local limits."""

from __future__ import annotations

from collections.abc import Mapping

from toolcall_repro.runconfig import (
    DOWNSAMPLE_KEYS,
    FILTER_KEYS,
    OPTIONAL,
    PASSTHROUGH,
    REQUIRED,
    DownsampleConfig,
    FilterConfig,
    RunConfig,
    parse_run,
)

GRPOConfig = RunConfig  # the local engine's name for it (grpo.py, tests)

__all__ = [
    "DOWNSAMPLE_KEYS",
    "FILTER_KEYS",
    "OPTIONAL",
    "PASSTHROUGH",
    "REQUIRED",
    "DownsampleConfig",
    "FilterConfig",
    "GRPOConfig",
    "RunConfig",
    "parse_config",
]


def parse_config(raw: Mapping) -> RunConfig:
    """The run config on engines.training local; a missing, unknown or out-of-range key is a clear error."""
    return parse_run(raw, engine="local")
