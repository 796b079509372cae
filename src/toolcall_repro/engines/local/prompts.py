"""Training prompts from normalised samples: rendered with the shared protocol, tokenised, length-checked.

Training prompts use the protocol the paper trains with (`protocol.training_protocol`: stronger system
prompt, native multi-turn template, earlier thinking dropped). Prompts over `max_prompt_tokens` are dropped and counted.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from transformers import PreTrainedTokenizerBase

from toolcall_repro.data.schema import Sample, read_samples
from toolcall_repro.protocol import render, training_protocol
from toolcall_repro.toolcall import format_tool_calls

# The answer a tiny model learns to write: an (empty) thinking block, then the calls in the XML/JSON format
# the single-turn reward requires; "no call" samples get a short plain-text answer.
THINK = "<think>\n</think>\n"
NO_CALL_ANSWER = "all done."


def render_prompt(sample: Sample, tokenizer: PreTrainedTokenizerBase, protocol=None) -> str:
    """The exact prompt text (generation prompt appended) for one sample."""
    return render(sample.messages_list, sample.tools_list, protocol or training_protocol(), tokenizer)


def answer_text(ground_truth: list[dict]) -> str:
    """Supervised target for the warm start (without the eos token)."""
    return THINK + (format_tool_calls(ground_truth, "xml_json") if ground_truth else NO_CALL_ANSWER)


@dataclass(frozen=True)
class PromptRecord:
    id: str
    setting: str
    prompt_ids: tuple[int, ...]
    ground_truth: str  # JSON, as in the sample schema

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_ids)


def load_samples(paths: Iterable[str | Path]) -> list[Sample]:
    samples: list[Sample] = []
    for p in paths:
        samples.extend(read_samples(p))
    ids = Counter(s.id for s in samples)
    dup = [i for i, c in ids.items() if c > 1]
    if dup:
        raise ValueError(f"duplicate sample ids across inputs: {dup[:5]}")
    return samples


def build_prompts(
    samples: Sequence[Sample],
    tokenizer: PreTrainedTokenizerBase,
    max_prompt_tokens: int | None,
    enable_thinking: bool | None = None,
) -> tuple[list[PromptRecord], dict[str, int]]:
    """(records, drop counts by reason); an overlong prompt is dropped, never truncated. `enable_thinking`:
    the model's chat-template switch (the run's, as verl's engine passes it)."""
    protocol = training_protocol(enable_thinking=enable_thinking)
    records, dropped = [], Counter()
    for s in samples:
        ids = tuple(tokenizer(render_prompt(s, tokenizer, protocol), add_special_tokens=False)["input_ids"])
        if max_prompt_tokens is not None and len(ids) > max_prompt_tokens:
            dropped["overlong_prompt"] += 1
            continue
        json.loads(s.ground_truth)  # a bad label fails here, loudly
        records.append(PromptRecord(s.id, s.setting, ids, s.ground_truth))
    return records, dict(dropped)
