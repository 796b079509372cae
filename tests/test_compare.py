"""`compare` on two small runs that differ in one training knob, built the way the workflow builds them:
every job writes its outputs and a real manifest (provenance.build_manifest), and a second run redoes only
the jobs whose config subtree or inputs changed (Snakemake's params and input rerun triggers)."""

import copy
import json
import shutil
from pathlib import Path

import pytest

from toolcall_repro import archive, cli, compare, io, provenance

RUN_ID = "demo"
T1, T2 = "2026-12-01T10:00:00Z", "2026-12-01T11:00:00Z"
CONFIG = {
    "run_id": RUN_ID,
    "data": {"rows": 240},
    "train": {
        "vanilla": {"variant": "vanilla", "lr": 1e-4, "downsample": None},
        "efficient": {"variant": "efficient", "lr": 1e-4, "downsample": {"m": 4}},
    },
}
KNOB = ("train", "efficient", "downsample", "m")


def card(model):
    return {
        "protocol": {"id": "default", "system_prompt": "bfcl_default", "temperature": 0.7},
        "model": model,
    }


def R(*parts):
    return "/".join(["results", RUN_ID, *parts])


def jobs(cfg):
    """(rule, key, config subtree, inputs, {output: text}) in DAG order; outputs follow from config alone."""
    m = (cfg["train"]["efficient"]["downsample"] or {}).get("m", 8)
    acc = {"base": 0.25, "rl-single": round(0.30 + 0.01 * m, 4)}
    speedup = {"vanilla": 1.0, "efficient": round(1.2 + 0.1 * m, 4)}
    yield (
        "normalise_source",
        "xlam",
        {"rows": cfg["data"]["rows"]},
        [R("data/raw/xlam.jsonl")],
        {R("data/normalised/xlam.parquet"): f"{cfg['data']['rows']} rows"},
    )
    for variant, hp in cfg["train"].items():
        out = R("train/single_turn", variant)
        yield (
            "train_grpo",
            f"single_turn-{variant}",
            hp,
            [R("data/normalised/xlam.parquet")],
            {
                f"{out}/summary.json": json.dumps({"speedup": speedup[variant]}),
                f"{out}/final/model.safetensors": f"weights {json.dumps(hp, sort_keys=True)}",
                f"{out}/checkpoints/step_4/optimizer.pt": "resume state",
            },
        )
    for model, weights in (("base", R("models/base")), ("rl-single", R("train/single_turn/efficient/final"))):
        seed0 = R("eval/bfcl", model, "default/seed0.json")
        yield (
            "score_bfcl",
            f"{model}-default-seed0",
            {"protocol": "default"},
            [weights],
            {seed0: json.dumps({"card": card(model), "accuracy": acc[model]})},
        )
        yield (
            "summarise_bfcl",
            f"{model}-default",
            {"seeds": [0]},
            [seed0],
            {
                R("eval/bfcl", model, "default/summary.json"): json.dumps(
                    {"card": card(model), "metrics": {"avg": {"mean": acc[model], "per_seed": [acc[model]]}}}
                )
            },
        )
    bfcl = "model,protocol,avg_mean,seeds,source,manifest\n" + "".join(
        f"{mo},default,{acc[mo]},0,eval/bfcl/{mo}/default/summary.json,manifests/summarise_bfcl/{mo}-default.json\n"
        for mo in acc
    )
    table = "setting,variant,speedup,source\n" + "".join(
        f"single_turn,{v},{s},train/single_turn/{v}/summary.json\n" for v, s in speedup.items()
    )
    ins = [R("eval/bfcl", mo, "default/summary.json") for mo in acc] + [
        R("train/single_turn", v, "summary.json") for v in speedup
    ]
    yield (
        "make_tables",
        "all",
        {"studies": ["table4"]},
        ins,
        {
            R("tables/csv/table4_bfcl.csv"): bfcl,
            R("tables/csv/speedup.csv"): table,
            R("tables/index.md"): "# Tables\n",
        },
    )


