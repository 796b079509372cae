"""Fuzz the tool-call parser and the rewards with random and mutated model outputs.

    python benchmarks/fuzz_toolcall.py --n 10000 --seed 0

Every output is parsed in both formats and scored by both rewards. Allowed outcomes: a parse, or a
ToolCallParseError; a successful parse must survive format -> parse unchanged. Anything else (another
exception, a broken round trip, a reward outside {0, 1}, code execution) is "unexpected": the script prints
the first few and exits 1.
"""

from __future__ import annotations

import argparse
import builtins
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path

from toolcall_repro.rewards import multi_turn_reward, single_turn_reward
from toolcall_repro.toolcall import FORMATS, ToolCallParseError, format_tool_calls, parse_tool_calls

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "data" / "toolcall_corpus" / "corpus.jsonl"
PWNED = Path("/tmp/toolcall_fuzz_PWNED")
TOKENS = [
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "[",
    "]",
    "{",
    "}",
    "(",
    ")",
    '"',
    "'",
    ",",
    ":",
    "=",
    "\\",
    "\n",
    " ",
    "name",
    "arguments",
    "null",
    "true",
    "NaN",
    "1e999",
    "9" * 50,
    "-",
    ".",
    "__import__",
    "os",
    "system",
    "lambda",
    "**",
    "*",
    "é",
    "\u202e",
    "\U0001f600",
    "\x00",
    "```",
    "python",
    "f",
    "g(",
]
PAYLOADS = [
    f"__import__('os').system('touch {PWNED}')",
    f"exec(\"open('{PWNED}', 'w')\")",
    f'eval(\'open("{PWNED}", "w")\')',
    "().__class__.__bases__[0].__subclasses__()",
    "[" * 500,
    "{" * 500,
    "1" * 5000,
]


def random_value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(8 if depth < 3 else 5)
    if kind == 0:
        return rng.randint(-(10**12), 10**12)
    if kind == 1:
        return rng.uniform(-1e6, 1e6)
    if kind == 2:
        return "".join(rng.choice("abc xyz'\"\\é☃<>{}[]") for _ in range(rng.randrange(12)))
    if kind == 3:
        return rng.choice([True, False, None])
    if kind == 4:
        return rng.choice([0, 2.0, -0.0, 1e300, 10**30])
    if kind in (5, 6):
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {f"k{i}": random_value(rng, depth + 1) for i in range(rng.randrange(4))}


def random_calls(rng: random.Random) -> list[dict]:
    return [
        {
            "name": rng.choice(["f", "get_weather", "math.hypot", "a.b.c"]),
            "arguments": {rng.choice("abcdxyz") + str(i): random_value(rng) for i in range(rng.randrange(4))},
        }
        for _ in range(rng.randrange(4))
    ]


def mutate(rng: random.Random, text: str) -> str:
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(7)
        pos = rng.randrange(len(text) + 1)
        if op == 0:
            text = text[:pos]  # truncation, as max_tokens does
        elif op == 1 and text:
            text = text[:pos] + text[pos + rng.randint(1, 5) :]
        elif op == 2:
            text = text[:pos] + rng.choice(TOKENS) + text[pos:]
        elif op == 3:
            text = text[:pos] + rng.choice(PAYLOADS) + text[pos:]
        elif op == 4 and text:
            a, b = sorted(rng.randrange(len(text)) for _ in range(2))
            text = text[:b] + text[a:b] + text[b:]  # duplicate a slice
        elif op == 5:
            text = rng.choice(["<think>", "<think>r</think>\n", "```python\n", ""]) + text
        else:
            text = text + rng.choice(["</tool_call>", "]", ")", "\n```", " trailing words", ""])
    return text


