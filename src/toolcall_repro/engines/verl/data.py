"""Our normalised samples -> verl's RL parquet (one row a prompt).

verl's `RLHFDataset` reads: `prompt` (chat messages, templated by the rollout's agent loop),
`data_source` (handed to the reward function; we use the setting, `single_turn` / `multi_turn`),
`reward_model.ground_truth` (our JSON ground-truth string, unchanged) and `extra_info` (`id` is the
key of the pre-rollout filter; `index` the row). Multi-turn samples are LoopTool-style prefixes: the
whole history is in the prompt and the reward scores the next assistant output, so no tool runs.

The chat messages come from the caller's `chat_messages(messages, tools) -> [{"role", "content"}]`
(the protocol's rendering for training: stronger system prompt with the tools, native template, earlier
thinking dropped); given the protocol's `render`, every prompt is checked to template to exactly the text
the local engine trains on and the evaluation sees. Prompts longer
than `max_prompt_tokens` are dropped here, and counted with their ids, so verl's own length filter
finds nothing left to drop silently.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import pyarrow as pa

ChatMessages = Callable[[list[dict], list[dict]], list[dict]]
Render = Callable[[list[dict], list[dict]], str]

VERL_SCHEMA = pa.schema(
    [
        ("data_source", pa.string()),
        ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
        ("ability", pa.string()),
        ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        (
            "extra_info",
            pa.struct(
                [
                    ("id", pa.string()),
                    ("index", pa.int64()),
                    ("source", pa.string()),
                    ("setting", pa.string()),
                    ("num_turns", pa.int64()),
                ]
            ),
        ),
    ]
)
REQUIRED = ("id", "source", "setting", "tools", "messages", "ground_truth", "num_turns")
ROLES = ("system", "user", "assistant", "tool")


@dataclass
class ConversionReport:
    """What went in, what came out, and every dropped sample with its reason."""

    rows_in: int = 0
    rows_out: int = 0
    dropped: dict[str, list[str]] = field(default_factory=dict)
    max_prompt_tokens: int | None = None
    longest_prompt_tokens: int = 0

    def drop(self, reason: str, sample_id: str) -> None:
        self.dropped.setdefault(reason, []).append(sample_id)

    def as_dict(self) -> dict:
        return {
            "rows_in": self.rows_in,
            "rows_out": self.rows_out,
            "dropped_counts": {k: len(v) for k, v in sorted(self.dropped.items())},
            "dropped_ids": {k: v for k, v in sorted(self.dropped.items())},
            "max_prompt_tokens": self.max_prompt_tokens,
            "longest_prompt_tokens": self.longest_prompt_tokens,
        }


def check_chat(messages: object, sample_id: str) -> list[dict]:
    """verl's parquet needs one struct type for every message: role and content strings only."""
    if not isinstance(messages, list) or not messages:
        raise ValueError(
            f"{sample_id}: chat_messages returned {type(messages).__name__}, not a non-empty list"
        )
    for m in messages:
        if not isinstance(m, Mapping) or set(m) != {"role", "content"}:
            raise ValueError(f"{sample_id}: chat message {m!r} must have exactly the keys role, content")
        if m["role"] not in ROLES or not isinstance(m["content"], str):
            raise ValueError(f"{sample_id}: chat message role {m['role']!r} / content type not allowed")
    if messages[-1]["role"] == "assistant":
        raise ValueError(f"{sample_id}: the prompt ends with an assistant message (the label leaked in)")
    return [{"role": m["role"], "content": m["content"]} for m in messages]


def prompt_text(tokenizer, chat: list[dict], template_kwargs: Mapping | None = None) -> str:
    """The prompt as verl's agent loop builds it: the chat template with the generation prompt and
    data.apply_chat_template_kwargs (`template_kwargs`: the model's thinking switch)."""
    return tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=False, **(template_kwargs or {}))


def prompt_tokens(tokenizer, chat: list[dict], template_kwargs: Mapping | None = None) -> int:
    return len(tokenizer(prompt_text(tokenizer, chat, template_kwargs), add_special_tokens=False)["input_ids"])


def to_verl_rows(
    samples: Iterable[Mapping],
    chat_messages: ChatMessages,
    tokenizer,
    max_prompt_tokens: int,
    limit: int | None = None,
    render: Render | None = None,
    template_kwargs: Mapping | None = None,
) -> tuple[list[dict], ConversionReport]:
    """Convert normalised samples (rows of the contract's parquet) in order; `limit` keeps the first N.

    With `render`, a prompt whose templated chat differs from `render(messages, tools)` is an error.
    """
    report = ConversionReport(max_prompt_tokens=int(max_prompt_tokens))
    rows: list[dict] = []
    seen: set[str] = set()
    for sample in samples:
        report.rows_in += 1
        missing = [k for k in REQUIRED if k not in sample]
        if missing:
            raise ValueError(f"sample {sample.get('id')!r} lacks columns {missing}")
        sid = str(sample["id"])
        if sid in seen:
            raise ValueError(f"duplicate sample id {sid}")
        seen.add(sid)
        if limit is not None and len(rows) >= limit:
            report.drop("beyond_limit", sid)
            continue
        messages, tools = json.loads(sample["messages"]), json.loads(sample["tools"])
        chat = check_chat(chat_messages(messages, tools), sid)
        text = prompt_text(tokenizer, chat, template_kwargs)
        if render is not None and text != render(messages, tools):
            raise ValueError(
                f"{sid}: verl's templated prompt differs from protocol.render (first 200 chars: {text[:200]!r})"
            )
        length = len(tokenizer(text, add_special_tokens=False)["input_ids"])
        report.longest_prompt_tokens = max(report.longest_prompt_tokens, length)
        if length > max_prompt_tokens:
            report.drop("prompt_too_long", sid)
            continue
        rows.append(
            {
                "data_source": str(sample["setting"]),
                "prompt": chat,
                "ability": "tool_call",
                "reward_model": {"style": "rule", "ground_truth": str(sample["ground_truth"])},
                "extra_info": {
                    "id": sid,
                    "index": len(rows),
                    "source": str(sample["source"]),
                    "setting": str(sample["setting"]),
                    "num_turns": int(sample["num_turns"]),
                },
            }
        )
    report.rows_out = len(rows)
    return rows, report


def verl_table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=VERL_SCHEMA)
