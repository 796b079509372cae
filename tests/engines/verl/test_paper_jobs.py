"""Every training job of the paper DAG, composed as it would launch, passes verl's own validation.

The jobs come from the workflow itself: `snakemake -n -p` on config/paper.yaml, in a working directory of
its own (tests/workflow/_workflow_helpers.make_workdir: nothing written to the work tree's .snakemake/),
prints each train_grpo command, `python -m toolcall_repro.job SPEC`; the launcher argv the job builds
from its spec (engines.train) has the `--config`/`--verl-config`/`--nodes` that go through the same
composition as `launch.prepare` (split_config -> hydra.build_overrides -> compose against verl's
ppo_trainer.yaml).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.verl
pytest.importorskip("verl", reason="verl lives in .venv-verl only (scripts/install-verl-env.sh)")

from omegaconf import OmegaConf, open_dict  # noqa: E402

from toolcall_repro.engines import train  # noqa: E402
from toolcall_repro.engines.verl import hydra, launch  # noqa: E402
from toolcall_repro.engines.verl.main import check_config, check_model_config, compose_config  # noqa: E402
from toolcall_repro.jobspec import Job  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tests" / "workflow"))
from _workflow_helpers import UNPINNED, make_workdir  # noqa: E402

SNAKEMAKE = REPO / ".venv" / "bin" / "snakemake"  # the main env (scripts/install.sh)
TRAIN_LOCK = REPO / "requirements" / "train-verl.lock"  # what workflow/envs/train-verl.yaml installs


def train_commands(work: Path) -> dict[str, Job]:
    """{`<dataset>-<variant>`: the job} of every train_grpo job of the paper DAG, from the job spec of
    its command in a dry-run in work (a make_workdir directory, never the work tree)."""
    if not SNAKEMAKE.exists():
        pytest.skip(f"{SNAKEMAKE} is missing: the main env (scripts/install.sh) runs the dry-run")
    env = {**os.environ, "PATH": f"{SNAKEMAKE.parent}:{os.environ['PATH']}"}
    proc = subprocess.run(
        [str(SNAKEMAKE), "-n", "-p", "--forceall", "--configfile", "config/paper.yaml", *UNPINNED],
        cwd=work, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    jobs = {}
    for line in proc.stdout.splitlines():
        if "toolcall_repro.job" not in line:
            continue
        argv = shlex.split(line)
        at = argv.index("toolcall_repro.job")
        job = Job.from_json(argv[at + 1], argv[at + 2])  # params.job, params.files
        if job.stage != "train_grpo":
            continue
        out = os.path.dirname(job.out("summary"))
        jobs["-".join(Path(out).parts[-2:])] = job
    return jobs


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return make_workdir(tmp_path_factory.mktemp("paper_jobs"))


@pytest.fixture(scope="module")
def jobs(workdir):
    return train_commands(workdir)


def option(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def composed(job: Job, flash_attn: bool):
    """The job's verl config, as prepare composes it on a first attempt from the launcher's argv."""
    argv = train.job_verl_command(job)
    assert argv[:2] == ["bash", "workflow/scripts/verl/launch_verl.sh"]
    run, verl = launch.split_config(
        json.loads(option(argv, "--config")),
        json.loads(option(argv, "--verl-config")),
        int(option(argv, "--nodes")),
        None,
    )
    paths = hydra.RunPaths.under(str(REPO / option(argv, "--out")), str(REPO / option(argv, "--base")))
    overrides = hydra.build_overrides(
        run, verl, paths, int(option(argv, "--seed")), flash_attn_installed=flash_attn
    )
    return run, verl, compose_config(overrides)


def env_has_flash_attn() -> bool:
    """Whether the training env installs flash-attn (else `auto` must resolve to sdpa): its lock holds it.
    (The env file's comments name flash-attn; only the lock says what is installed.)"""
    return any(
        line.startswith(("flash-attn==", "flash_attn==")) for line in TRAIN_LOCK.read_text().splitlines()
    )


def test_the_paper_dag_has_every_training_job(jobs):
    expected = {f"single_turn-{v}" for v in ("vanilla", "efficient")}
    expected |= {f"multi_turn-{v}" for v in ("vanilla", "efficient", "filter_only", "downsample_only")}
    expected |= {"tooln1-vanilla", "format_single-vanilla", "format_multi-vanilla"}
    assert set(jobs) == expected
    assert all(job.option("engine") == "verl" for job in jobs.values())
    # the manifest's GPUs: train.verl nodes x gpus_per_node; the run config is the manifest's config
    assert all(job.gpus == job.option("verl")["nodes"] * job.option("verl")["gpus_per_node"] > 0
               for job in jobs.values())  # fmt: skip


@pytest.mark.parametrize("flash_attn", [False, True], ids=["no-flash-attn", "flash-attn"])
def test_every_paper_job_passes_verl_validation_and_keeps_its_invariants(jobs, flash_attn, model_dir):
    for name, job in sorted(jobs.items()):
        run, verl, cfg = composed(job, flash_attn)
        check_config(cfg)  # verl's validate_config + its algorithm and rollout dataclasses
        # verl's model dataclass (the hub weights are not here: a tiny model of the same layout)
        with open_dict(cfg):
            cfg.actor_rollout_ref.model.path = str(model_dir)
        check_model_config(cfg)
        trainer, data, actor = cfg.trainer, cfg.data, cfg.actor_rollout_ref.actor
        rollout, model = cfg.actor_rollout_ref.rollout, cfg.actor_rollout_ref.model
        # steps: the filter policy stops at 80 (common.smk); the others run all their epochs
        assert trainer.total_training_steps == (80 if name.startswith("tooln1") else None), name
        assert trainer.total_epochs == run["epochs"]
        # n, m and the mini-batch the worker sees: ppo_mini_batch_size x rollout.n rows, which after
        # down-sampling must be (prompts per mini-batch) x m kept rows
        m = run["downsample"]["m"] if run.get("downsample") else run["n"]
        assert rollout.n == run["n"] and data.train_batch_size == run["batch_size"], name
        mini = actor.ppo_mini_batch_size
        if run.get("downsample"):
            assert cfg.toolcall.downsample.m == m
            assert cfg.toolcall.scaled_mini_batch_size * rollout.n == mini * m, name
        else:
            assert cfg.toolcall.downsample is None and cfg.toolcall.scaled_mini_batch_size == mini
        dp = trainer.nnodes * trainer.n_gpus_per_node
        assert (data.train_batch_size * m) % dp == 0 and (mini * m) % dp == 0, name
        # attention: what the job's env can run; padding removal only with flash-attn's kernels
        impl = OmegaConf.to_container(model.override_config)["attn_implementation"]
        assert impl == ("flash_attention_2" if flash_attn else "sdpa"), name
        assert model.use_remove_padding is flash_attn
        # dataloader workers: verl's default (8), as the sampler is tested with
        assert data.dataloader_num_workers == 8
        # a first attempt starts fresh; prepare switches these on a retry (test_resume.py)
        assert trainer.resume_mode == "disable" and trainer.resume_from_path is None
        assert trainer.save_freq == run["checkpoint_every"] and trainer.use_v1 is False
        filt = cfg.toolcall.filter
        assert (None if filt is None else OmegaConf.to_container(filt)) == run.get("filter"), name


def test_attention_of_the_training_env_is_one_it_can_run(jobs):
    """`auto` (the paper config's) resolves to what workflow/envs/train-verl.yaml installs."""
    _, verl, cfg = composed(jobs["single_turn-efficient"], flash_attn=env_has_flash_attn())
    assert verl["attn_implementation"] == "auto"
    impl = OmegaConf.to_container(cfg.actor_rollout_ref.model.override_config)["attn_implementation"]
    assert impl == ("flash_attention_2" if env_has_flash_attn() else "sdpa")


def test_flash_attention_without_flash_attn_is_refused_before_any_gpu(tmp_path):
    from _verl_helpers import run_config

    paths = hydra.RunPaths.under(str(tmp_path), "/m")
    with pytest.raises(hydra.VerlConfigError, match="flash_attn is not importable"):
        hydra.build_overrides(
            run_config(), {"gpus_per_node": 4, "attn_implementation": "flash_attention_2"}, paths, 0
        )
    with pytest.raises(hydra.VerlConfigError, match="allowed"):
        hydra.build_overrides(run_config(), {"gpus_per_node": 4, "attn_implementation": "flash"}, paths, 0)
    assert launch.flash_attn_installed() is False  # the CPU test env has no flash-attn


def test_the_attention_verl_would_default_to_does_not_load_here_and_sdpa_does(model_dir):
    """Why the choice matters: verl's default (flash_attention_2) fails at model creation without
    flash-attn; the sdpa the composition picks builds the same model."""
    import transformers
    from verl.utils.config import omega_conf_to_dataclass

    base = model_dir
    for impl, loads in (("sdpa", True), ("flash_attention_2", False)):
        cfg = compose_config(
            [
                f"actor_rollout_ref.model.path={base}",
                f"+actor_rollout_ref.model.override_config.attn_implementation={impl}",
            ]
        )
        model_config = omega_conf_to_dataclass(cfg.actor_rollout_ref.model)  # verl's HFModelConfig
        assert model_config.hf_config._attn_implementation == impl
        if loads:
            transformers.AutoModelForCausalLM.from_config(model_config.hf_config)
        else:
            with pytest.raises((ImportError, ValueError), match="(?i)flash"):
                transformers.AutoModelForCausalLM.from_config(model_config.hf_config)
