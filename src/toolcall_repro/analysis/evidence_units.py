"""The efficiency evidence in seed-pair units, each run within one machine lease and committed when done.

Pre-registration 3 (docs/efficiency.md): the unit is one seed pair of one setting, vanilla seed s and
efficient seed s trained side by side on one machine, from that machine's own upstream (data, warm start,
the setting's filter and held-out split), rebuilt in the unit. The repository is the run's memory: a unit
that finishes is committed under docs/evidence/units/<setting>-seed<s>/, one that is killed leaves nothing
there and is run again whole. `make evidence-unit` (scripts/evidence-unit.sh) runs the first planned unit
whose folder is not committed:

1. `next_unit`: the pre-registered order (`planned`: train.efficiency.units names the settings in order;
   each seed that both vanilla and efficient list, ascending), minus the committed folders;
2. the workflow's `evidence_unit` job (`evidence_unit` below) writes the pair's analysis inputs
   (`evidence_inputs.FILES`, the files the efficiency report reads) and `unit.json`, the unit's identity:
   every job's commit, config digest and output digests (warm start, filter, held-out split, trainings),
   the machine (CPU model, MKL branch), each job's wall and CPU seconds, each run's training CPU seconds;
3. `finish`: adds the lease's wall time, checks the folder (`check_unit`) and moves it into place with one
   rename, so a folder under docs/evidence/units/ is whole or absent.

Nothing here reads or prints a held-out accuracy: the check looks at shapes, names and identities only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from toolcall_repro.analysis import evidence_inputs
from toolcall_repro.layout import unit_name

__all__ = [
    "BASELINE",
    "CANDIDATE",
    "FILES",
    "UNIT_FILE",
    "check_unit",
    "committed_units",
    "evidence_unit",
    "finish",
    "next_unit",
    "planned",
    "write_unit",
]

BASELINE, CANDIDATE = "vanilla", "efficient"
UNIT_FILE = "unit.json"
FILES = (*evidence_inputs.FILES, UNIT_FILE)
# The pre-registration a unit is run under; each unit records it, and the rebuild refuses another.
DESIGN = "pre-registration 3 (docs/efficiency.md)"


def planned(efficiency: Mapping) -> list[tuple[str, int]]:
    """The pre-registered units in order: the settings of train.efficiency.units in their order, each seed
    that both vanilla and efficient list in train.efficiency.runs, ascending."""
    runs = efficiency.get("runs") or {}
    out = []
    for setting in efficiency.get("units") or []:
        variants = runs.get(setting) or {}
        seeds = sorted(set(variants.get(BASELINE) or []) & set(variants.get(CANDIDATE) or []))
        out += [(setting, int(s)) for s in seeds]
    return out


def committed_units(units_dir: str | Path) -> list[str]:
    """The unit folders under units_dir that hold every file of a unit (a partial one is not a unit)."""
    root = Path(units_dir)
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and all((p / f).is_file() for f in FILES))


def next_unit(efficiency: Mapping, units_dir: str | Path) -> tuple[str, int] | None:
    """The first planned unit not committed under units_dir; None when every one is in."""
    done = set(committed_units(units_dir))
    return next(((s, k) for s, k in planned(efficiency) if unit_name(s, k) not in done), None)


def _unit_identity(run_dir: str | Path, setting: str, seed: int, runs: Sequence) -> dict:
    """What the unit is and where it ran: every job's digests (digests.digest_run), the machine, the jobs'
    times (the benchmark files) and each run's training CPU seconds, steps and resumes."""
    from toolcall_repro.digests import digest_run, mkl_class
    from toolcall_repro.timing import job_times

    digest = digest_run(run_dir)
    facts = list(digest["machines"].values())
    jobs = job_times(run_dir)
    return {
        "unit": unit_name(setting, seed),
        "setting": setting,
        "seed": seed,
        "design": DESIGN,
        "commits": sorted({j["commit"] for j in digest["jobs"].values() if j["commit"]}),
        "mkl_branch": mkl_class(digest),
        "cpu_models": sorted({str(f.get("cpu_model")) for f in facts}),
        "machines": digest["machines"],
        "jobs": digest["jobs"],
        "job_times": jobs.sort_values(["rule", "key"]).to_dict("records"),
        "runs": {
            r.variant: {
                "steps": r.summary.get("steps"),
                "epochs": r.summary.get("epochs"),
                "training_cpu_s": r.summary.get("time/cumulative_device_s"),
                "eval_s": r.summary.get("time/eval_s"),
                "resumed_from": r.summary.get("resumed_from"),
            }
            for r in runs
        },
    }