def run_pipeline(cfg, finished):
    """One `snakemake` of the fabricated DAG in the working directory: reruns what changed, writes records."""
    for rel, text in ((R("data/raw/xlam.jsonl"), "{}\n"), (R("models/base/model.safetensors"), "base")):
        Path(rel).parent.mkdir(parents=True, exist_ok=True)
        Path(rel).write_text(text)
    for rule, key, sub, inputs, outputs in jobs(cfg):
        path = Path(R("manifests", rule, f"{key}.json"))
        old = json.loads(path.read_text()) if path.exists() else None
        if old and old["config"] == sub and old["inputs"] == provenance.checksums(inputs):
            continue
        for rel, text in outputs.items():
            Path(rel).parent.mkdir(parents=True, exist_ok=True)
            Path(rel).write_text(text)
        declared = [o for o in outputs if "/checkpoints/" not in o]  # resume state is no declared output
        m = provenance.build_manifest(
            rule=rule, config_subtree=sub, inputs=inputs, outputs=declared, seeds={}, wall_s=1.0, cpu_s=1.0
        )
        m["finished_at"] = finished
        io.atomic_write_json(path, m)
    io.atomic_write_json(R("provenance.json"), provenance.run_record(R(), cfg))


def changed(cfg):
    cfg = copy.deepcopy(cfg)
    node = cfg
    for k in KNOB[:-1]:
        node = node[k]
    node[KNOB[-1]] += 1
    return cfg


@pytest.fixture
def two_runs(tmp_path, monkeypatch):
    """Run A, a copy of A's tree kept aside (tmp/kept/demo), then run B after one training knob changed."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    run_pipeline(CONFIG, T1)
    kept = tmp_path / "kept" / RUN_ID
    shutil.copytree(work / R(), kept)
    archive_a = archive_of(CONFIG)
    run_pipeline(changed(CONFIG), T2)
    archive_b = archive_of(changed(CONFIG))
    return {"tree_a": kept, "tree_b": work / R(), "archive_a": archive_a, "archive_b": archive_b}


def archive_of(cfg):
    """What archive_results does: pack the tree under its config's name into results/archives."""
    name = archive.archive_name(cfg["run_id"], "0123456789", provenance.config_hash(cfg))
    out = Path("results/archives") / name
    archive.pack_archive(R(), out, weights="final")
    return out.resolve()


EXPECTED_RERUN = {
    "train_grpo/single_turn-efficient",
    "score_bfcl/rl-single-default-seed0",
    "summarise_bfcl/rl-single-default",
    "make_tables/all",
}


def check(c: compare.Comparison):
    assert c.config == [("train.efficient.downsample.m", 4, 5)]
    rerun = {j.job: j for j in c.rerun()}
    assert set(rerun) == EXPECTED_RERUN
    assert all(j.status == "rerun" for j in rerun.values())
    train = rerun["train_grpo/single_turn-efficient"]
    assert train.config == [("downsample.m", 4, 5)] and not train.inputs and train.cause == "config"
    assert "train/single_turn/efficient/final/model.safetensors" in train.outputs
    score = rerun["score_bfcl/rl-single-default-seed0"]
    assert score.inputs == ["train/single_turn/efficient/final/model.safetensors"] and score.cause == "inputs"
    tables = {t.name: t for t in c.tables}
    bfcl, speed = tables["table4_bfcl"], tables["speedup"]
    assert bfcl.key == ["model"] and speed.key == ["setting", "variant"]
    assert [(x.row, x.column, x.old, x.new) for x in bfcl.cells] == [
        ("model=rl-single", "avg_mean", "0.34", "0.35")
    ]
    assert [(x.row, x.column, x.old, x.new) for x in speed.cells] == [
        ("setting=single_turn, variant=efficient", "speedup", "1.6", "1.7")
    ]
    assert not (bfcl.rows_only_a or bfcl.rows_only_b or any(bfcl.columns))


