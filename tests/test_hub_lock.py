"""The hub lock (toolcall-repro lock-hub): every hub revision of the paper config resolved to a commit sha
through a stand-in of huggingface_hub.HfApi built from its real signatures (autospec), the hub's own info
types and error classes; gated data said before the bill (plan) and at download."""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path
from unittest.mock import create_autospec

import httpx2
import pytest
import yaml
from huggingface_hub import HfApi
from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError
from huggingface_hub.hf_api import DatasetInfo, ModelInfo

from toolcall_repro import hub_lock
from toolcall_repro.configarg import merged_config
from toolcall_repro.preflight import pin_problems

REPO = Path(__file__).resolve().parents[1]
MOVED = {"zhuiguang-ning/LoopTool-23k": "LoopTool/LoopTool-23k"}


def sha_of(repo_id: str) -> str:
    return hashlib.sha1(repo_id.encode()).hexdigest()


def response(status: int, url: str) -> httpx2.Response:
    return httpx2.Response(status, request=httpx2.Request("GET", url))


def stand_in(gated=(), missing=()):
    """An HfApi whose model_info/dataset_info answer as the hub does: a moved repository under its new id,
    a gated one with GatedRepoError (401), a missing one with RepositoryNotFoundError (404)."""
    api = create_autospec(HfApi, instance=True)

    def info(kind):
        def answer(repo_id, *, revision=None, **_):
            url = f"https://huggingface.co/api/{kind}s/{repo_id}/revision/{revision}"
            if repo_id in gated:
                raise GatedRepoError(f"Access to {kind} {repo_id} is restricted", response=response(401, url))
            if repo_id in missing:
                raise RepositoryNotFoundError(f"{repo_id} not found", response=response(404, url))
            cls = ModelInfo if kind == "model" else DatasetInfo
            now = MOVED.get(repo_id, repo_id)
            return cls(id=now, sha=sha_of(now), gated="manual" if repo_id.startswith("Salesforce/") else False)

        return answer

    api.model_info.side_effect = info("model")
    api.dataset_info.side_effect = info("dataset")
    return api


@pytest.fixture
def config_dir(tmp_path, monkeypatch):
    """A copy of config/ (the lock is written beside the config), the working directory."""
    shutil.copytree(REPO / "config", tmp_path / "config")
    monkeypatch.chdir(tmp_path)
    return tmp_path / "config"


def test_the_paper_config_names_its_data_models_and_lm_eval_datasets():
    config = merged_config([REPO / "config" / "paper.yaml"], REPO / "config" / "config.yaml")
    kinds = {(e.repo_type, e.repo_id) for e in hub_lock.entries(config)}
    assert {("dataset", "Salesforce/xlam-function-calling-60k"), ("model", "Qwen/Qwen3-4B"), ("dataset", "cais/mmlu")} <= kinds
    assert all(e.revision == "main" for e in hub_lock.entries(config))  # as shipped: unpinned


def test_lock_resolves_every_revision_and_the_paper_config_then_pins_them_all(config_dir, capsys):
    assert hub_lock.main(["--configfile", "config/paper.yaml"], api=stand_in()) == 0
    out = capsys.readouterr().out
    lock = config_dir / "paper.hub-lock.yaml"
    assert "wrote config/paper.hub-lock.yaml" in out
    locked = merged_config(["config/paper.yaml", str(lock)])
    assert pin_problems(locked) == []  # no branch name left
    unlocked = merged_config(["config/paper.yaml"])
    assert pin_problems(unlocked) and "main" in pin_problems(unlocked)[0]
    assert locked["model"]["revisions"]["Qwen/Qwen3-4B"] == sha_of("Qwen/Qwen3-4B")
    record = locked["hub_lock"]["data.sources.xlam.revision"]
    assert record == {"type": "dataset", "asked": "Salesforce/xlam-function-calling-60k@main",
                      "hub_id": "Salesforce/xlam-function-calling-60k",
                      "sha": sha_of("Salesforce/xlam-function-calling-60k"), "gated": True}  # fmt: skip