def write_unit(run_dir: str | Path, out_dir: str | Path, cfg: Mapping, inputs=None) -> list[Path]:
    """The unit's folder: the pair's analysis inputs and unit.json. cfg: {setting, seed, efficiency (the
    report config: margin), runs (the two TrainingRun.unit dicts)}; inputs: the rule's declared inputs."""
    from toolcall_repro.analysis import report

    setting, seed = cfg["setting"], int(cfg["seed"])
    runs = report.RunResults(run_dir, {"runs": cfg["runs"]}, inputs).runs
    out = Path(out_dir)
    written = evidence_inputs.export_runs(runs, out, cfg.get("efficiency") or {}, run_dir)
    identity = _unit_identity(run_dir, setting, seed, runs)
    (out / UNIT_FILE).write_text(json.dumps(identity, sort_keys=True, indent=1) + "\n")
    problems = check_unit(out, setting, seed)
    if problems:
        raise ValueError(f"unit {unit_name(setting, seed)} is not whole: " + "; ".join(problems))
    return [*written, out / UNIT_FILE]


def evidence_unit(j) -> None:
    """The workflow's `evidence_unit` job: option run_dir, output.unit (a folder), config as write_unit's."""
    written = write_unit(j.option("run_dir"), j.out("unit"), j.config, list(j.files.get("input", [])) or None)
    print(f"wrote {len(written)} files to {j.out('unit')}")


def check_unit(folder: str | Path, setting: str | None = None, seed: int | None = None) -> list[str]:
    """What is wrong with a unit folder (empty when it is whole): its files, a vanilla and an efficient
    run of the one setting and seed its name says, each with metrics and per-prompt held-out outcomes at
    every checkpoint on the same prompts, an identity of one MKL branch. Reads no accuracy."""
    path = Path(folder)
    missing = [f for f in FILES if not (path / f).is_file()]
    if missing:
        return [f"{path}: lacks {missing}"]
    try:
        identity = json.loads((path / UNIT_FILE).read_text())
        runs = evidence_inputs.load_runs(path)
    except (OSError, ValueError, KeyError) as err:
        return [f"{path}: unreadable ({err})"]
    setting = identity.get("setting") if setting is None else setting
    seed = identity.get("seed") if seed is None else seed
    problems = []
    if path.name != unit_name(setting, seed):
        problems.append(f"folder {path.name} holds unit {unit_name(setting, seed)}")
    if identity.get("design") != DESIGN:
        problems.append(f"unit.json: design {identity.get('design')!r}, not {DESIGN!r}")
    for key in ("commits", "mkl_branch", "cpu_models", "jobs", "job_times", "runs"):
        if not identity.get(key):
            problems.append(f"unit.json: no {key}")
    found = sorted((r.setting, r.variant, r.seed) for r in runs)
    wanted = sorted((setting, v, seed) for v in (BASELINE, CANDIDATE))
    if found != wanted:
        problems.append(f"runs {found}, not {wanted}")
    ids = {json.dumps(r.summary.get("heldout_ids")) for r in runs}
    if len(ids) != 1:
        problems.append("the two runs were scored on different held-out prompts")
    for r in runs:
        name = f"{r.variant} seed {r.seed}"
        if r.metrics.empty or r.curve.empty:
            problems.append(f"{name}: no metrics or no curve")
            continue
        if len(r.metrics) != r.summary.get("steps"):
            problems.append(f"{name}: {len(r.metrics)} step lines, summary says {r.summary.get('steps')}")
        n = len(r.summary.get("heldout_ids") or [])
        for key in ("heldout_outcomes", "heldout_sampled_outcomes"):
            if key not in r.curve or any(not isinstance(o, list) or len(o) != n for o in r.curve[key]):
                problems.append(f"{name}: {key} not {n} outcomes at every checkpoint")
    return problems


