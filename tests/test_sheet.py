"""The job sheet (toolcall_repro.sheet) against the workflow Snakemake parses, the slurm profile it renders
and the code that must not keep its own copy of a rule name."""

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
import yte

from toolcall_repro import sheet
from toolcall_repro.sheet import (
    KINDS,
    STAGES,
    JobSheet,
    SheetError,
    cluster_rules,
    kind,
    score_rules,
    venv_of,
)

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "workflow"))
from _workflow_helpers import make_workdir  # noqa: E402

# Snakemake's own parse of the workflow: every rule with its conda env, resources and whether its body is
# the job entry. A child process: a parse imports the rules' helpers into Snakemake's globals.
RULES = """
import json, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, ResourceSettings
files = [Path(f) for f in sys.argv[1:]]
def plain(resources):  # the constant ones (tmpdir is a function of the job)
    out = {}
    for k, v in resources.items():
        try:
            out[k] = v.value if hasattr(v, "value") else v
        except ValueError:
            continue
    return {k: v for k, v in out.items() if isinstance(v, (int, str))}
with SnakemakeApi() as api:
    w = api.workflow(snakefile=Path("workflow/Snakefile"), resource_settings=ResourceSettings(),
                     config_settings=ConfigSettings(configfiles=files, config={"allow_unpinned_revisions": True}))
    print(json.dumps({r.name: {"conda": r.conda_env, "job": "toolcall_repro.job" in (r.shellcmd or ""),
                               "resources": plain(r.resources)}
                      for r in w._workflow.rules}))
"""
TOY = {"evaluate": {"benchmarks": {"toy": {"module": "toy_benchmark", "models": ["base"], "protocols": ["default"]}}}}


@pytest.fixture(scope="module")
def parsed(tmp_path_factory):
    """{config name: {rule: what Snakemake parsed}} for the embedded default and the paper, each with the
    toy plug-in benchmark (tests/toy_benchmark.py) so that score_benchmark is defined."""
    base = tmp_path_factory.mktemp("sheet")
    work = make_workdir(base)
    out = {}
    for name, configfile in (("default", "config/config.yaml"), ("paper", "config/paper.yaml")):
        overlay = base / f"{name}-toy.yaml"
        overlay.write_text(yaml.safe_dump(TOY))
        res = subprocess.run(
            [sys.executable, "-c", RULES, configfile, str(overlay)], cwd=work, capture_output=True, text=True,
            timeout=300, env={**os.environ, "PYTHONPATH": str(REPO / "tests")},
        )  # fmt: skip
        assert res.returncode == 0, res.stderr[-3000:]
        out[name] = json.loads(res.stdout.strip().splitlines()[-1])
    return out


def configs():
    default = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    paper = {**default, **yaml.safe_load((REPO / "config" / "paper.yaml").read_text())}
    return {"default": default, "paper": paper}


def test_every_job_rule_has_its_row_and_every_row_its_rule(parsed):
    for name, rules in parsed.items():
        jobs = {r for r, v in rules.items() if v["job"]} - {"job_frame"}  # the frame: no output, never a job
        assert jobs == set(KINDS), (name, sorted(jobs ^ set(KINDS)))


def test_each_rule_takes_its_env_and_resources_from_the_sheet(parsed):
    for name, cfg in configs().items():
        jobs = JobSheet(cfg)
        for rule in KINDS:
            got = parsed[name][rule]
            assert got["conda"] == jobs.env(rule), (name, rule)
            want = {k: v for k, v in jobs.resources(rule).items()}
            assert {k: got["resources"].get(k) for k in want} == want, (name, rule, got["resources"])
    # at paper scale the GPU rules hold GPUs in their own envs; the CPU rules none, in cpu.yaml
    paper = parsed["paper"]
    assert paper["train_grpo_seed"]["resources"]["gpu"] == 8 and paper["score_benchmark"]["resources"]["gpu"] == 1
    assert paper["score_benchmark"]["conda"].endswith("eval-vllm.yaml")
    assert paper["make_tables"]["resources"]["gpu"] == 0 and paper["make_tables"]["conda"].endswith("cpu.yaml")


