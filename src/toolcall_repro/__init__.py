"""toolcall-repro: effectiveness and efficiency of agentic tool calling and RL training, reproduced."""

__version__ = "0.1.0"