def finish(staged: str | Path, units_dir: str | Path, lease: Mapping | None = None) -> Path:
    """Copy a unit the workflow wrote (results/<run>/efficiency/units/<unit>) into units_dir, with the
    lease's facts (`lease`: wall seconds, start, end) in unit.json, check it, and put it in place with one
    rename: under units_dir a unit is whole or absent. Refuses a unit that is already there."""
    src = Path(staged)
    root = Path(units_dir)
    final = root / src.name
    if final.exists():
        raise FileExistsError(f"{final} exists: a committed unit is never run again")
    problems = check_unit(src)
    if problems:
        raise ValueError("; ".join(problems))
    root.mkdir(parents=True, exist_ok=True)
    # staged beside the workflow's folder (one filesystem with the checkout), so a kill leaves nothing in root
    tmp = Path(tempfile.mkdtemp(prefix=f".{src.name}.", dir=src.parent))
    try:
        for f in FILES:
            shutil.copyfile(src / f, tmp / f)
        identity = json.loads((tmp / UNIT_FILE).read_text())
        if lease:
            identity["lease"] = dict(lease)
            (tmp / UNIT_FILE).write_text(json.dumps(identity, sort_keys=True, indent=1) + "\n")
        # checked again where it will stay (its folder name is the temporary one until the rename)
        problems = [p for p in check_unit(tmp, identity["setting"], identity["seed"]) if not p.startswith("folder ")]
        if problems:
            raise ValueError("; ".join(problems))
        os.chmod(tmp, 0o755)
        os.rename(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return final


def load_units(units_dir: str | Path) -> tuple[list, list[dict], object]:
    """Every committed unit's runs, identities and the margin they were run with; a unit folder that is not
    whole, or units run with different margins or on different held-out prompts, is an error naming it."""
    runs, identities, margins, ids = [], [], {}, {}
    for name in committed_units(units_dir):
        folder = Path(units_dir) / name
        problems = check_unit(folder)
        if problems:
            raise ValueError("; ".join(problems))
        unit_runs = evidence_inputs.load_runs(folder)
        runs += unit_runs
        identities.append(json.loads((folder / UNIT_FILE).read_text()))
        margins[name] = json.dumps(evidence_inputs.read_config(folder).get("margin", 0.05), sort_keys=True)
        ids[name] = json.dumps(unit_runs[0].summary.get("heldout_ids"))
    if len(set(margins.values())) > 1:
        raise ValueError(f"units run with different non-inferiority margins: {margins}")
    # One prompt draw for every run is pre-registration 3's case when all units hold the same held-out ids
    # (the split is drawn before any rollout); draws per pair, its other case, are not implemented.
    if len(set(ids.values())) > 1:
        raise ValueError(f"units scored on different held-out prompts ({sorted(ids)}): the bootstrap would"
                         " need a prompt draw per pair (pre-registration 3), which this rebuild does not do")  # fmt: skip
    margin = json.loads(next(iter(margins.values()))) if margins else 0.05
    return runs, identities, margin


def units_table(identities: Sequence[Mapping]):
    """One row a committed unit: where and when it ran, what it cost (no accuracy)."""
    import pandas as pd

    from toolcall_repro.analysis.tabular import Table

    rows = []
    for u in sorted(identities, key=lambda x: (x["setting"], x["seed"])):
        runs = u.get("runs") or {}
        rows.append(
            {
                "unit": u["unit"],
                "MKL branch": u["mkl_branch"],
                "CPU": ", ".join(u["cpu_models"]),
                "commits": ", ".join(c[:7] for c in u["commits"]),
                "lease wall h": _rounded((u.get("lease") or {}).get("wall_s"), 3600, 2),
                **{f"{v} steps": (runs.get(v) or {}).get("steps") for v in (BASELINE, CANDIDATE)},
                **{f"{v} training CPU-s": _rounded((runs.get(v) or {}).get("training_cpu_s")) for v in (BASELINE, CANDIDATE)},
            }
        )
    frame = pd.DataFrame(rows)
    return Table(
        "evidence_units",
        "The committed seed-pair units: machine, code, the lease's wall time, each run's steps and training CPU",
        frame,
        frame,
        ["a unit: vanilla and efficient at one seed, side by side on one machine, from its own upstream"],
    )


def _rounded(value, per: float = 1.0, digits: int = 0):
    return None if value is None else round(float(value) / per, digits)


def rebuild_units(evidence_dir: str | Path, out_dir: str | Path, plan: Sequence[tuple[str, int]]) -> list[Path]:
    """The efficiency report of every committed unit under evidence_dir/units (tables, intervals, curves),
    interim for a setting until all its planned units are in (`plan`: `planned`'s list)."""
    from toolcall_repro.analysis.efficiency_report import build

    runs, identities, margin = load_units(Path(evidence_dir) / "units")
    if not runs:
        raise FileNotFoundError(f"{Path(evidence_dir) / 'units'}: no committed unit")
    counts = {}
    for setting, _ in plan:
        counts[setting] = (sum(u["setting"] == setting for u in identities), sum(s == setting for s, _ in plan))
    head = [f"- {s}: {k} of {n} pairs committed" + ("" if k == n else ": interim, no verdict") for s, (k, n) in counts.items()]
    return build(runs, margin, Path(out_dir), units=counts, extra=[units_table(identities)], head=head)


def load_config(configfiles: Sequence[str], base: str = "config/config.yaml") -> dict:
    """The merged config of a `snakemake --configfile F...` run (configarg.merged_config)."""
    from toolcall_repro.configarg import merged_config

    return merged_config(configfiles, base)


def main(argv: list[str] | None = None) -> int:
    """`toolcall-repro evidence-unit next|finish|check` (scripts/evidence-unit.sh runs them in turn)."""
    p = argparse.ArgumentParser(prog="toolcall-repro evidence-unit", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    n = sub.add_parser("next", help="the first pre-registered unit not committed: NAME SETTING SEED TARGET")
    n.add_argument("--configfile", nargs="+", default=["config/evidence.yaml"])
    n.add_argument("--units", default="docs/evidence/units")
    f = sub.add_parser("finish", help="check a unit the workflow wrote and put it in place under --units")
    f.add_argument("staged", help="results/<run>/efficiency/units/<unit>")
    f.add_argument("--units", default="docs/evidence/units")
    f.add_argument("--started", type=float, required=True, help="the lease's start (seconds since the epoch)")
    c = sub.add_parser("check", help="check unit folders (exit 1 naming what is wrong)")
    c.add_argument("folders", nargs="+")
    a = p.parse_args(argv)
    if a.cmd == "next":
        from toolcall_repro.experiment import Experiment

        config = load_config(a.configfile)
        efficiency = config["train"].get("efficiency") or {}
        if not planned(efficiency):
            print(f"{' '.join(a.configfile)}: train.efficiency.units plans no unit", file=sys.stderr)
            return 2
        unit = next_unit(efficiency, a.units)
        if unit is None:
            print(f"every pre-registered unit is committed under {a.units}", file=sys.stderr)
            return 3
        target = Experiment(config).layout.evidence_unit(*unit)
        print(unit_name(*unit), unit[0], unit[1], target)
        return 0
    if a.cmd == "finish":
        end = time.time()
        lease = {"started": round(a.started), "finished": round(end), "wall_s": round(end - a.started)}
        try:
            final = finish(a.staged, a.units, lease)
        except (OSError, ValueError) as err:
            print(f"toolcall-repro evidence-unit finish: {err}", file=sys.stderr)
            return 1
        print(f"{final}: whole ({lease['wall_s']} s in this lease); commit it now")
        return 0
    bad = 0
    for folder in a.folders:
        problems = check_unit(folder)
        print(f"{folder}: " + ("; ".join(problems) if problems else "whole"))
        bad += bool(problems)
    return 1 if bad else 0
