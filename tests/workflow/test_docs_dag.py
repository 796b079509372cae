"""docs/dag.md, the README's picture of the DAG, is the rule graph the workflow draws, not a drawing by hand.

The real Snakemake CLI draws it (`--rulegraph mermaid-js`, the default config, no job runs) in a working
directory of its own with the work tree's workflow and config linked in (`make_workdir`): the same DAG as
in the work tree, while the work tree's .snakemake/ (where Snakemake writes a log) stays untouched, as
`.ci/run` checks after `make test`. PYTHONHASHSEED=0 as in scripts/write-dag.sh: Snakemake orders the
graph's lines by Python's string hashes.
"""

import re

import pytest
from _workflow_helpers import REPO

pytestmark = pytest.mark.workflow

REWRITE = "bash scripts/write-dag.sh"


def lines(text: str) -> list[str]:
    """The text's lines, trailing whitespace dropped (and trailing blank lines)."""
    return [line.rstrip() for line in text.rstrip().splitlines()]


def committed_graph() -> str:
    doc = (REPO / "docs" / "dag.md").read_text()
    block = re.search(r"^```mermaid\n(.*?)^```\s*$", doc, re.S | re.M)
    assert block, f"docs/dag.md holds no ```mermaid block: rewrite it with `{REWRITE}`"
    return block.group(1)


def test_the_committed_dag_is_the_one_the_workflow_draws(smk):
    res = smk("--rulegraph", "mermaid-js", "--nolock", env={"PYTHONHASHSEED": "0"}, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    drawn = lines(res.stdout)
    assert drawn[:4] == ["---", "title: DAG", "---", "flowchart TB"], res.stdout[:500]
    assert lines(committed_graph()) == drawn, (
        f"docs/dag.md is not the rule graph the workflow draws now: rewrite it with `{REWRITE}` "
        "(PYTHONHASHSEED=0 snakemake --rulegraph mermaid-js) and commit it with the rule change"
    )
