"""The results layout: one author for every results path and manifest key, the rules' patterns included.

The rule files take every results path from the layout (workflow/rules/common.smk: LAYOUT = EXP.layout);
a path spelled in a rule file is a second author, and this module fails on it.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

from toolcall_repro.layout import Layout
from toolcall_repro.units import TrainingRun

REPO = Path(__file__).resolve().parents[1]
RULE_FILES = sorted([*(REPO / "workflow" / "rules").glob("*.smk"), REPO / "workflow" / "Snakefile"])
# A string that names a results file: the run tree, or a file kind the results tree holds.
RESULT_SUFFIXES = (".json", ".jsonl", ".parquet", ".tsv", ".log", ".md", ".csv", ".html", ".png", ".tar.gz")
# Calls that spell a path from parts: the old path helper, and the layout's own escape hatch.
PATH_CALLS = re.compile(r"(?<![\w.])R\(|\bEXP\.path\(|\bLAYOUT\.path\(")
LAYOUT_CALL = re.compile(r"\bLAYOUT\.(\w+)\(")


def string_literals(text: str) -> list[str]:
    """Every string literal of a rule file (Snakemake's directives are Python tokens)."""
    return [tok.string for tok in tokenize.generate_tokens(io.StringIO(text).readline) if tok.type == tokenize.STRING]


def spelled_paths(text: str) -> list[str]:
    """What a rule file spells of a results path itself: path-building calls, and string literals that name
    the results tree or a results file (report() patterns such as "{name}.html" name no file)."""
    found = [m[0] for m in PATH_CALLS.finditer(text)]
    for literal in string_literals(text):
        body = literal.lstrip("rRbBfFuU").strip("\"'")  # the text: no prefix, no quotes
        if "{name}" in body:
            continue
        if re.search(r"(^|/)results(/|$)", body) or body.endswith(RESULT_SUFFIXES):
            found.append(literal)
    return found


def test_the_check_finds_a_path_spelled_in_a_rule():
    """Not vacuous: the rule text of before the layout is caught, each way a path was spelled."""
    old = 'rule x:\n    output:\n        raw=R("data", "raw", "{source}.jsonl"),\n    log:\n        R("logs", "x.log"),\n'
    assert spelled_paths(old) == ["R(", "R(", '"{source}.jsonl"', '"x.log"']
    assert spelled_paths('ARCHIVE = os.path.join("results", "archives")') == ['"results"']
    assert spelled_paths('x = EXP.path("data", "acebench")') == ["EXP.path("]
    assert spelled_paths('patterns=["{name}.html"],\n    caption="../report/tables.rst",') == []


@pytest.mark.parametrize("rule_file", RULE_FILES, ids=lambda p: p.name)
def test_no_rule_file_spells_a_results_path(rule_file):
    assert spelled_paths(rule_file.read_text()) == [], f"{rule_file.name}: take the path from LAYOUT (layout.py)"


def test_every_layout_call_of_the_rules_names_a_layout_method():
    used = {name for f in RULE_FILES for name in LAYOUT_CALL.findall(f.read_text())}
    assert used and {name for name in used if not callable(getattr(Layout, name, None))} == set()


def test_paths_keys_logs_and_benchmarks():
    lay = Layout("results/t")
    assert lay.training_dir("{dataset}", "{variant}", "{seed}") == "results/t/train/{dataset}/{variant}/seed{seed}"
    assert lay.training_key("multi_turn", "vanilla") == "multi_turn-vanilla"
    assert lay.training_key("multi_turn", "vanilla", 2) == "multi_turn-vanilla-seed2"
    assert lay.manifest("make_tables") == "results/t/manifests/make_tables/all.json"
    assert lay.manifest("generate_bfcl", "{model}", "{protocol}", "{seed}") == (
        "results/t/manifests/generate_bfcl/{model}-{protocol}-{seed}.json"
    )
    assert lay.log("make_tables") == "results/t/logs/make_tables.log"
    assert lay.log("score_bfcl", "m", "p", 0) == "results/t/logs/score_bfcl/m-p-0.log"
    assert lay.benchmark("download_model", "{slug}") == "results/t/benchmarks/download_model/{slug}.tsv"
    assert lay.raw_source("xlam") == "results/t/data/raw/xlam.jsonl"
    assert lay.download_record("xlam") == "results/t/data/raw/hub/xlam.jsonl.source.json"
    assert lay.raw_generations("bfcl", "m", "p", 1) == "results/t/eval/bfcl/m/p/raw/seed1"
    assert lay.archive_log("results/archives/t-abc-123.tar.gz") == "results/archives/t-abc-123.log"
    assert TrainingRun("results/t", "single_turn", "vanilla").dir == lay.training_dir("single_turn", "vanilla")


def test_an_unknown_file_kind_names_the_kinds():
    lay = Layout("results/t")
    with pytest.raises(ValueError, match="metrics, curve, summary, final; not 'metrics.jsonl'"):
        lay.training_file("single_turn", "vanilla", "metrics.jsonl")
    with pytest.raises(ValueError, match="summary, variance, seeds; not 'summary.json'"):
        lay.score("bfcl", "base", "default", "summary.json")
