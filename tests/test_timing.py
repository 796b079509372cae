"""Where a run's time goes: the per-rule table read from Snakemake's benchmark files (toolcall_repro.timing),
on benchmark files with hand-chosen numbers."""

import pytest

from toolcall_repro import timing

BASIC = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time"
# Snakemake's extended format (benchmark-extended, set by the workflow profile): the job names itself
HEADER = BASIC + "\tjobid\trule_name\twildcards\tparams\tthreads\tcpu_usage\tresources\tinput_size_mb\n"


def bench(path, wall, cpu, rss, rule, wildcards="{}"):
    path.parent.mkdir(parents=True, exist_ok=True)
    params = '{\'job\': \'{"stage":"x","config":{"a":"b"}}\'}'  # the params as Snakemake writes them
    path.write_text(HEADER + f"{wall}\t0:00:00\t{rss}\t1\t1\t1\t0\t0\t50\t{cpu}\t3\t{rule}\t{wildcards}\t"
                    f"{params}\t1\t90\t{{}}\t{{}}\n")  # fmt: skip


@pytest.fixture
def run(tmp_path):
    b = tmp_path / "benchmarks"
    bench(b / "warmstart_base_model.tsv", 100.0, 180.0, 900.0, "warmstart_base_model")
    bench(b / "score_bfcl" / "a.tsv", 10.0, 8.0, 300.0, "score_bfcl", "{'model': 'base', 'seed': '0'}")
    bench(b / "score_bfcl" / "b.tsv", 14.0, 12.0, 350.0, "score_bfcl", "{'model': 'base', 'seed': '1'}")
    # the file names its rule: where it lies says nothing
    bench(b / "elsewhere" / "xlam.tsv", 1.0, 0.0, 50.0, "normalise_source", "{'source': 'xlam'}")
    return tmp_path


def test_each_benchmark_file_is_one_job_of_the_rule_it_names(run):
    jobs = timing.job_times(run).sort_values(["rule", "key"]).reset_index(drop=True)
    assert list(zip(jobs["rule"], jobs["key"], strict=True)) == [
        ("normalise_source", "{'source': 'xlam'}"), ("score_bfcl", "{'model': 'base', 'seed': '0'}"),
        ("score_bfcl", "{'model': 'base', 'seed': '1'}"), ("warmstart_base_model", ""),
    ]  # fmt: skip
    assert jobs["cpu_s"].tolist() == [0.0, 8.0, 12.0, 180.0]


def test_a_benchmark_without_the_extended_columns_is_named_with_the_fix(run, capsys):
    (run / "benchmarks" / "plain.tsv").write_text(BASIC + "\n1.0\t0:00:01\t5\t1\t1\t1\t0\t0\t50\t0.5\n")
    from toolcall_repro.cli import main

    assert main(["timing", str(run)]) == 2
    err = capsys.readouterr().err
    assert "plain.tsv" in err and "rule_name" in err and "--workflow-profile none" in err


def test_rules_sum_their_jobs_most_cpu_first_then_a_total(run):
    table = timing.rule_table(timing.job_times(run))
    assert table["rule"].tolist() == ["warmstart_base_model", "score_bfcl", "normalise_source", "total"]
    rows = table.set_index("rule")
    # all CPU: 180 + 8 + 12 + 0 = 200
    assert rows.loc["score_bfcl", "jobs"] == 2
    assert rows.loc["score_bfcl", "wall_s"] == 24.0 and rows.loc["score_bfcl", "cpu_s"] == 20.0
    assert rows.loc["score_bfcl", "cpu_share"] == pytest.approx(0.10)
    assert rows.loc["score_bfcl", "wall_s_per_job"] == 12.0 and rows.loc["score_bfcl", "max_rss_mb"] == 350.0
    assert rows.loc["warmstart_base_model", "cpu_share"] == pytest.approx(0.90)
    assert rows.loc["total", "jobs"] == 4 and rows.loc["total", "cpu_s"] == 200.0
    assert rows.loc["total", "wall_s"] == 125.0 and rows.loc["total", "max_rss_mb"] == 900.0


def test_a_repeated_benchmark_counts_its_last_measurement(run):
    path = run / "benchmarks" / "warmstart_base_model.tsv"
    path.write_text(path.read_text() + "90.0\t0:00:00\t900\t1\t1\t1\t0\t0\t50\t170.0\t3\twarmstart_base_model"
                    "\t{}\t{}\t1\t90\t{}\t{}\n")  # fmt: skip
    rows = timing.rule_table(timing.job_times(run)).set_index("rule")
    assert rows.loc["warmstart_base_model", "cpu_s"] == 170.0


def test_written_into_the_run_and_printed_by_the_cli(run, capsys):
    from toolcall_repro.cli import main

    assert main(["timing", str(run), "--write"]) == 0
    out = capsys.readouterr().out
    assert "| warmstart_base_model | 1 | 100 | 180 | 90.0% |" in out
    assert (run / "timing.md").read_text() == out
    assert (run / "timing.csv").read_text().splitlines()[0] == ",".join(timing.COLUMNS)


def test_a_file_that_is_not_a_benchmark_is_named(run, capsys):
    (run / "benchmarks" / "stray.tsv").write_text("a\tb\n1\t2\n")
    from toolcall_repro.cli import main

    assert main(["timing", str(run)]) == 2
    err = capsys.readouterr().err
    assert "stray.tsv" in err and "cpu_time" in err


def test_a_tree_without_benchmarks_is_refused(tmp_path, capsys):
    from toolcall_repro.cli import main

    assert main(["timing", str(tmp_path)]) == 2
    assert "no benchmarks/" in capsys.readouterr().err
