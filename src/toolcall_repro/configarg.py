"""Config subtrees arrive on the command line as inline JSON or as a JSON/YAML file path."""

from __future__ import annotations

import json
from pathlib import Path

import yaml


def load_config_arg(value: str) -> dict:
    """Parse `--config`: inline JSON (what the Snakemake rules pass) or a path to a JSON/YAML file."""
    text = value.strip()
    if text.startswith("{"):
        return json.loads(text)
    path = Path(value)
    if not path.is_file():
        raise FileNotFoundError(f"--config is neither inline JSON nor an existing file: {value!r}")
    # A .json file is read as JSON: YAML 1.1 (PyYAML) reads JSON's 1e-05 as the string "1e-05".
    body = path.read_text()
    loaded = json.loads(body) if path.suffix.lower() == ".json" else yaml.safe_load(body)
    if not isinstance(loaded, dict):
        raise ValueError(f"--config file {value} does not hold a mapping")
    return loaded


def merged_config(configfiles, base: str | Path = "config/config.yaml") -> dict:
    """The config a `snakemake --configfile F...` run reads: the Snakefile's base (config/config.yaml), then
    each file merged over it key by key as Snakemake merges them (snakemake.utils.update_config)."""
    from snakemake.utils import update_config

    config = yaml.safe_load(Path(base).read_text())
    for f in configfiles:
        update_config(config, yaml.safe_load(Path(f).read_text()) or {})
    return config
