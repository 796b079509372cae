"""Where archive_results writes, through the real Snakemake CLI (dry-runs): beside earlier archives of the
same run id, under a name that changes with the config and not with the config file."""

import re

import pytest

BASE = "config/config.yaml"


def archive_output(res) -> str:
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return re.search(r"^rule archive_results:\n(?:\s+\w+: .*\n)*?\s+output: (\S+)$", res.stdout, re.M)[1]


def test_a_changed_training_knob_gives_a_second_archive_beside_the_first(smk, make_config, tmp_path):
    first = archive_output(smk("-n", "--nolock", "archive_results"))
    same = make_config(tmp_path, BASE, {}, name="copy.yaml")
    knob = make_config(tmp_path, BASE, {"train": {"variants": {"efficient": {"downsample": {"m": 3}}}}})
    assert archive_output(smk("archive_results", "-n", "--nolock", "--configfile", str(same))) == first
    second = archive_output(smk("archive_results", "-n", "--nolock", "--configfile", str(knob)))
    assert first.startswith("results/archives/embedded-") and first.endswith(".tar.gz")
    # Same directory, same run id and code commit; only the config's hash (the last part) moved.
    assert second.rsplit("-", 1)[0] == first.rsplit("-", 1)[0] and second != first


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"archive": {"weights": "some"}}, "weights"),
        ({"archive": {"dir": "results/embedded/archive"}}, "archive.dir"),
    ],
)
def test_a_bad_archive_setting_fails_before_any_job(smk, make_config, tmp_path, overrides, named):
    res = smk("-n", "--nolock", "--configfile", str(make_config(tmp_path, BASE, overrides)))
    assert res.returncode != 0 and named in res.stderr + res.stdout