def test_the_profile_gives_every_gpu_rule_of_the_sheet_the_sites_resources():
    profile = yte.process_yaml((REPO / "profiles" / "slurm" / "config.yaml").read_text(), require_use_yte=True)
    site = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())["__variables__"]
    resources = profile["set-resources"]
    assert set(resources) == set(cluster_rules())
    assert {"train_grpo", "train_grpo_seed", "score_benchmark", "score_heldout"} <= set(resources)
    for rule, cls in cluster_rules().items():
        prefix = "train" if cls == "train" else "gpu"
        assert resources[rule]["runtime"] == site[f"{prefix}_runtime"], rule
        assert resources[rule]["mem_mb"] == site[f"{prefix}_mem_mb"], rule
        assert resources[rule]["cpus_per_task"] == site[f"{prefix}_cpus"], rule
        assert resources[rule]["gpu_model"] == repr(site["gpu_model"]), rule


def test_a_twin_runs_its_originals_stage_and_a_plug_in_goes_to_the_verl_venv():
    assert kind("train_grpo_seed").stage == "train_grpo" and kind("archive_efficiency").stage == "archive_results"
    assert "train_grpo_seed" not in STAGES and STAGES["train_grpo"] == "toolcall_repro.engines.train"
    assert venv_of({"stage": "train_grpo", "rule": "train_grpo_seed"}) == "verl"
    assert venv_of({"stage": "generate_bfcl"}) == "main"  # BFCL's env holds no vLLM
    assert venv_of({"stage": "score_toy", "options": {"module": "toy_benchmark"}}) == "verl"
    with pytest.raises(SheetError, match="no job kind 'train' in the sheet.*kinds: \\['archive_efficiency'"):
        kind("train")
    assert score_rules("bfcl") == {"summary": "summarise_bfcl", "variance": "summarise_bfcl_variance"}
    assert score_rules("heldout") == {"summary": "score_heldout", "variance": "score_heldout"}
    assert score_rules("toy", plugin=True) == {"summary": "score_toy"}


def test_the_venv_dispatch_asks_the_sheet(capsys):
    assert sheet.main(["venv", json.dumps({"stage": "filter_multi_turn"})]) == 0
    assert capsys.readouterr().out.strip() == "verl"
    assert sheet.main(["venv"]) == 2


def _listed(names: list[str]) -> bool:
    return len({n for n in names if n in KINDS}) >= 2


def rule_name_lists() -> list[str]:
    """Where code outside the rule files and the sheet lists two or more rule names: a Python list, tuple,
    set or dict literal, a shell variable's value, a line of a profile."""
    found = []
    for root in ("src", "scripts", "benchmarks"):
        for path in sorted((REPO / root).rglob("*.py")):
            if path == REPO / "src" / "toolcall_repro" / "sheet.py":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.List | ast.Tuple | ast.Set):
                    items = node.elts
                elif isinstance(node, ast.Dict):
                    items = [*(k for k in node.keys if k is not None), *node.values]
                else:
                    continue
                names = [e.value for e in items if isinstance(e, ast.Constant) and isinstance(e.value, str)]
                if _listed(names):
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}: {names}")
    words = re.compile(r"[A-Za-z_]+")
    for path in [*sorted((REPO / "scripts").glob("*.sh")), *sorted((REPO / "profiles").rglob("*.yaml"))]:
        for i, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            shell_list = path.suffix == ".sh" and re.match(r"\s*(export\s+)?\w+=", code)
            if (path.suffix == ".yaml" or shell_list) and _listed(words.findall(code)):
                found.append(f"{path.relative_to(REPO)}:{i}: {line.strip()}")
    return found


def test_no_rule_name_is_listed_outside_the_rules_and_the_sheet():
    assert rule_name_lists() == []


def test_the_scan_finds_a_list_of_rule_names(tmp_path, monkeypatch):
    """The scan above can fail: a copy of the old profile list in a script is found."""
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "x.sh").write_text('GPU=" train_grpo generate_bfcl "\n')
    (tmp_path / "scripts" / "y.py").write_text('RULES = ("filter_single_turn", "score_acebench")\n')
    assert [f.split(":")[0] for f in rule_name_lists()] == ["scripts/y.py", "scripts/x.sh"]
