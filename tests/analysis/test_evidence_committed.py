"""The committed efficiency evidence (docs/evidence/units, pre-registration 3) rebuilds, from the repository
alone, to what docs/efficiency.md says of it: each setting's count of committed pairs (interim, no verdict,
until all five are in) and the table of the units (machine, commit, the lease's wall time, each run's
steps and training CPU seconds)."""

from __future__ import annotations

from pathlib import Path

from toolcall_repro.analysis import evidence_units
from toolcall_repro.analysis.tabular import markdown_table

REPO = Path(__file__).resolve().parents[2]
EVIDENCE = REPO / "docs" / "evidence"


def test_the_committed_units_rebuild_to_what_the_efficiency_doc_says(tmp_path):
    config = evidence_units.load_config([str(REPO / "config" / "evidence.yaml")], str(REPO / "config" / "config.yaml"))
    plan = evidence_units.planned(config["train"]["efficiency"])
    committed = evidence_units.committed_units(EVIDENCE / "units")
    assert committed, "no unit committed under docs/evidence/units"
    assert committed == [evidence_units.unit_name(*u) for u in plan[: len(committed)]]  # in the order, none skipped
    evidence_units.rebuild_units(EVIDENCE, tmp_path, plan)
    doc = (REPO / "docs" / "efficiency.md").read_text()
    index = (tmp_path / "index.md").read_text()
    for line in (ln for ln in index.splitlines() if ln.startswith("- ") and "pairs committed" in ln):
        assert line in doc, line
    _, identities, _ = evidence_units.load_units(EVIDENCE / "units")
    table = markdown_table(evidence_units.units_table(identities).display)
    assert table in doc, table
    notes = (tmp_path / "tables" / "md" / "efficiency_sampled.md").read_text()
    n = sum(s == "multi_turn" for s, _ in plan)
    k = sum(name.startswith("multi_turn-") for name in committed)
    assert (f"{k} of {n} multi-turn pairs: interim, no verdict" in notes) == (k < n)
