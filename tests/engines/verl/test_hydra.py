"""The generated overrides compose against verl's own config schema and pass verl's validation."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.verl
pytest.importorskip("verl", reason="verl lives in .venv-verl only (scripts/install-verl-env.sh)")

from _verl_helpers import run_config  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from toolcall_repro.engines.verl import hydra  # noqa: E402
from toolcall_repro.engines.verl.main import check_config, compose_config  # noqa: E402

PAPER = {
    "single_turn": run_config(
        setting="single_turn",
        batch_size=128,
        n=8,
        temperature=0.7,
        max_prompt_tokens=2048,
        max_new_tokens=1024,
        epochs=10,
        downsample={"m": 4, "selection": "max_variance", "advantage_scope": "group"},
    ),
    "multi_turn": run_config(
        setting="multi_turn",
        batch_size=256,
        n=16,
        temperature=1.0,
        max_prompt_tokens=4096,
        max_new_tokens=2048,
        epochs=4,
        downsample={"m": 8, "selection": "max_variance", "advantage_scope": "subset"},
    ),
}
EIGHT_GPUS = {"nodes": 1, "gpus_per_node": 8, "ray_num_cpus": 64}


def paths(tmp_path):
    return hydra.RunPaths.under(
        str(tmp_path / "train" / "single_turn" / "efficient"), "/models/Qwen2.5-3B-Instruct"
    )


@pytest.mark.parametrize("setting", sorted(PAPER))
def test_paper_settings_compose_and_validate(tmp_path, setting):
    run = PAPER[setting]
    cfg = compose_config(hydra.build_overrides(run, EIGHT_GPUS, paths(tmp_path), seed=3))
    check_config(cfg)  # verl's validate_config + its dataclasses
    actor, rollout = cfg.actor_rollout_ref.actor, cfg.actor_rollout_ref.rollout
    assert actor.optim.lr == pytest.approx(1e-6)
    assert (actor.clip_ratio_low, actor.clip_ratio_high) == (0.2, 0.28)
    assert actor.loss_agg_mode == "token-mean" and actor.entropy_coeff == 0 and actor.use_kl_loss is False
    assert cfg.algorithm.use_kl_in_reward is False and cfg.algorithm.adv_estimator == "grpo"
    assert cfg.data.train_batch_size == run["batch_size"] and rollout.n == run["n"]
    assert (
        rollout.temperature == run["temperature"] and cfg.data.max_prompt_length == run["max_prompt_tokens"]
    )
    assert cfg.trainer.total_epochs == run["epochs"] and cfg.trainer.use_v1 is False
    assert list(cfg.trainer.logger) == ["console", "file"]
    assert cfg.trainer.default_local_dir.startswith(str(tmp_path / "train"))
    assert cfg.toolcall.log_jsonl.startswith(str(tmp_path / "train"))
    assert cfg.toolcall.downsample.m == run["downsample"]["m"]
    assert cfg.toolcall.scaled_mini_batch_size * run["n"] == run["batch_size"] * run["downsample"]["m"]
    assert OmegaConf.to_container(cfg.toolcall.filter) == run["filter"]
    assert cfg.ray_kwargs.ray_init.num_cpus == 64
    checkpoint = cfg.actor_rollout_ref.actor.checkpoint
    assert list(checkpoint.save_contents) == list(checkpoint.load_contents) == ["model", "optimizer", "extra"]


def test_trackers_become_verls_loggers_writing_under_the_run(tmp_path):
    """engines.tracking (passed as train.verl.trackers) adds verl's own loggers; TensorBoard's event files
    go under the run's folder (toolcall.tensorboard_dir, exported as TENSORBOARD_DIR by the task runner)."""
    verl = {**EIGHT_GPUS, "trackers": ["tensorboard"]}
    cfg = compose_config(hydra.build_overrides(run_config(), verl, paths(tmp_path), seed=3))
    check_config(cfg)
    assert list(cfg.trainer.logger) == ["console", "file", "tensorboard"]
    assert cfg.toolcall.tensorboard_dir == str(tmp_path / "train" / "single_turn" / "efficient" / "tensorboard")
    with pytest.raises(ValueError, match=r"among \['tensorboard', 'wandb', 'mlflow'\], got \['neptune'\]"):
        hydra.build_overrides(run_config(), {**EIGHT_GPUS, "trackers": ["neptune"]}, paths(tmp_path), seed=3)
    # logging only: a resumed run may change where its curves go
    assert "trackers" in hydra.PERFORMANCE_ONLY


