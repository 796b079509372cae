"""General-capability check (issue 9): lm-evaluation-harness on the base and the RL model."""
