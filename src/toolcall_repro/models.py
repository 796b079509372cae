"""Which model each part of a run uses, and where its weights lie: the base model, a setting's start, the
filter policies, the evaluation model tags, the hub models the DAG snapshots, each model's thinking switch.

One object over the validated config and the run's layout (`Experiment.models`); the rules' inputs,
preflight (chat templates, thinking switches, hub revisions) and plan read it. No I/O apart from
`os.path.isdir` on a configured model name (a local folder or a hub id).
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping

from toolcall_repro.layout import Layout
from toolcall_repro.runconfig import dataset_setting

# model.filter_policy[_multi_turn] values that name the workflow's own policies, not a model
POLICY_NAMES = ("base", "early", "train")


class Models:
    """The models of one validated config, their weights under the run's layout."""

    def __init__(self, config: Mapping, layout: Layout):
        self.config = config
        self.layout = layout

    def hub_model_dir(self, hub_id: str) -> str:
        return self.layout.hub_model(hub_id.replace(posixpath.sep, "--"))

    @staticmethod
    def hub_id(slug: str) -> str:
        """The hub id of a download_model folder name (org--name)."""
        return slug.replace("--", posixpath.sep)

    def model_revision(self, slug: str) -> str | None:
        """A hub model's pinned revision (model.revisions); the download record names the commit read."""
        return self.config["model"].get("revisions", {}).get(self.hub_id(slug))

    @staticmethod
    def is_hub_model(name: str) -> bool:
        """Whether a model named in config is a hub id (download_model snapshots it): not tiny, no folder."""
        return name != "tiny" and not os.path.isdir(name)

    def model_path(self, name: str) -> str:
        """A model named in config: `tiny` (the model warmstart_base_model builds), a local directory as
        is, else a hub id snapshotted by download_model."""
        if name == "tiny":
            return self.layout.base_model()
        return self.hub_model_dir(name) if self.is_hub_model(name) else name

    def hub_models(self) -> list[str]:
        """Every hub model the DAG snapshots (download_model): base, per-setting policies, filter policies, the
        evaluation models taken as published (evaluate.models.<tag>.source: hub)."""
        model = self.config["model"]
        names = [model["base"], model.get("filter_policy"), model.get("filter_policy_multi_turn")]
        names += [s.get("model") for s in self.config["train"]["settings"].values()]
        names += [s["model"] for s in self.config["evaluate"]["models"].values() if s["source"] == "hub"]
        return sorted({n for n in names if n and n not in POLICY_NAMES and self.is_hub_model(n)})

    def thinking(self, model: str | None) -> bool | None:
        """model.enable_thinking of a model (hub id or path); None: not set (the chat template's default)."""
        return (self.config["model"].get("enable_thinking") or {}).get(model) if model else None

    def base_model_dir(self) -> str:
        return self.model_path(self.config["model"]["base"])

    def final_model_dir(self, dataset: str, variant: str) -> str:
        return self.layout.training_file(dataset, variant, "final")

    def start_model(self, dataset: str) -> str:
        """The model a training run starts from, as config names it: its setting's own model
        (train.settings.<setting>.model, paper scale), else model.base. A trained model keeps its chat
        template (and its thinking switch)."""
        model = self.config["train"]["settings"][dataset_setting(self.config, dataset)].get("model")
        return model or self.config["model"]["base"]

    def policy_start_dir(self, dataset: str) -> str:
        """Weights a training run starts from: the setting's own model (paper scale) or the base model."""
        return self.model_path(self.start_model(dataset))

    def filter_policy(self, setting: str) -> str:
        """A chain's model.filter_policy[_multi_turn] (the multi-turn key falls back to filter_policy):
        one of POLICY_NAMES, a path or a hub id."""
        model = self.config["model"]
        key = "filter_policy_multi_turn" if setting == "multi_turn" else "filter_policy"
        return model.get(key) or model.get("filter_policy", "base")

    def filter_policy_model(self, setting: str) -> str | None:
        """The model whose chat template a chain's filter policy uses (None: the tiny model's warm start)."""
        policy = self.filter_policy(setting)
        if policy == "base":
            return self.config["model"]["base"]
        if policy == "train":  # the 80-step Tool-N1 policy, trained from its setting's model
            return self.start_model("tooln1")
        return None if policy == "early" else policy

    def filter_policy_dir(self, setting: str) -> str:
        """The policy whose rollouts filter a chain's data (model.filter_policy[_multi_turn]).

        base: the base model; early: the tiny model's warm start at model.tiny.early_step (weaker than
        the RL start, as the paper's filter policy); train: the paper's policy, GRPO-trained 80 steps on
        Tool-N1's data; else a path or hub id.
        """
        policy = self.filter_policy(setting)
        if policy == "base":
            return self.base_model_dir()
        if policy == "early":
            return self.layout.early_model()
        if policy == "train":
            return self.final_model_dir("tooln1", "vanilla")
        return self.model_path(policy)

    def model_dir(self, tag: str) -> str:
        """The weights behind an evaluation model tag (evaluate.models)."""
        spec = self.config["evaluate"]["models"][tag]
        if spec["source"] == "base":
            return self.base_model_dir()
        if spec["source"] == "train":
            return self.final_model_dir(spec["setting"], spec["variant"])
        if spec["source"] == "hub":  # as published: the hub snapshot (download_model), or a local folder
            return self.model_path(spec["model"])
        return self.final_model_dir(spec["dataset"], self.config["train"]["format_study"]["variant"])

    def eval_model(self, tag: str) -> str:
        """The model whose chat template an evaluation model tag uses (a trained model keeps its start's)."""
        spec = self.config["evaluate"]["models"][tag]
        if spec["source"] == "base":
            return self.config["model"]["base"]
        if spec["source"] == "hub":
            return spec["model"]
        return self.start_model(spec["setting"] if spec["source"] == "train" else spec["dataset"])

    def model_spec(self, tag: str) -> dict:
        return {"tag": tag, **self.config["evaluate"]["models"][tag]}
