"""engines.cuda as Snakemake reads the rules: 12 swaps the GPU envs (train-verl, eval-vllm) for their
CUDA 12 twins rule by rule and hands the GPU jobs the CUDA major their driver check takes; a value without
locks fails the dry-run in one line naming the key, the value and what is allowed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from toolcall_repro import gpu_driver

sys.path.insert(0, str(Path(__file__).parent))
from _workflow_helpers import make_workdir, write_config  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
# Snakemake's own reading of the workflow (as tests/cluster/test_venv_deployment.py): each rule's conda env
# file, train_grpo's params.files for a job holding 8 GPUs, and locate_vllm's params.job (no wildcards).
RULES = """
import json, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, ResourceSettings
with SnakemakeApi() as api:
    w = api.workflow(snakefile=Path("workflow/Snakefile"), resource_settings=ResourceSettings(),
                     config_settings=ConfigSettings(configfiles=[Path(sys.argv[1])],
                                                    config={"allow_unpinned_revisions": True}))
    rules = {r.name: r for r in w._workflow.rules}
    print(json.dumps({
        "envs": {name: r.conda_env for name, r in rules.items() if r.conda_env},
        "files": rules["train_grpo"].params["files"]({}, {}, {}, {"gpu": 8}),
        "job": rules["locate_vllm"].params["job"]({}),
    }))
"""


@pytest.fixture(scope="module")
def read_rules(tmp_path_factory):
    """read_rules(base config, engines.cuda or None: key left out) -> what Snakemake reads from the rules."""
    base = tmp_path_factory.mktemp("cuda")
    work = make_workdir(base)

    def read(config: str, cuda: int | None) -> dict:
        cfg = yaml.safe_load((REPO / config).read_text())
        if cuda is None:
            del cfg["engines"]["cuda"]
        else:
            cfg["engines"]["cuda"] = cuda
        path = base / f"{Path(config).stem}-{cuda}.yaml"
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        res = subprocess.run([sys.executable, "-c", RULES, str(path)], cwd=work, capture_output=True, text=True,
                             timeout=300)  # fmt: skip
        assert res.returncode == 0, res.stderr[-3000:]
        return json.loads(res.stdout.strip().splitlines()[-1])

    return read


def test_engines_cuda_12_swaps_each_gpu_env_for_its_cuda_12_twin_rule_by_rule(read_rules):
    cu13, cu12, default = (read_rules("config/paper.yaml", cuda) for cuda in (13, 12, None))
    assert default == cu13  # engines.cuda left out: 13
    gpu = {rule for rule, env in cu13["envs"].items() if Path(env).stem in gpu_driver.CUDA_ENVS}
    assert {"train_grpo", "train_grpo_seed", "filter_single_turn", "filter_multi_turn", "locate_vllm",
            "score_heldout", "score_acebench", "check_general_capability"} <= gpu  # fmt: skip
    assert set(cu12["envs"]) == set(cu13["envs"])
    for rule, env in cu13["envs"].items():
        want = f"../envs/{Path(env).stem}-cu12.yaml" if rule in gpu else env
        assert cu12["envs"][rule] == want, rule
        assert (REPO / "workflow" / "rules" / want).resolve().is_file(), want
    # BFCL's client side has one build (its torch never meets the GPU); the serve is locate_vllm's cu12 vLLM
    assert cu12["envs"]["generate_bfcl"] == "../envs/eval-bfcl.yaml"
    # the CUDA major reaches the jobs in params.files (a GPU job's driver check), never in params.job (the
    # params rerun trigger): choosing it reruns the jobs whose env changed, not every job
    assert json.loads(cu12["files"])["cuda"] == 12 and json.loads(cu13["files"])["cuda"] == 13
    assert json.loads(cu12["files"])["gpus"] == 8
    assert cu12["job"] == cu13["job"]


def test_the_embedded_default_stays_on_the_cpu_env_whatever_engines_cuda_says(read_rules):
    cu12 = read_rules("config/config.yaml", 12)
    assert {env for rule, env in cu12["envs"].items() if rule != "locate_vllm"} == {"../envs/cpu.yaml"}


def test_the_schema_allows_exactly_the_majors_that_have_locks():
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    assert schema["properties"]["engines"]["properties"]["cuda"]["enum"] == list(gpu_driver.CUDA_CHOICES)
    for cuda in gpu_driver.CUDA_CHOICES:
        assert gpu_driver.gpu_lock(cuda).is_file()
    assert (
        yaml.safe_load((REPO / "config" / "paper.yaml").read_text())["engines"]["cuda"]
        == gpu_driver.CUDA_MAJOR
    )


@pytest.mark.parametrize("value", [11, "12", "cu12"])
def test_a_cuda_major_without_locks_fails_the_dry_run_naming_key_value_and_choices(tmp_path, smk, value):
    cfg = write_config(tmp_path, "config/paper.yaml", {"engines": {"cuda": value}})
    res = smk("-n", "--nolock", "--configfile", str(cfg), "--config", "allow_unpinned_revisions=True")
    assert res.returncode != 0
    out = res.stdout + res.stderr
    assert f"config engines.cuda must be one of [12, 13], got {value!r}" in out, out[-2000:]
    assert "Job stats" not in out  # nothing was scheduled
