"""ACEBench end to end: prompts -> generation backend -> scoring -> one score file with its protocol card.

Prompts: the protocol's system prompt (call format + the entry's functions as tools) followed by ACEBench's
own notes for the category (prompts.py), then the dialogue as text, all through `protocol.render`. Text
categories are generated in one call per category; agent categories run episode by episode (agent/episode.py).
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolcall_repro.eval.acebench.agent.episode import MAX_MESSAGES, run_agent_entry
from toolcall_repro.eval.acebench.data import data_sha256, group_of, load_category
from toolcall_repro.eval.acebench.prompts import PROMPT_SET_ID, prompt_set_sha256, single_turn_messages
from toolcall_repro.eval.acebench.scoring import FORMULA, score_category, summarise
from toolcall_repro.eval.acebench.simulator import UserSimulator
from toolcall_repro.progress import Progress
from toolcall_repro.protocol import Protocol, protocol_card, render
from toolcall_repro.provenance import model_sha256

# ((chat messages, tools) per prompt, seed) -> one generation per prompt, each with .text, .prompt_tokens,
# .completion_tokens (backends.Generation); the backend derives each prompt's seed from (seed, its index)
GenerateFn = Callable[[list[tuple[list[dict], list[dict]]], int], list[Any]]


def step_seed(seed: int, entry_id: str, step: int) -> int:
    """The seed of one agent step: depends on (seed, entry, step), not on what ran before."""
    digest = hashlib.sha256(f"{seed}:{entry_id}:{step}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


@dataclass(frozen=True)
class Skipped:
    """Stands in for a generation whose prompt does not fit the model's context: an empty answer."""

    prompt_tokens: int
    text: str = ""
    completion_tokens: int = 0
    finish_reason: str = "prompt_too_long"


class TokenCounter:
    """Prompt/completion tokens and calls per category (the paper reports mean input tokens)."""

    def __init__(self) -> None:
        self.calls = self.prompt_tokens = self.completion_tokens = self.prompts_too_long = 0

    def add(self, generation: Any) -> None:
        self.calls += 1
        self.prompt_tokens += int(getattr(generation, "prompt_tokens", 0) or 0)
        self.completion_tokens += int(getattr(generation, "completion_tokens", 0) or 0)
        self.prompts_too_long += getattr(generation, "finish_reason", None) == "prompt_too_long"

    def to_dict(self) -> dict:
        calls = max(self.calls, 1)
        return {
            "calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "mean_prompt_tokens": self.prompt_tokens / calls,
            "mean_completion_tokens": self.completion_tokens / calls,
            "prompts_too_long": self.prompts_too_long,
        }


def backend_generate_fn(
    backend: Any, tokenizer: Any, protocol: Protocol, max_prompt_tokens: int | None = None
) -> GenerateFn:
    """Render each (messages, tools) with the protocol and sample one completion each, in one backend call.

    A prompt longer than `max_prompt_tokens` is not generated: its answer is empty and counted as too long
    (the model could not read it; vLLM would refuse it).
    """

    def generate(requests: list[tuple[list[dict], list[dict]]], seed: int) -> list[Any]:
        prompts = [render(messages, tools, protocol, tokenizer) for messages, tools in requests]
        out: list[Any] = [None] * len(prompts)
        kept = []
        for i, prompt in enumerate(prompts):
            if max_prompt_tokens is not None:
                length = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
                if length > max_prompt_tokens:
                    out[i] = Skipped(prompt_tokens=length)
                    continue
            kept.append(i)
        if kept:
            results = backend.generate(
                [prompts[i] for i in kept],
                n=1,
                temperature=protocol.temperature,
                top_p=protocol.top_p,
                max_tokens=protocol.max_tokens,
                seed=seed,
            )
            if len(results) != len(kept):
                raise RuntimeError(f"backend returned {len(results)} results for {len(kept)} prompts")
            for i, samples in zip(kept, results, strict=True):
                out[i] = samples[0]
        return out

    return generate


def context_budget(model_dir: str | Path, max_tokens: int) -> int | None:
    """Prompt tokens that leave room for `max_tokens` in the model's context (config.json), if it says."""
    config = Path(model_dir) / "config.json"
    if not config.is_file():
        return None
    context = json.loads(config.read_text()).get("max_position_embeddings")
    return max(1, int(context) - max_tokens) if context else None


class _CountingGenerator:
    """Wraps a GenerateFn: checks the result count, counts tokens, returns texts."""

    def __init__(self, generate: GenerateFn, counter: TokenCounter) -> None:
        self.generate, self.counter = generate, counter

    def texts(self, requests: list[tuple[list[dict], list[dict]]], seed: int) -> list[str]:
        generations = self.generate(requests, seed)
        if len(generations) != len(requests):
            raise RuntimeError(f"generation returned {len(generations)} results for {len(requests)} prompts")
        for generation in generations:
            self.counter.add(generation)
        return [g.text for g in generations]

    def agent(self, entry: Mapping, seed: int) -> Callable[[list[dict]], str]:
        """The model as an episode's agent: one generation per step, each step with its own seed."""
        steps = itertools.count()
        return lambda messages: self.texts(
            [(messages, entry["function"])], step_seed(seed, entry["id"], next(steps))
        )[0]