def test_max_steps_becomes_verls_total_training_steps(tmp_path):
    """The Tool-N1 filter policy's 80 steps (common.smk: max_steps): without it verl plans all epochs."""
    cfg = compose_config(hydra.build_overrides(run_config(max_steps=80), EIGHT_GPUS, paths(tmp_path), seed=0))
    assert cfg.trainer.total_training_steps == 80
    cfg = compose_config(hydra.build_overrides(run_config(), EIGHT_GPUS, paths(tmp_path), seed=0))
    assert cfg.trainer.total_training_steps is None
    with pytest.raises(hydra.VerlConfigError, match="max_steps"):
        hydra.build_overrides(run_config(max_steps=0), EIGHT_GPUS, paths(tmp_path), seed=0)


def test_a_retry_points_verl_at_the_checkpoint_and_a_first_attempt_at_none(tmp_path):
    first = compose_config(hydra.build_overrides(run_config(), EIGHT_GPUS, paths(tmp_path), seed=0))
    assert first.trainer.resume_mode == "disable" and first.trainer.resume_from_path is None
    folder = f"{paths(tmp_path).checkpoints}/global_step_40"
    retry = compose_config(
        hydra.build_overrides(run_config(), EIGHT_GPUS, paths(tmp_path), seed=0, resume_from=folder)
    )
    assert retry.trainer.resume_mode == "resume_path" and retry.trainer.resume_from_path == folder
    check_config(retry)


def test_reward_function_loads_through_verl(tmp_path):
    from verl.trainer.ppo.reward import get_custom_reward_fn

    cfg = compose_config(hydra.build_overrides(run_config(), {"gpus_per_node": 4}, paths(tmp_path), seed=0))
    fn = get_custom_reward_fn(cfg)
    out = fn(
        data_source="single_turn",
        solution_str='<think>\nok\n</think>\n<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>',
        ground_truth='[{"name": "f", "arguments": {"a": 1}}]',
        extra_info={"setting": "single_turn"},
    )
    assert out["score"] == 1.0 and out["acc"] == 1.0


def test_vanilla_variant_has_null_sections_and_several_nodes_leave_ray_cpus_to_ray(tmp_path):
    run = run_config(filter=None, downsample=None)
    cfg = compose_config(
        hydra.build_overrides(run, {"nodes": 2, "gpus_per_node": 4}, paths(tmp_path), seed=0)
    )
    check_config(cfg)
    assert cfg.toolcall.filter is None and cfg.toolcall.downsample is None
    assert cfg.trainer.nnodes == 2 and cfg.ray_kwargs.ray_init.num_cpus is None


def test_awkward_paths_survive_the_override_grammar(tmp_path):
    out = tmp_path / "a b'c=d,[e]"
    p = hydra.RunPaths.under(str(out), "/m/it's here")
    cfg = compose_config(hydra.build_overrides(run_config(), {"gpus_per_node": 4}, p, seed=0))
    assert cfg.data.train_files == p.train_files
    assert cfg.actor_rollout_ref.model.path == "/m/it's here"


def test_extra_overrides_reach_the_config(tmp_path):
    verl = {"gpus_per_node": 4, "extra_overrides": ["actor_rollout_ref.rollout.max_model_len=9000"]}
    cfg = compose_config(hydra.build_overrides(run_config(), verl, paths(tmp_path), seed=0))
    assert cfg.actor_rollout_ref.rollout.max_model_len == 9000


@pytest.mark.parametrize(
    ("run", "verl", "message"),
    [
        (run_config(n=1, downsample=None), {}, "n >= 2"),
        (run_config(downsample={"m": 5}), {}, "downsample.m"),
        (run_config(batch_size=6), {"ppo_mini_batch_size": 4}, "multiple of ppo_mini_batch_size"),
        (run_config(n=8, downsample={"m": 3}), {"ppo_mini_batch_size": 2}, "multiple of n"),
        (run_config(batch_size=2, n=4, downsample={"m": 2}), {"gpus_per_node": 8}, "data-parallel"),
        (run_config(), {"gpus_per_node": 4, "tensor_parallel": 3}, "tensor_parallel"),
        (run_config(), {"gpu_count": 8}, "unknown keys"),
        (run_config(loss_agg="sum"), {}, "loss_agg"),
        (run_config(downsample={"m": 2, "selection": "best"}), {}, "selection"),
        (run_config(batch_size=8, ppo_mini_batches=3), {}, "ppo_mini_batches=3"),
        (run_config(batch_size=8, ppo_mini_batches=2), {"ppo_mini_batch_size": 8}, "disagree"),
    ],
)
def test_bad_geometry_is_named_before_any_gpu_starts(tmp_path, run, verl, message):
    with pytest.raises(hydra.VerlConfigError, match=message):
        hydra.build_overrides(run, {"gpus_per_node": 4, **verl}, paths(tmp_path), seed=0)


