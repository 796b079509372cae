"""Step-metric lines of a constructed training run, shared by the efficiency tests (their runs differ in
clocks and row counts only): four steps of two epochs over the same four groups, one all-correct, one
all-wrong, two mixed, each line built by the engines' own step_metrics."""

from __future__ import annotations

from toolcall_repro.rl import StreakFilter, step_metrics

PHASES = ("gen", "update_actor", "optimizer", "step")


def four_steps(step_s: float, update_s: float, gen_rows: int, update_rows: int, wall_scale=None):
    """The lines of a run's four steps.

    wall_scale: None, one clock (`timing_s/*`, as verl logs); a number, the local engine's two clocks:
    CPU seconds as given (`timing_cpu_s/*`) and wall seconds wall_scale times as long."""
    lines = []
    for step in range(4):
        line = step_metrics(
            step=step + 1,
            epoch=step // 2,
            groups=[[1.0] * 8, [0.0] * 8, [1.0, 0.0] * 4, [1.0, 0.0] * 4],
            filter_stats=StreakFilter(None).stats(),
            skipped_reward_mean=None,
            gen_tokens=10,
            update_tokens=10,
            total_num_tokens=20,
            gen_rows=gen_rows,
            update_rows=update_rows,
            timings={"gen": step_s - update_s, "update_actor": update_s, "optimizer": 0.0, "step": step_s},
            cumulative_s=0.0,
            cumulative_device_s=0.0,
        )
        if wall_scale is not None:
            for phase in PHASES:
                line[f"timing_cpu_s/{phase}"] = line[f"timing_s/{phase}"]
                line[f"timing_s/{phase}"] *= wall_scale
        lines.append({**line, "actor/pg_clipfrac": 0.01})
    return lines