def run_categories(
    data_dir: str | Path,
    categories: Sequence[str],
    generate: GenerateFn,
    simulator: UserSimulator | None,
    fmt: str,
    limit: int | None = None,
    max_agent_messages: int = MAX_MESSAGES,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> tuple[dict[str, dict], dict[str, list], dict[str, TokenCounter]]:
    """Generate and score each category: (category scores as dicts, raw outputs, token counts).

    Every output is scored twice: with upstream's checker (the category dict itself: the headline,
    comparable to the paper and the leaderboard) and with the fixed one (under its `fixed` key).
    A text category is one generation call with `seed`; each agent step has its own `step_seed`.
    `log` also gets a progress line (entries done, elapsed, estimate left) at most every
    `progress.EVERY_S` seconds, and the last.
    """
    scores: dict[str, dict] = {}
    raw: dict[str, list] = {}
    tokens: dict[str, TokenCounter] = {}
    loaded = [(category, load_category(data_dir, category, limit)) for category in categories]
    progress = Progress(sum(len(e) for _, e in loaded), "acebench generation", log, unit="entries")
    for category, entries in loaded:
        model = _CountingGenerator(generate, tokens.setdefault(category, TokenCounter()))
        if group_of(category) == "agent":
            outputs = []
            for e in entries:
                outputs.append(
                    run_agent_entry(category, e, model.agent(e, seed), simulator, fmt, max_agent_messages)
                )
                progress.update(category=category)
        else:
            outputs = model.texts([(single_turn_messages(category, e), e["function"]) for e in entries], seed)
            progress.update(len(entries), category=category)
        score = score_category(category, entries, outputs, fmt=fmt, upstream=True).to_dict()
        score["fixed"] = score_category(category, entries, outputs, fmt=fmt, upstream=False).to_dict()
        if group_of(category) == "agent":
            pairs = zip(entries, outputs, strict=True)
            score["episode_errors"] = [
                {"id": e["id"], "error": o["error"]} for e, o in pairs if o.get("error")
            ]
        scores[category] = score
        raw[category] = [{"id": e["id"], "output": o} for e, o in zip(entries, outputs, strict=True)]
        if log is not None:
            log(
                f"{category}: accuracy {score['accuracy']:.3f} ({score['correct']}/{score['total']}) upstream"
                f" checker, {score['fixed']['accuracy']:.3f} fixed"
            )
    return scores, raw, tokens


def data_source(data_dir: str | Path) -> dict | None:
    """`source.json` written beside the data by `synthesize` or `download` (what made it), if any."""
    path = Path(data_dir) / "source.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def benchmark_commit(data_dir: str | Path) -> str | None:
    """The ACEBench commit recorded next to the data (`COMMIT` two levels above data_en), if any."""
    for candidate in (Path(data_dir).parent.parent / "COMMIT", Path(data_dir) / "COMMIT"):
        if candidate.is_file():
            return candidate.read_text(encoding="utf-8").split()[0]
    return None


def score_document(
    *,
    data_dir: str | Path,
    model_dir: str | Path,
    protocol: Protocol,
    protocol_id: str | None,
    tokenizer: Any,
    categories: Sequence[str],
    scores: Mapping[str, dict],
    tokens: Mapping[str, TokenCounter],
    simulator: UserSimulator | None,
    limit: int | None,
    max_prompt_tokens: int | None = None,
    max_agent_messages: int = MAX_MESSAGES,
) -> dict:
    card = protocol_card(
        protocol,
        tokenizer,
        benchmark="acebench",
        benchmark_version=benchmark_commit(data_dir),
        language="en",
        data_sha256=data_sha256(data_dir, list(categories)),
        data_source=data_source(data_dir),
        categories=list(categories),
        limit=limit,
        model={"path": str(model_dir), "sha256": model_sha256(model_dir)},
        protocol_id=protocol_id,
        user_simulator=simulator.card() if simulator is not None else None,
        max_prompt_tokens=max_prompt_tokens,
        max_agent_messages=max_agent_messages,
        acebench_prompts={
            "id": PROMPT_SET_ID,
            "sha256": prompt_set_sha256(),
            "history": "text in one user message; earlier reasoning dropped",
        },
        scoring={
            "checkers": CHECKERS,
            "headline": "upstream",
            "formula": FORMULA,
            "parse_policy": PARSE_POLICY,
        },
    )
    categories_out = {c: {**scores[c], "tokens": tokens[c].to_dict()} for c in categories}
    fixed = {c: scores[c]["fixed"] for c in categories}
    return {
        "card": card,
        "categories": categories_out,
        "summary": summarise(scores),
        "summary_fixed": summarise(fixed),
    }


CHECKERS = {
    "upstream": "upstream model_eval/checker.py semantics at the pinned commit, its three defects kept "
    "(summary, categories: the headline, comparable to the paper and the leaderboard)",
    "fixed": "the same checks with the three defects fixed (checker.py docstring; summary_fixed, "
    "categories.<c>.fixed): ground truth scores 100% on every category",
}
# How model text is read before either checker sees it (the same for both columns).
PARSE_POLICY = {
    "think_prefix": "a leading <think>...</think> block is removed before the calls are read (upstream's "
    "reader fails on it)",
    "code_fence": "a ```python fence around the calls is removed (upstream's reader fails on it)",
    "bare_call": "one call without the list brackets is read as a one-call list (upstream's reader fails)",
    "special_phrases": "special categories look for their phrase in the answer after </think> only "
    "(upstream searches the whole output, so a phrase written only inside the thinking passes upstream, "
    "fails here)",
    "parser": "toolcall_repro.toolcall.parse_tool_calls in the protocol's output format (no eval)",
}


def protocol_from_spec(spec: Mapping, seed: int) -> tuple[Protocol, str | None]:
    """A Protocol from the workflow's spec (which carries an extra `id`); `seed` overrides the spec's."""
    spec = dict(spec)
    protocol_id = spec.pop("id", None)
    protocol = Protocol.from_dict(spec)
    return dataclasses.replace(protocol, seed=seed), protocol_id
