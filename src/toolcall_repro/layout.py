"""Where a run's results lie: every path under results/<run_id> and every manifest key, written once.

The rules take their inputs, outputs, logs and benchmarks from here (a wildcard pattern such as
"{dataset}" is an argument like any other), and the experiment's units (training runs, scores) take their
paths from here; no rule file spells a results path (tests/test_layout.py).

Pure: strings in, strings out.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from toolcall_repro.archive import SUFFIX as ARCHIVE_SUFFIX

# What a GRPO run writes in its folder: per-step metrics, the held-out curve, the summary, the final weights.
TRAINING_FILES = {"metrics": "metrics.jsonl", "curve": "curve.jsonl", "summary": "summary.json", "final": "final"}
# A model's score files under a protocol: the summary over seeds, the seed-variance summary, the seeds used.
SCORE_KINDS = ("summary", "variance", "seeds")


def job_key(*parts) -> str:
    """A job's key among its rule's jobs (its manifest, log and benchmark file name): the parts that vary."""
    return "-".join(str(p) for p in parts if p is not None)


def seed_folder(seed) -> str:
    """A seed's folder or key part: seed<k> (or seed{seed}, the pattern)."""
    return f"seed{seed}"


def unit_name(setting: str, seed) -> str:
    """A seed-pair unit of the efficiency evidence: <setting>-seed<s> (or the pattern's placeholders)."""
    return f"{setting}-{seed_folder(seed)}"


def manifest_path(run_dir: str, rule: str, key: str = "all") -> str:
    """A job's manifest, written by the job entry (`python -m toolcall_repro.job`) when the job ends."""
    return os.path.join(run_dir, "manifests", rule, f"{key}.json")


