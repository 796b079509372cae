"""The loss aggregation modes `rl.loss.agg_loss` implements (the local engine's), torch-free.

Apart from rl/loss.py so that the config check before any job (toolcall_repro.runconfig) reads the
registry without importing torch; tests/rl/test_loss.py holds agg_loss to exactly these names.
"""

LOSS_AGG_MODES = ("token-mean", "seq-mean-token-mean")