def test_one_training_knob_names_that_training_and_what_depends_on_it(two_runs):
    c = compare.compare_runs(compare.load_run(two_runs["tree_a"]), compare.load_run(two_runs["tree_b"]))
    check(c)
    unchanged = {j.job for j in c.jobs if j.status == "same"}
    assert unchanged == {
        "normalise_source/xlam",
        "train_grpo/single_turn-vanilla",
        "score_bfcl/base-default-seed0",
        "summarise_bfcl/base-default",
    }
    md = compare.markdown(c)
    assert "`train.efficient.downsample.m`: `4` -> `5`" in md
    assert "| `train_grpo/single_turn-efficient` | rerun | config | downsample.m: `4` -> `5` |" in md
    assert f"| {T1} -> {T2} |" in md and "8 jobs: 4 rerun, 0 only in B, 0 only in A, 4 unchanged" in md
    assert "| model=rl-single | avg_mean | 0.34 | 0.35 |" in md
    # The changed score row comes with its protocol card, the same in both runs here.
    digest = provenance.config_hash(card("rl-single"))[:10]
    assert f"`eval/bfcl/rl-single/default/summary.json`: same in A and B: card `{digest}`" in md
    cards = md.split("## Protocol cards")[1]
    assert f"- `{digest}`: `{json.dumps(card('rl-single'), sort_keys=True)}`" in cards
    assert (
        "`train/single_turn/efficient/summary.json`: same in A and B: no protocol card in the source file"
        in md
    )
    assert "train_grpo/single_turn-vanilla" not in md and "model=base" not in md


def test_two_archives_of_one_run_id_sit_side_by_side_and_compare_alike(two_runs, tmp_path):
    a, b = two_runs["archive_a"], two_runs["archive_b"]
    assert a.parent == b.parent and a != b and a.exists() and b.exists()
    assert a.name.startswith(f"{RUN_ID}-0123456789-") and b.name.startswith(f"{RUN_ID}-0123456789-")
    assert archive.verify_archive(a) == [] and archive.verify_archive(b) == []
    check(compare.compare_runs(compare.load_run(a), compare.load_run(b)))
    check(compare.compare_runs(compare.load_run(a), compare.load_run(two_runs["tree_b"])))  # archive vs tree

    out = tmp_path / "report.md"
    assert cli.main(["compare", str(a), str(b), "--out", str(out)]) == 0
    assert out.read_text() == compare.write_comparison(a, b)
    assert "| model=rl-single | avg_mean | 0.34 | 0.35 |" in out.read_text()
    assert cli.main(["compare", str(a), str(tmp_path / "nowhere")]) == 2
    assert cli.main(["compare", str(a), str(tmp_path)]) == 2  # a folder that is no results tree


def test_a_run_compared_with_itself_reports_nothing(two_runs):
    tree = compare.load_run(two_runs["tree_b"])
    c = compare.compare_runs(tree, compare.load_run(two_runs["archive_b"]))
    assert c.config == [] and c.rerun() == [] and all(t.status == "same" for t in c.tables)
    assert "No config key changed." in compare.markdown(c)


def test_table_rows_match_on_their_leading_columns_and_numbers_compare_as_numbers():
    a = [{"chain": "single", "order": "0", "out": "10"}, {"chain": "single", "order": "1", "out": "0.50"}]
    b = [{"chain": "single", "order": "0", "out": "10.0"}, {"chain": "single", "order": "1", "out": "0.6"},
         {"chain": "multi", "order": "0", "out": "3"}]  # fmt: skip
    t = compare.compare_table("filter_chain", a, b)
    assert t.key == ["chain", "order"]
    assert [(x.row, x.old, x.new) for x in t.cells] == [("chain=single, order=1", "0.50", "0.6")]
    assert t.rows_only_b == ["chain=multi, order=0"] and t.status == "changed"
    nan = compare.compare_table("x", [{"k": "a", "v": "nan"}], [{"k": "a", "v": "NaN"}])
    assert nan.status == "same"


def test_flat_diff_names_leaves_and_one_sided_keys():
    assert compare.flat_diff({"a": {"b": 1, "c": 2}}, {"a": {"b": 1, "c": 3, "d": 4}}) == [
        ("a.c", 2, 3),
        ("a.d", compare.MISSING, 4),
    ]
    assert compare.flat_diff({"a": None}, {"a": {"m": 4}}) == [("a", None, {"m": 4})]


SRC = "eval/bfcl/base/stronger/summary.json"