@dataclass(frozen=True)
class Layout:
    """The results tree of one run, under run_dir (results/<run_id>)."""

    run_dir: str

    def path(self, *parts: str) -> str:
        return os.path.join(self.run_dir, *parts)

    # --- every job: its manifest, log and benchmark ---------------------------------------------------

    # A job's key is the parts that vary among its rule's jobs, joined by "-" (job_key): the wildcards'
    # patterns in a rule ("{model}", "{protocol}"), their values in a unit (Score, TrainingRun).

    def manifest(self, rule: str, *key) -> str:
        """manifests/<rule>/<key>.json; all.json for a rule of one job."""
        return manifest_path(self.run_dir, rule, job_key(*key) or "all")

    def log(self, rule: str, *key) -> str:
        """logs/<rule>.log for a rule of one job, logs/<rule>/<key>.log for one of many."""
        return self._by_rule("logs", rule, job_key(*key), ".log")

    def benchmark(self, rule: str, *key) -> str:
        return self._by_rule("benchmarks", rule, job_key(*key), ".tsv")

    def benchmarks(self) -> str:
        """The folder of every job's benchmark file (the timing table reads it)."""
        return self.path("benchmarks")

    def _by_rule(self, folder: str, rule: str, key: str, suffix: str) -> str:
        return self.path(folder, rule, key + suffix) if key else self.path(folder, rule + suffix)

    # --- data ---------------------------------------------------------------------------------------

    def raw_source(self, source: str, hub: bool = False) -> str:
        """A source's raw rows: the synthetic twin, or the Hub download (hub) beside its record."""
        return self.path("data", "raw", *(["hub"] if hub else []), f"{source}.jsonl")

    def download_record(self, source: str) -> str:
        """What download_source read from the Hub (id, revision) for a source."""
        return self.raw_source(source, hub=True) + ".source.json"

    def samples(self, source: str) -> str:
        """A source's normalised samples (one schema for both settings)."""
        return self.path("data", "normalised", f"{source}.parquet")

    def rejects(self, source: str) -> str:
        return self.path("data", "normalised", f"{source}.rejects.jsonl")

    def normalise_report(self, source: str) -> str:
        return self.path("data", "normalised", f"{source}.report.json")

    def lm_eval_record(self) -> str:
        return self.path("data", "lm_eval", "record.json")

    def acebench_data(self, source: str) -> str:
        """ACEBench's data as the pipeline writes it: the synthetic twins or the pinned English download."""
        return self.path("data", "acebench", {"synthetic": "synthetic", "download": "data_en"}[source])

    # --- models -------------------------------------------------------------------------------------

    def base_model(self) -> str:
        """The tiny model's warm start (the embedded default's base model)."""
        return self.path("models", "base")

    def early_model(self) -> str:
        """The warm start's earlier snapshot (model.tiny.early_step), a weaker filter policy."""
        return self.path("models", "base_early")

    def hub_model(self, slug: str) -> str:
        """A hub model's snapshot, by its folder name (org--name)."""
        return self.path("models", "hub", slug)

    # --- filter -------------------------------------------------------------------------------------

    def train_set(self, dataset: str) -> str:
        """The rows a training run on `dataset` (one of TRAIN_DATASETS) reads."""
        return self.path("data", "train", f"{dataset}.parquet")

    def heldout_split(self, name: str) -> str:
        """A filter chain's held-out split (a setting's, or Tool-N1's pool's)."""
        return self.path("data", "train", f"heldout_{name}.parquet")

    def filter_step_report(self, step: str) -> str:
        """One filter chain's report (single_turn, multi_turn, format_study, pool_tooln1)."""
        return self.path("data", "filter", f"{step}.json")

    def filter_report(self, ext: str = "json") -> str:
        """The merged filter report (json for the analysis, md to read)."""
        return self.path("data", f"filter_report.{ext}")

    # --- training -----------------------------------------------------------------------------------

    def training_dir(self, dataset: str, variant: str, seed=None) -> str:
        """A GRPO run's folder: train/<dataset>/<variant>, in seed<k>/ for a run at another seed."""
        return self.path("train", dataset, variant, *([seed_folder(seed)] if seed is not None else []))

    def training_file(self, dataset: str, variant: str, kind: str, seed=None) -> str:
        """One of a run's TRAINING_FILES (metrics, curve, summary, final)."""
        if kind not in TRAINING_FILES:
            raise ValueError(f"a training run writes {', '.join(TRAINING_FILES)}; not {kind!r}")
        return os.path.join(self.training_dir(dataset, variant, seed), TRAINING_FILES[kind])

    @staticmethod
    def training_key(dataset: str, variant: str, seed=None) -> str:
        """A training job's key: <dataset>-<variant>[-seed<k>] (a scoring job's seed has no prefix)."""
        return job_key(dataset, variant, seed_folder(seed) if seed is not None else None)

    def efficiency_report(self) -> str:
        return self.index("efficiency")

    def evidence_unit(self, setting: str, seed) -> str:
        """One pre-registered seed-pair unit's analysis inputs (efficiency/units/<setting>-seed<s>), as
        `make evidence-unit` commits them under docs/evidence/units/."""
        return self.path("efficiency", "units", unit_name(setting, seed))

    # --- evaluation ---------------------------------------------------------------------------------

    def vllm_record(self) -> str:
        """Where locate_vllm found the vLLM that generate_bfcl serves with."""
        return self.path("eval", "bfcl", "vllm.json")

    def raw_generations(self, benchmark: str, model: str, protocol: str, seed) -> str:
        """One seed's raw generations (the benchmark's own layout, the card, the expected entry ids)."""
        return self.path("eval", benchmark, model, protocol, "raw", seed_folder(seed))

    def seed_score(self, benchmark: str, model: str, protocol: str, seed) -> str:
        return self.path("eval", benchmark, model, protocol, f"{seed_folder(seed)}.json")

    def score(self, benchmark: str, model: str, protocol: str | None, kind: str = "summary") -> str:
        """A score file (one of SCORE_KINDS) of a model under a protocol; no protocol for general capability."""
        if kind not in SCORE_KINDS:
            raise ValueError(f"a score file is one of {', '.join(SCORE_KINDS)}; not {kind!r}")
        folder = [model] if protocol is None else [model, protocol]
        return self.path("eval", benchmark, *folder, f"{kind}.json")

    # --- results ------------------------------------------------------------------------------------

    def index(self, section: str) -> str:
        """A results section's index page: tables, figures, efficiency."""
        return self.path(section, "index.md")

    def claims(self, fmt: str) -> str:
        """The scorecard (one row per claim of the paper): html, md or csv."""
        return self.path("tables", f"claims.{fmt}")

    def tables(self, fmt: str) -> str:
        """The folder of every table in one format: html (to read), csv (every cell, for digests and figures)."""
        return self.path("tables", fmt)

    def figures(self) -> str:
        """The folder of every figure (png)."""
        return self.path("figures", "png")

    def provenance(self) -> str:
        return self.path("provenance.json")

    # --- archives: outside results/<run_id> (Snakemake deletes the old outputs of every job it reruns) ----

    @staticmethod
    def archive_log(archive: str) -> str:
        """The archive job's log, beside the archive: the run tree it packs is no place for it."""
        return archive.removesuffix(ARCHIVE_SUFFIX) + ".log"

    @staticmethod
    def archive_benchmark(archive: str) -> str:
        return archive.removesuffix(ARCHIVE_SUFFIX) + ".benchmark.tsv"