def make_output(rng: random.Random, corpus: list[str]) -> str:
    kind = rng.randrange(4)
    if kind == 0:  # well-formed calls, then mutated
        fmt = rng.choice(FORMATS)
        try:
            text = format_tool_calls(random_calls(rng), fmt)
        except ValueError:
            text = "[]"
        if fmt == "xml_json" and rng.random() < 0.5:
            text = "<think>reasoning</think>\n" + text
        return mutate(rng, text) if rng.random() < 0.8 else text
    if kind == 1:  # hand-written adversarial cases, mutated
        return mutate(rng, rng.choice(corpus))
    if kind == 2:  # token soup
        return "".join(rng.choice(TOKENS) for _ in range(rng.randrange(40)))
    return "".join(chr(rng.randrange(0x20, 0x2FF)) for _ in range(rng.randrange(60)))  # random characters


def check(text: str, gold: list[dict]) -> list[tuple[str, str, str]]:
    """(format or "reward", outcome, detail) for one output; outcome is ok, parse_error or unexpected."""
    results = []
    for fmt in FORMATS:
        try:
            calls = parse_tool_calls(text, fmt)
        except ToolCallParseError as exc:
            results.append((fmt, "parse_error", exc.reason))
            continue
        except Exception as exc:  # noqa: BLE001 - the point is to catch anything the parser should not raise
            results.append((fmt, "unexpected", f"parse: {type(exc).__name__}: {exc}"[:300]))
            continue
        try:
            again = parse_tool_calls(format_tool_calls(calls, "xml_json"), "xml_json")
        except Exception as exc:  # noqa: BLE001
            results.append((fmt, "unexpected", f"round trip: {type(exc).__name__}: {exc}"[:300]))
            continue
        ok = again == calls
        results.append((fmt, "ok" if ok else "unexpected", "" if ok else "round trip changed the calls"))
    try:
        scores = [
            single_turn_reward(text, gold),
            multi_turn_reward(text, gold),
            multi_turn_reward(text, gold, "python"),
        ]
        bad = [r for r in scores if r.score not in (0.0, 1.0)]
        results.append(("reward", "unexpected" if bad else "ok", "score outside {0, 1}" if bad else ""))
    except Exception as exc:  # noqa: BLE001
        results.append(("reward", "unexpected", f"{type(exc).__name__}: {exc}"[:300]))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    def banned(*a, **k):
        raise AssertionError("the parser evaluated model output")

    builtins.eval = builtins.exec = banned  # any evaluation becomes an unexpected exception
    PWNED.unlink(missing_ok=True)
    rng = random.Random(args.seed)
    corpus = [json.loads(line)["text"] for line in CORPUS.read_text().splitlines() if line.strip()]
    gold = [{"name": "f", "arguments": {"a": 1}}]
    counts, reasons, unexpected = Counter(), {fmt: Counter() for fmt in FORMATS}, []
    start = time.perf_counter()
    for i in range(args.n):
        text = make_output(rng, corpus)
        for where, outcome, detail in check(text, gold if i % 2 else []):
            counts[where, outcome] += 1
            if outcome == "parse_error":
                reasons[where][detail] += 1
            elif outcome == "unexpected":
                unexpected.append((i, f"{where}: {detail}", text[:200]))
    if PWNED.exists():
        unexpected.append((-1, "side effect: a payload created its target file", ""))
    elapsed = time.perf_counter() - start
    print(f"outputs: {args.n}  seed: {args.seed}  seconds: {elapsed:.1f}")
    for fmt in FORMATS:
        print(
            f"{fmt}: parsed ok {counts[fmt, 'ok']}, ToolCallParseError {counts[fmt, 'parse_error']}, "
            f"unexpected {counts[fmt, 'unexpected']}"
        )
        print(f"  errors by reason: {dict(reasons[fmt].most_common())}")
    print(f"rewards: ok {counts['reward', 'ok']}, unexpected {counts['reward', 'unexpected']}")
    print(f"unexpected in total: {len(unexpected)}")
    for i, detail, text in unexpected[:10]:
        print(f"  #{i}: {detail}\n      {text!r}")
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