def test_a_moved_repository_is_followed_and_said(config_dir, capsys):
    assert hub_lock.main(["--configfile", "config/paper.yaml"], api=stand_in()) == 0
    assert "moved: the hub now calls it LoopTool/LoopTool-23k" in capsys.readouterr().out
    locked = merged_config(["config/paper.yaml", "config/paper.hub-lock.yaml"])
    assert locked["data"]["sources"]["looptool"]["hub_id"] == "LoopTool/LoopTool-23k"
    assert locked["data"]["sources"]["looptool"]["split"] == "train"  # the rest of the source kept


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"gated": {"Salesforce/xlam-function-calling-60k"}},
         "is gated: accept its terms at https://huggingface.co/datasets/Salesforce/xlam-function-calling-60k"),
        ({"missing": {"Qwen/Qwen3-8B"}}, "model Qwen/Qwen3-8B is not on the hub"),
    ],
)  # fmt: skip
def test_a_repository_that_does_not_answer_writes_nothing_and_says_one_line(config_dir, capsys, kwargs, says):
    assert hub_lock.main(["--configfile", "config/paper.yaml"], api=stand_in(**kwargs)) == 1
    err = capsys.readouterr().err
    assert "nothing written; 1 of" in err and says in err
    assert not (config_dir / "paper.hub-lock.yaml").exists()


def test_locking_twice_against_an_unchanged_hub_writes_the_same_bytes(config_dir):
    hub_lock.main(["--configfile", "config/paper.yaml"], api=stand_in())
    first = (config_dir / "paper.hub-lock.yaml").read_bytes()
    hub_lock.main(["--configfile", "config/paper.yaml"], api=stand_in())
    assert (config_dir / "paper.hub-lock.yaml").read_bytes() == first


def test_a_gated_repository_without_a_token_is_named_before_any_job(config_dir):
    hub_lock.main(["--configfile", "config/paper.yaml"], api=stand_in())
    locked = merged_config(["config/paper.yaml", "config/paper.hub-lock.yaml"])
    (line,) = hub_lock.gated_without_token(locked, token=None)
    assert line.startswith("data.sources.xlam.revision: dataset Salesforce/xlam-function-calling-60k is gated")
    assert "https://huggingface.co/datasets/Salesforce/xlam-function-calling-60k" in line and "HF_TOKEN" in line
    assert hub_lock.gated_without_token(locked, token="hf_x") == []


def test_the_download_of_a_gated_dataset_fails_in_one_line(tmp_path, monkeypatch):
    import datasets

    from toolcall_repro.data import download

    def gated(hub_id, **_):
        url = f"https://huggingface.co/api/datasets/{hub_id}"
        raise GatedRepoError(f"Access to dataset {hub_id} is restricted", response=response(401, url))

    monkeypatch.setattr(datasets, "load_dataset", gated)
    with pytest.raises(download.GatedDataset, match=r"data.sources.xlam: Salesforce/x is gated: accept its terms at "
                       r"https://huggingface.co/datasets/Salesforce/x"):  # fmt: skip
        download.download("xlam", "Salesforce/x", "a" * 40, "train", tmp_path / "x.jsonl")
    assert not (tmp_path / "x.jsonl").exists()


def test_the_lock_validates_against_the_config_schema(config_dir):
    from toolcall_repro.runconfig import schema_problem

    hub_lock.main(["--configfile", "config/paper.yaml"], api=stand_in())
    locked = merged_config(["config/paper.yaml", "config/paper.hub-lock.yaml"])
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    assert schema_problem(locked, schema) is None


@pytest.mark.workflow  # the real Snakemake CLI
def test_the_paper_dry_run_accepts_the_lock_and_refuses_the_config_without_it(tmp_path):
    sys.path.insert(0, str(REPO / "tests" / "workflow"))
    from _workflow_helpers import make_workdir, snakemake

    work = make_workdir(tmp_path)
    lock = tmp_path / "paper.hub-lock.yaml"
    pins, problems = hub_lock.resolve(stand_in(), hub_lock.entries(merged_config(
        [REPO / "config" / "paper.yaml"], REPO / "config" / "config.yaml")))  # fmt: skip
    assert problems == []
    hub_lock.write_lock(lock, pins, "config/paper.yaml")
    res = snakemake("-n", "--configfile", "config/paper.yaml", str(lock), cwd=work, timeout=300)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    bare = snakemake("-n", "--configfile", "config/paper.yaml", cwd=work, timeout=300)
    assert bare.returncode != 0 and "needs every hub revision pinned" in bare.stdout + bare.stderr