@pytest.mark.parametrize(("steps", "size", "expected"), [(None, None, 8), (2, None, 4), (4, None, 2), (2, 4, 4)])
def test_the_local_engines_ppo_mini_batches_sets_verls_mini_batch(tmp_path, steps, size, expected):
    """train.settings.<s>.ppo_mini_batches (optimizer steps a batch) means the same on verl: the actor's
    ppo_mini_batch_size is batch_size / ppo_mini_batches (it was silently ignored there)."""
    run = run_config(batch_size=8, n=4, downsample=None, ppo_mini_batches=steps)
    overrides = hydra.build_overrides(run, {"gpus_per_node": 2, "ppo_mini_batch_size": size}, paths(tmp_path), seed=0)
    assert f"actor_rollout_ref.actor.ppo_mini_batch_size={expected}" in overrides


def test_overrides_file_round_trip():
    overrides = ["a=1", "+toolcall.x='y z'"]
    assert hydra.read_overrides("# comment\n" + hydra.overrides_text(overrides)) == overrides


def test_the_models_thinking_switch_reaches_verls_chat_template_kwargs(tmp_path):
    """model.enable_thinking (a run key) becomes data.apply_chat_template_kwargs, which verl 0.9.1's
    RLHFDataset and agent loop pass to apply_chat_template; unset, verl's empty default stays."""
    on = compose_config(hydra.build_overrides(run_config(enable_thinking=True), EIGHT_GPUS, paths(tmp_path), seed=0))
    check_config(on)
    assert OmegaConf.to_container(on.data.apply_chat_template_kwargs) == {"enable_thinking": True}
    off = compose_config(hydra.build_overrides(run_config(enable_thinking=False), EIGHT_GPUS, paths(tmp_path), seed=0))
    assert OmegaConf.to_container(off.data.apply_chat_template_kwargs) == {"enable_thinking": False}
    unset = compose_config(hydra.build_overrides(run_config(), EIGHT_GPUS, paths(tmp_path), seed=0))
    assert OmegaConf.to_container(unset.data.apply_chat_template_kwargs) == {}


def test_one_fsdp_strategy_names_the_actor_and_reference_engines(tmp_path):
    cfg = compose_config(hydra.build_overrides(PAPER["single_turn"], EIGHT_GPUS, paths(tmp_path), seed=0))
    check_config(cfg)
    ref = cfg.actor_rollout_ref
    assert ref.actor.strategy == ref.ref.strategy == "fsdp2"
    assert ref.actor.fsdp_config.strategy == ref.ref.fsdp_config.strategy == "fsdp2"
    assert cfg.trainer.device == "cuda" and "num_gpus" not in cfg.ray_kwargs.ray_init


def test_a_cpu_run_declares_logical_gpus_eager_vllm_and_no_sleep_mode(tmp_path):
    verl = {"device": "cpu", "nodes": 1, "gpus_per_node": 2, "tensor_parallel": 1}
    cfg = compose_config(hydra.build_overrides(run_config(), verl, paths(tmp_path), seed=0))
    check_config(cfg)
    assert cfg.trainer.device == "cpu" and cfg.ray_kwargs.ray_init.num_gpus == 2
    assert cfg.ray_kwargs.ray_init.num_cpus == hydra.CPU_RAY_NUM_CPUS
    rollout = cfg.actor_rollout_ref.rollout
    assert rollout.enforce_eager is True and rollout.enable_sleep_mode is False
    env = hydra.device_environment(verl)
    assert env["VERL_PLATFORM"] == "cpu"
    assert env["VERL_USE_EXTERNAL_MODULES"] == "toolcall_repro.engines.verl.cpu_platform"
    assert hydra.device_environment({"nodes": 1, "gpus_per_node": 8}) == {}


@pytest.mark.parametrize(
    "verl, message",
    [
        ({"device": "tpu"}, "train.verl.device='tpu'; allowed: ['gpu', 'cpu']"),
        ({"strategy": "megatron"}, "train.verl.strategy='megatron'; allowed: ['fsdp2', 'fsdp']"),
        ({"device": "cpu", "strategy": "fsdp"}, "device=cpu needs train.verl.strategy=fsdp2"),
    ],
)
def test_a_bad_device_or_strategy_is_named(verl, message):
    with pytest.raises(hydra.VerlConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        hydra.merged_verl(verl)


def test_the_device_is_part_of_what_a_run_computes(tmp_path):
    run, p = run_config(), paths(tmp_path)
    gpu = hydra.run_identity(run, {"nodes": 1, "gpus_per_node": 1, "tensor_parallel": 1}, p, 0)
    cpu = hydra.run_identity(run, {"device": "cpu", "nodes": 1, "gpus_per_node": 1, "tensor_parallel": 1}, p, 0)
    assert gpu != cpu and "trainer.device=cpu" in cpu
