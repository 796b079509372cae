"""The user side of ACEBench's agent_multi_turn dialogues.

Upstream uses an LLM (gpt-4o by default) that plays the user from the entry's instruction. We offer:
- `OpenAIUser`: any OpenAI-compatible chat endpoint (base_url + model from config; the key is read from an
  environment variable whose name is configured, never stored);
- `ScriptedUser`: a fixed, model-free policy for offline runs (the embedded default). It is not ACEBench's
  user and its scores are not comparable to published ones; the protocol card says so.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Protocol

from toolcall_repro.eval.acebench.prompts import USER_SIM_OPENING, user_simulator_system

FINISH = "finish conversation"


class UserSimulatorError(RuntimeError):
    """The simulated user could not answer (endpoint down, empty reply, ...)."""


class UserSimulator(Protocol):
    def start(self, entry: Mapping) -> str:
        """Begin a dialogue for `entry`; returns the user's first message."""

    def reply(self, agent_message: str) -> str:
        """The user's answer to the agent's last message."""

    def card(self) -> dict:
        """What produced the user turns, for the protocol card."""


class ScriptedUser:
    """Opens with the whole instruction, then agrees and restates it, then ends the dialogue.

    Deterministic and offline; `replies` answers are given before the user says "finish conversation".
    """

    POLICY = (
        "open with the instruction; answer each agent message with 'Yes.' plus the instruction; then finish"
    )

    def __init__(self, replies: int = 3) -> None:
        if replies < 0:
            raise ValueError(f"replies must be >= 0, got {replies}")
        self.replies = replies
        self._instruction = ""
        self._given = 0

    def start(self, entry: Mapping) -> str:
        self._instruction = str(entry["question"])
        self._given = 0
        return self._instruction

    def reply(self, agent_message: str) -> str:
        if self._given >= self.replies:
            return FINISH
        self._given += 1
        return f"Yes. {self._instruction}"

    def card(self) -> dict:
        return {
            "kind": "scripted",
            "policy": self.POLICY,
            "replies": self.replies,
            "runs": "inside the scoring job, offline",
            "note": "not ACEBench's LLM user: agent_multi_turn scores are not comparable to published ones",
        }


class OpenAIUser:
    """An LLM user behind an OpenAI-compatible `/v1/chat/completions` endpoint."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str = "OPENAI_API_KEY",
        temperature: float = 0.001,
        top_p: float = 1.0,
        max_tokens: int = 1000,
        seed: int | None = None,
        timeout_s: float = 120.0,
        client: object | None = None,
    ) -> None:
        if not base_url or not model:
            raise ValueError("the OpenAI-compatible user simulator needs base_url and model")
        self.base_url, self.model = base_url, model
        self.api_key_env = api_key_env
        self.temperature, self.top_p, self.max_tokens, self.seed = temperature, top_p, max_tokens, seed
        if client is None:
            from openai import OpenAI  # installed with the eval extra (bfcl-eval depends on it)

            # Local servers accept any key; a missing variable must not block them.
            client = OpenAI(
                base_url=base_url, api_key=os.environ.get(api_key_env) or "unused", timeout=timeout_s
            )
        self._client = client
        self._messages: list[dict] = []

    def _ask(self) -> str:
        kwargs = {
            "model": self.model,
            "messages": self._messages,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
        }
        if self.seed is not None:
            kwargs["seed"] = self.seed
        try:
            response = self._client.chat.completions.create(**kwargs)
            text = response.choices[0].message.content
        except Exception as exc:  # any client/transport failure ends this dialogue with a recorded error
            raise UserSimulatorError(f"user simulator request to {self.base_url} failed: {exc}") from exc
        if not isinstance(text, str) or not text.strip():
            raise UserSimulatorError("user simulator returned an empty message")
        self._messages.append({"role": "assistant", "content": text})
        return text

    def start(self, entry: Mapping) -> str:
        self._messages = [
            {"role": "system", "content": user_simulator_system(entry)},
            {"role": "user", "content": USER_SIM_OPENING},
        ]
        return self._ask()

    def reply(self, agent_message: str) -> str:
        text = agent_message.removeprefix("agent:").removeprefix("user:")
        self._messages.append({"role": "user", "content": text})
        return self._ask()

    def card(self) -> dict:
        return {
            "kind": "openai",
            "runs": "behind base_url, reached over the network from the scoring job",
            "base_url": self.base_url,
            "model": self.model,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
        }


def make_user_simulator(kind: str, config: Mapping | None = None) -> UserSimulator:
    """`scripted` (optional `replies`) or `openai` (`base_url`, `model`, optional `api_key_env`,
    `temperature`, `top_p`, `max_tokens`, `seed`)."""
    config = dict(config or {})
    if kind == "scripted":
        return ScriptedUser(replies=int(config.get("replies", 3)))
    if kind == "openai":
        allowed = {
            "base_url",
            "model",
            "api_key_env",
            "temperature",
            "top_p",
            "max_tokens",
            "seed",
            "timeout_s",
        }
        unknown = set(config) - allowed
        if unknown:
            raise ValueError(f"unknown user-simulator settings {sorted(unknown)}; allowed: {sorted(allowed)}")
        if "base_url" not in config or "model" not in config:
            raise ValueError("--simulator openai needs base_url and model (from --simulator-config)")
        return OpenAIUser(**config)
    raise ValueError(f"unknown user simulator {kind!r}; expected scripted or openai")