def one_row_runs(values, knob):
    """Runs A and B with one table row from SRC: its avg_mean per run, B's card with `knob` set."""
    cards = [card("base"), card("base")]
    cards[1]["protocol"].update(knob)
    row = {"model": "base", "protocol": "stronger", "source": SRC}
    runs = [
        compare.Run(label, RUN_ID, {}, {"t": [dict(row, avg_mean=v)]}, {SRC: {"card": k}})
        for label, v, k in zip("AB", values, cards, strict=True)
    ]
    return runs, cards


def test_a_changed_protocol_shows_both_cards_and_where_they_differ():
    (a, b), cards = one_row_runs(("0.3", "0.4"), {"temperature": 1.0})
    md = compare.markdown(compare.compare_runs(a, b))
    assert "| model=base | avg_mean | 0.3 | 0.4 |" in md
    da, db = (provenance.config_hash(k)[:10] for k in cards)
    assert f"- `{SRC}` in A: card `{da}`; `{SRC}` in B: card `{db}`" in md
    assert f"- `{da}`: `{json.dumps(cards[0], sort_keys=True)}`" in md
    assert f"- `{db}`: `{json.dumps(cards[1], sort_keys=True)}`" in md
    assert "the cards differ in protocol.temperature: `0.7` -> `1.0`" in md
    assert "(one side has no provenance.json: per-job configs below)" in md


def test_a_row_whose_values_stayed_but_whose_protocol_moved_is_reported():
    (a, b), _ = one_row_runs(("0.0", "0.0"), {"max_tokens": 16})
    c = compare.compare_runs(a, b)
    (t,) = c.tables
    assert t.status == "changed" and t.cells == [] and t.cards == [("model=base", SRC, SRC)]
    md = compare.markdown(c)
    assert "The protocol card behind 1 row changed: model=base." in md
    assert "the cards differ in protocol.max_tokens: `(absent)` -> `16`" in md
    assert compare.compare_runs(a, a).tables[0].status == "same"


def test_a_job_rerun_that_wrote_the_same_bytes_counts_as_rerun():
    m = {"config": {"k": 1}, "inputs": {R("in"): "aa"}, "outputs": {R("out"): "bb"}, "finished_at": T1}
    a = compare.Run("A", RUN_ID, {"r/x": m}, {}, {})
    b = compare.Run("B", RUN_ID, {"r/x": dict(m, finished_at=T2)}, {}, {})
    (job,) = compare.compare_jobs(a, b)
    assert job.status == "rerun" and job.outputs == [] and job.finished == (T1, T2)
    assert job.cause.startswith("nothing recorded")
    assert "| `r/x` | rerun | nothing recorded" in compare.markdown(compare.compare_runs(a, b))
    assert "same bytes" in compare.markdown(compare.compare_runs(a, b))
    assert compare.compare_jobs(a, a)[0].status == "same"


def test_two_machines_are_told_apart_by_their_kernels_and_packages(tmp_path, monkeypatch):
    """The same config on two machines: compare names the kernel setting and the packages that differ."""
    runs = {}
    for name, capability, extra in (("a", "avx2", None), ("b", "default", "onepackage==1.0")):
        work = tmp_path / name
        work.mkdir()
        monkeypatch.chdir(work)
        monkeypatch.setenv("ATEN_CPU_CAPABILITY", capability)
        real = provenance.installed_distributions
        monkeypatch.setattr(provenance, "installed_distributions", lambda r=real, e=extra: r() + ([e] if e else []))
        run_pipeline(CONFIG, T1 if name == "a" else T2)
        runs[name] = compare.load_run(work / R())
    c = compare.compare_runs(runs["a"], runs["b"])
    train = next(j for j in c.jobs if j.job == "train_grpo/single_turn-efficient")
    assert ("kernel_env.ATEN_CPU_CAPABILITY", "avx2", "default") in train.machine and "machine" in train.cause
    text = compare.markdown(c)
    assert "## Machines and environments" in text
    assert "- `kernel_env.ATEN_CPU_CAPABILITY`: `avx2` -> `default`" in text
    assert "packages only in A: none; only in B: `onepackage==1.0`" in text
