"""The paper-scale engine: verl 0.9.1 GRPO with the pre-rollout filter and max-variance down-sampling.

`hydra` (override generation) and `data` import without verl; `batch`, `adapter`, `reward`, `main`
need the `.venv-verl` environment (workflow/envs/train-verl.yaml).
"""
