"""Run verl's PPO entry with our trainer subclass and sampler, without forking verl.

verl 0.9.1's `main_ppo_v0.TaskRunner.run` hard-codes `RayPPOTrainer` and `create_rl_sampler`; our
`ToolcallTaskRunner` reuses its `BaseTaskRunner` (worker and resource-pool registration) and builds the
datasets, the `StreakFilterSampler` and the `ToolcallPPOTrainer` itself, then hands it to verl's own
`run_ppo` (Ray init, remote task runner). The config is composed by Hydra from verl's packaged
`ppo_trainer.yaml` plus our override file, so verl's schema and `validate_config` check every key.
"""

from __future__ import annotations

import os
from pathlib import Path

import ray
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf
from verl.trainer.main_ppo_v0 import BaseTaskRunner

from toolcall_repro.engines.verl.adapter import (
    StreakFilterSampler,
    ToolcallPPOTrainer,
    dataset_sample_ids,
    make_streak_filter,
)


def verl_config_dir() -> str:
    import verl

    return str(Path(verl.__file__).parent / "trainer" / "config")


def compose_config(overrides: list[str]) -> DictConfig:
    """verl's `ppo_trainer` config with our overrides, as `python -m verl.trainer.main_ppo` builds it."""
    with initialize_config_dir(config_dir=verl_config_dir(), version_base=None):
        return compose(config_name="ppo_trainer", overrides=list(overrides))


def check_config(config: DictConfig) -> None:
    """verl's own validation (batch divisibility, micro-batches, actor dataclass), no GPU needed."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    if "toolcall" not in config:
        raise ValueError("config has no `toolcall` section: generate it with engines.verl.hydra")
    if config.trainer.use_v1:
        raise ValueError("trainer.use_v1 must be false: only the legacy RayPPOTrainer takes our sampler")
    validate_config(
        config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config)
    )
    for section in ("algorithm", "actor_rollout_ref.rollout"):
        omega_conf_to_dataclass(OmegaConf.select(config, section))


def check_model_config(config: DictConfig) -> None:
    """verl's model dataclass as its workers build it (tokenizer, HF config with the attention
    implementation): needs the base model's files, not a GPU."""
    from verl.utils.config import omega_conf_to_dataclass

    omega_conf_to_dataclass(config.actor_rollout_ref.model)


def build_trainer(
    config: DictConfig,
    *,
    tokenizer,
    processor,
    role_worker_mapping,
    resource_pool_manager,
    ray_worker_group_cls,
) -> ToolcallPPOTrainer:
    """Datasets, the filter's sampler and the trainer (CPU only: workers start in `init_workers`)."""
    from verl.trainer.ppo.utils import create_rl_dataset
    from verl.utils.dataset.rl_dataset import collate_fn

    tc = config.toolcall
    train_dataset = create_rl_dataset(
        config.data.train_files, config.data, tokenizer, processor, is_train=True
    )
    val_dataset = create_rl_dataset(config.data.val_files, config.data, tokenizer, processor, is_train=False)
    sampler = StreakFilterSampler(
        dataset_sample_ids(train_dataset),
        make_streak_filter(OmegaConf.to_container(tc.filter) if tc.filter else None, int(tc.seed)),
        seed=int(tc.seed),
    )
    return ToolcallPPOTrainer(
        config=config,
        tokenizer=tokenizer,
        processor=processor,
        role_worker_mapping=role_worker_mapping,
        resource_pool_manager=resource_pool_manager,
        ray_worker_group_cls=ray_worker_group_cls,
        train_dataset=train_dataset,
        val_dataset=val_dataset,
        collate_fn=collate_fn,
        train_sampler=sampler,
    )


class ToolcallTaskRunner(BaseTaskRunner):
    """verl's task runner (worker and pool registration) with our trainer class and sampler."""

    def run(self, config: DictConfig) -> None:
        from verl.utils.config import omega_conf_to_dataclass

        OmegaConf.resolve(config)
        # verl's FileLogger reads this in the process that runs fit(): this Ray actor.
        os.environ["VERL_FILE_LOGGER_PATH"] = str(config.toolcall.log_jsonl)
        # verl's tensorboard logger (trainer.logger) reads this in the same process: the run's own folder.
        if config.toolcall.get("tensorboard_dir"):
            os.environ["TENSORBOARD_DIR"] = str(config.toolcall.tensorboard_dir)
        Path(config.toolcall.log_jsonl).parent.mkdir(parents=True, exist_ok=True)
        _, worker_group_cls = self.add_actor_rollout_worker(config)
        self.add_critic_worker(config)
        self.add_reward_model_resource_pool(config)
        self.add_teacher_model_resource_pool(config)
        check_config(config)
        model_config = omega_conf_to_dataclass(config.actor_rollout_ref.model)
        trainer = build_trainer(
            config,
            tokenizer=model_config.tokenizer,
            processor=model_config.processor,
            role_worker_mapping=self.role_worker_mapping,
            resource_pool_manager=self.init_resource_pool_mgr(config),
            ray_worker_group_cls=worker_group_cls,
        )
        trainer.init_workers()
        trainer.fit()


def train(overrides: list[str]) -> None:
    """Compose, validate and run; Ray joins `RAY_ADDRESS` when set (multi-node), else starts locally."""
    from verl.trainer.main_ppo import run_ppo
    from verl.utils.device import auto_set_device

    config = compose_config(overrides)
    if not os.environ.get("RAY_ADDRESS") and config.ray_kwargs.ray_init.num_cpus is None:
        # A local Ray counts the whole machine's CPUs, not this job's share of them.
        config.ray_kwargs.ray_init.num_cpus = len(os.sched_getaffinity(0))
    auto_set_device(config)
    check_config(config)
    run_ppo(config, task_runner_class=ray.remote(ToolcallTaskRunner))
