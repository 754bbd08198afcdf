"""The rehearsal of the paper path, small: `benchmarks/rehearsal_data.py` at a tiny size writes every data set in its
published format (read back by the project's loaders), and `benchmarks/paper_scale.py` runs Table 1 through
`leaf-nb reproduce --profile <profiles/rehearsal.yaml filled in>` against logged stand-in server processes, a saved
BM25 index and the generated MIRAGE file. The full-size rehearsal is the benchmark (benchmarks/paper_scale.py)."""
import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import paper_scale  # noqa: E402
import rehearsal_data  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    "The rehearsal data at 2,000 passages and 0.2 % of every question and claim count (5 % for the claim statistics test)."
    out = tmp_path_factory.mktemp("rehearsal") / "data"
    rehearsal_data.generate(out, seed=0, passages=2000, fraction=0.002, quiet=True)
    return out


def test_generated_data_is_in_the_published_formats(tiny):
    from leaf_nb.data import MIRAGE_DATASETS, load_claims, load_medqa_jsonl, load_mirage
    m = json.loads((tiny / "manifest.json").read_text())
    for d in MIRAGE_DATASETS:
        qs = load_mirage(tiny / "MIRAGE" / "benchmark.json", d)
        assert len(qs) == m["mirage"][d] == max(1, round(rehearsal_data.MIRAGE_COUNTS[d] * 0.002))
        assert sorted(qs[0].options) == list("ABCD"[:{"pubmedqa": 3, "bioasq": 2}.get(d, 4)])
        if d in ("pubmedqa", "bioasq"): assert qs[0].extra["PMID"]  # the PubMed articles they cite
    us = load_medqa_jsonl(tiny / "MedQA" / "questions" / "US" / "test.jsonl")
    assert all(sorted(q.options) == list("ABCDE") and q.extra["answer"] == q.options[q.answer] for q in us)
    worked = [q for q in us if q.question.startswith("A 13-year-old boy presents to the emergency department")]
    assert len(worked) == 1 and worked[0].options["E"] == "Surgical pinning of the femoral head" and worked[0].answer == "E"
    for s in rehearsal_data.LEAF_SAMPLES:  # all six Figure 8-9 questions, verbatim with their choices
        assert any(q.question == s["question"] and list(q.options.values()) == s["options"] for q in us)
    raw = [c for s in ("train", "val", "test") for c in load_claims(tiny / "RAWFC", "rawfc", s)]
    liar = [c for s in ("train", "val", "test") for c in load_claims(tiny / "LIAR-RAW", "liar-raw", s)]
    assert len(raw) == sum(m["claims"]["rawfc"].values()) and len(liar) == sum(m["claims"]["liar-raw"].values())
    assert (tiny / "RAWFC" / "train").is_dir() and (tiny / "LIAR-RAW" / "train.json").is_file()  # folder per claim; a JSON list per split
    pmids = {json.loads(l)["PMID"] for f in (tiny / "medrag" / "pubmed" / "chunk").glob("*.jsonl") for l in f.read_text().splitlines()}
    cited = {p for q in load_mirage(tiny / "MIRAGE" / "benchmark.json", "pubmedqa") for p in q.extra["PMID"]}
    assert cited <= pmids  # what the leakage notebook looks for is in the corpus
    ids = [json.loads(l)["id"] for f in sorted((tiny / "medrag").rglob("*.jsonl")) for l in f.read_text().splitlines()]
    assert len(ids) == len(set(ids)) == 2000
    from leaf_nb.agreement import load_factcheck_bench, load_healthfc  # the rater-agreement sets, read by their loaders
    fcb, hfc = load_factcheck_bench(tiny / "agreement" / "factcheck_bench.jsonl"), load_healthfc(tiny / "agreement" / "healthfc.csv")
    assert len(fcb) == m["agreement"]["factcheck_bench_rows"] == 5 * max(1, round(661 * 0.002)) and len(hfc) == m["agreement"]["healthfc_claims"]


def test_claim_statistics_follow_ffrr_table1_after_the_leak_filter(tmp_path):
    "Reports per claim and sentences per report are FFRR Table 1's once drop_leaks has removed the leaking share."
    from leaf_nb.data import CLAIM_LABELS, load_claims
    from leaf_nb.ffrr import dataset_stats, drop_leaks
    out = tmp_path / "data"
    rehearsal_data.generate(out, seed=1, passages=50, fraction=0.05, quiet=True)
    for ds, folder, spec in (("rawfc", "RAWFC", rehearsal_data.RAWFC), ("liar-raw", "LIAR-RAW", rehearsal_data.LIAR_RAW)):
        claims = [c for s in ("train", "val", "test") for c in load_claims(out / folder, ds, s)]
        kept, removed = drop_leaks(claims)
        stats = dataset_stats(kept, CLAIM_LABELS[ds])
        assert abs(stats["Avg. doc per claim"] - spec["docs"]) <= 0.06 * spec["docs"]
        assert abs(stats["Avg. sentence per doc"] - spec["sentences"]) <= 0.3
        share = len(removed) / sum(len(c.reports) for c in claims)
        assert 0.4 * spec["leak_share"] <= share <= 2 * spec["leak_share"]
        wanted = rehearsal_data.apportion(len(claims), spec["labels"])
        assert {l: stats[f"# {l}"] for l in CLAIM_LABELS[ds]} == wanted


def test_expand_fills_the_profile_and_names_what_is_missing():
    assert paper_scale.expand({"a": ["${X}/b"], "n": "${N}"}, {"X": "/d", "N": 3}, "p") == {"a": ["/d/b"], "n": 3}
    with pytest.raises(ValueError, match=r"p: \$\{Y\} is not set"):
        paper_scale.expand("${Y}", {"X": 1}, "p")


def test_the_profile_has_every_name_h100_has():
    import yaml
    h100, reh = (yaml.safe_load((REPO / "profiles" / f"{n}.yaml").read_text()) for n in ("h100", "rehearsal"))
    assert set(h100["models"]) == set(reh["models"]) and set(h100["data"]) == set(reh["data"])  # every @name resolves
    assert {k for k in h100 if k not in ("models", "data", "profile")} <= set(reh)


def test_table4_rehearsal_samples_from_the_served_standin(tmp_path):
    """Table 4's paper profile samples @llama3_8b's folder with vLLM's offline engine (a GPU, the vllm package); the
    rehearsal asks the stand-in that serves it instead (transformers on two cores would take days), and the paper
    profile itself still means the folder."""
    from leaf_nb.runs import run_parameters
    nb = REPO / "nbs" / "papers" / "leaf" / "table4_ranking_delta.ipynb"
    files = [nb.with_name("table4_ranking_delta.paper.yaml")]
    profile, prof, overrides = paper_scale.concrete_profile(tmp_path / "data", tmp_path, 2, free_ports=True)
    params = run_parameters(nb, profile=str(profile), files=files, overrides=paper_scale.notebook_overrides(nb, overrides))
    m = re.fullmatch(r"openai:http://127\.0\.0\.1:(\d+)/v1#([^?]+)\?batch_size=32", params["model"])  # lists, as h100.yaml's server
    assert m and m[2] in paper_scale.served(prof["models"])[int(m[1])]["names"]  # a port paper_scale.py starts a stand-in on
    assert run_parameters(nb, profile="h100", files=files)["model"].startswith("hf:")


@pytest.mark.parametrize("name", ["table3_sft", "table5_simpo"])
def test_selftrain_rehearsals_serve_each_round_by_a_logged_standin(tmp_path, name):
    """The self-training rehearsals serve each round's folder through `serve:` with paper_scale.py's logged stand-in (the
    paper profile still reloads it with transformers); the command starts a server that answers under the folder's name,
    and its requests land in the log the rehearsal counts."""
    from leaf_nb.llm import embedded_dir, user
    from leaf_nb.runs import run_parameters
    from leaf_nb.selftrain import ServedFolder
    nb = REPO / "nbs" / "papers" / "leaf" / f"{name}.ipynb"
    files = [nb.with_name(f"{name}.paper.yaml")]
    profile, prof, overrides = paper_scale.concrete_profile(tmp_path / "data", tmp_path, 2, free_ports=True)
    backend = run_parameters(nb, profile=str(profile), files=files, overrides=paper_scale.notebook_overrides(nb, overrides))["backend"]
    assert backend.startswith("serve:") and " _standin " in backend
    assert run_parameters(nb, profile="h100", files=files)["backend"] == "hf"
    servers = paper_scale.Servers({}, tmp_path / "standin")
    mark = servers.mark()
    with ServedFolder(backend.removeprefix("serve:"), embedded_dir(), startup_timeout=120) as s:
        ((text,),) = s.lm().generate([user("Is aspirin an antiplatelet drug?")], max_tokens=16)
    assert text
    (req,) = list(servers.since(mark))
    assert req["model"] == embedded_dir().name and req["port"] == "served" and req["max_tokens"] == 16


def test_table1_rehearsal_runs_the_workstation_path(tiny, tmp_path):
    "One notebook end to end: leaf-nb reproduce with the filled-in rehearsal profile, stand-in servers, a saved index."
    work, out_csv, stage_csv = tmp_path / "run", tmp_path / "paper_scale.csv", tmp_path / "calls.csv"
    rows = paper_scale.main(["--data", str(tiny), "--work", str(work), "--passages", "2000", "--fraction", "0.002",
                             "--only", "table1_filtered_accuracy", "--no-estimate", "--busy-sample-s", "0.1",
                             "--csv", str(out_csv), "--stage-csv", str(stage_csv), "--timeout", "600", "--free-ports"])
    (row,) = rows
    assert row["rc"] == 0, row.get("error")
    assert row["tag"] == "f0.002"  # a share of the data, so the cost table never reads it as the full-size run
    n = sum(json.loads((tiny / "manifest.json").read_text())["mirage"].values())
    assert row["questions"] == n
    # every model call the notebook asked reached a stand-in as one HTTP request or was answered by the cache (Table 1's
    # one-search reading asks again for the five-search run's answers), and the labelling dry run found all in the cache
    assert row["calls"] >= row["http_requests"] > 4 * n and row["calls_not_cached_in_replay"] == 0
    assert row["prompt_tokens"] > 0 and row["completion_tokens"] > 0 and row["peak_rss_gb"] > 0 and row["cache_mb"] > 0
    assert row["gpu_hours"] > 0
    prov = json.loads((tiny / "figures" / "leaf" / "rehearsal" / "table1_filtered_accuracy.provenance.json").read_text())
    assert prov["profile"] == "rehearsal" and prov["index"]["passages"] == 2000
    assert {m["name"] for m in prov["models"].values()} == {"meta-llama/Meta-Llama-3-70B-Instruct", "Qwen/Qwen2-72B-Instruct", "gpt-3.5-turbo"}
    # the run's own count of calls made lies between the servers' HTTP requests (the rater's prompts go in lists of 32,
    # rehearsal.yaml's batch_size) and the calls the notebook asked (some answered by the cache)
    made = sum(m["calls"] for m in prov["models"].values())
    assert row["http_requests"] < made <= row["calls"]
    with open(stage_csv) as f: stages = {r["stage"]: r for r in csv.DictReader(f)}
    assert {"answers", "queries", "verdicts", "claims", "check-worthiness", "search questions", "stances"} <= set(stages)
    assert float(stages["answers"]["calls_per_unit"]) == 1.0 and stages["answers"]["unit"] == "question"
    for r in stages.values():  # one row a stage (fact_check's prompt chunks merged); tokens per completion, not per request
        assert ", part " not in r["stage"], r["stage"]
        if r["ops"] == "generate" and r["completion_tokens_per_call"]:
            assert float(r["completion_tokens_per_call"]) <= max(map(int, re.findall(r"\d+", r["max_tokens_values"]))), r
    with open(out_csv) as f: written = list(csv.DictReader(f))
    assert [r["notebook"] for r in written] == ["table1_filtered_accuracy"]
    # the row names the code that measured it: the checkout's commit (a clean clone in CI, "-dirty" while editing)
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    commit = written[0]["commit"].removesuffix("-dirty")
    assert len(commit) >= 7 and head.startswith(commit), written[0]["commit"]


def test_outputs_counted_are_the_runs_own(tmp_path):
    "A data folder's outputs folder holds every notebook rehearsed on it: a row's out_mb counts only what its run wrote."
    import os
    old, mine = tmp_path / "table3_samples.jsonl", tmp_path / "sub" / "table7_rows.jsonl"
    mine.parent.mkdir()
    old.write_bytes(b"x" * 3 * 2**20); mine.write_bytes(b"y" * 2**20)
    started = mine.stat().st_mtime - 1
    os.utime(old, (started - 3600, started - 3600))  # written an hour before this run started
    assert paper_scale._du(tmp_path) == 4.0
    assert paper_scale._du(tmp_path, since=started) == 1.0
    assert paper_scale._du(tmp_path / "absent", since=started) == 0.0


def test_measured_version_names_a_checkout_that_moved(tmp_path, monkeypatch):
    "A row's commit is the checkout's when the run started; where it moved during the run (an edit, a commit), both."
    import results_csv
    git = lambda *a: subprocess.run(["git", "-C", str(tmp_path), *a], check=True, capture_output=True, text=True)
    git("init", "-q"); (tmp_path / "f.py").write_text("x = 1\n"); git("add", "f.py")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    start = results_csv.code_version(tmp_path)
    monkeypatch.setattr(results_csv, "_AT_START", start)
    assert len(start) >= 7 and results_csv.measured_version(tmp_path) == start
    (tmp_path / "f.py").write_text("x = 2\n")
    assert results_csv.measured_version(tmp_path) == f"{start}..{start}-dirty"
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "two")
    now = results_csv.code_version(tmp_path)
    assert now != start and results_csv.measured_version(tmp_path) == f"{start}..{now}"


def _tree(pid: int) -> dict[int, str]:
    "The live descendants of `pid` (pid -> command line), as paper_scale's TreeWatch finds them (psutil)."
    import psutil
    found = {}
    for p in psutil.Process(pid).children(recursive=True):
        try: found[p.pid] = " ".join(p.cmdline())
        except psutil.Error: continue
    return found


def test_sigterm_stops_the_notebook_and_the_standins(tiny, tmp_path):
    """SIGTERM to a running rehearsal stops its whole tree: the notebook's leaf-nb reproduce (in a session of its own),
    its kernel and every stand-in server. Before, they outlived it."""
    import signal
    import time
    log = (tmp_path / "paper_scale.log").open("w")
    proc = subprocess.Popen([sys.executable, str(REPO / "benchmarks" / "paper_scale.py"), "--data", str(tiny),
                             "--work", str(tmp_path / "run"), "--passages", "2000", "--fraction", "0.002",
                             "--only", "table1_filtered_accuracy", "--no-estimate", "--no-stages", "--busy-sample-s", "0.1",
                             "--free-ports"], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 300
    tree = {}
    while not any("ipykernel" in c for c in tree.values()):  # until the notebook's kernel is up
        assert proc.poll() is None and time.time() < deadline, (tmp_path / "paper_scale.log").read_text()[-3000:]
        time.sleep(0.2)
        tree = _tree(proc.pid)
    assert sum("_standin" in c for c in tree.values()) >= 3 and any("reproduce" in c for c in tree.values()), tree
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 128 + signal.SIGTERM
    deadline = time.time() + 30  # a kernel whose parent died notices it within a few seconds
    import psutil
    while (left := [p for p in tree if psutil.pid_exists(p)]) and time.time() < deadline: time.sleep(0.5)
    assert not left, {p: tree[p] for p in left}


def test_the_cost_tables_in_the_readmes_are_the_csvs():
    "README's 'At scale' and data/README.md show the tables paper_scale.py --table makes from benchmarks/results (no drift)."
    block = paper_scale.cost_tables(REPO / "benchmarks" / "results" / "paper_scale.csv")
    for f in (REPO / "README.md", REPO / "data" / "README.md"):
        assert block in f.read_text(), f"{f.name} is stale: python benchmarks/paper_scale.py --table --write, then tests/test_repo.py --write"


def test_a_stated_part_sets_only_the_sizes_the_paper_reads_in_full(tiny, tmp_path):
    "--units N: each size the paper profile leaves at 0 (all) becomes N; the counts read are N of each dataset, capped."
    papers = REPO / "nbs" / "papers"
    assert paper_scale.part_overrides(papers / "leaf" / "table4_ranking_delta.ipynb", 3) == {"n_questions": 3}
    assert paper_scale.part_overrides(papers / "ffrr" / "table2_verification.ipynb", 3) == {"n_train": 3, "n_test": 3}
    assert paper_scale.part_overrides(papers / "leaf" / "fig7_option_frequency.ipynb", 3) == {}  # six named questions: never cut
    # a part's training runs stay in its work folder, out of the data folder's, where the full run keeps its own
    assert paper_scale.part_overrides(papers / "ffrr" / "table2_verification.ipynb", 3, tmp_path) == {
        "n_train": 3, "n_test": 3, "work_dir": str(tmp_path / "runs")}
    assert paper_scale.part_overrides(papers / "leaf" / "fig7_option_frequency.ipynb", 3, tmp_path) == {}  # no work_dir
    m = json.loads((tiny / "manifest.json").read_text())
    t4 = papers / "leaf" / "table4_ranking_delta.ipynb"
    assert paper_scale.units_of(t4, m) == ("question", sum(m["mirage"].values()))
    assert paper_scale.units_of(t4, m, per=2) == ("question", sum(min(2, v) for v in m["mirage"].values()))
    ra = paper_scale.units_of(papers / "leaf" / "rater_agreement.ipynb", m)
    assert ra == ("row", m["agreement"]["factcheck_bench_rows"] + m["agreement"]["healthfc_claims"])


def test_a_fraction_run_is_a_part_carried_to_the_real_count(tiny, tmp_path):
    """--fraction F: the full count a row carries to is the real data's (`full_counts`, the manifest `generate` writes at
    fraction 1); the cost table shows such a row as "N of M", leaves out fraction rows that do not say M, and prefers a
    finished full-size run to any part."""
    full = rehearsal_data.full_counts()
    small = json.loads((tiny / "manifest.json").read_text())
    assert set(full) <= set(small) and full["claims"].keys() == small["claims"].keys()
    assert {d: sum(v.values()) for d, v in full["claims"].items()} == {"rawfc": 2012, "liar-raw": 12590}  # FFRR paper, Table 1
    vs = REPO / "nbs" / "papers" / "ffrr" / "validation_sweeps.ipynb"
    assert paper_scale.units_of(vs, full) == ("claim", 200 + 1274)  # the validation splits (§6.1.1)
    assert paper_scale.units_of(vs, full, datasets=["rawfc"]) == ("claim", 200)  # --set datasets=["rawfc"]: RAWFC's alone
    row = dict.fromkeys(paper_scale.COLUMNS, "")
    base = {"rc": 0, "calls": 100, "http_requests": 100, "prompt_tokens": 1000, "completion_tokens": 100, "harness_s": 60,
            "peak_rss_gb": 1.0, "cache_mb": 1.0, "gpu_hours": 0.1, "max_train_steps": 2, "other_busy_cpus": 0.0}
    def table(*rows):
        p = tmp_path / f"t{len(rows)}.csv"
        with open(p, "w", newline="") as f:
            w = csv.DictWriter(f, paper_scale.COLUMNS); w.writeheader()
            for r in rows: w.writerow({**row, **base, **r})
        return [l for l in paper_scale.notebook_table(p).splitlines() if "`validation_sweeps`" in l]
    part = {"notebook": "validation_sweeps", "tag": "f0.1", "questions": 147, "full_units": 1474}
    assert table(part) and "147 of 1,474 (×10 below)" in table(part)[0] and "≈1.0k" in table(part)[0]
    assert table({**part, "full_units": ""}) == []  # an older fraction row, with no full count: not a size to show
    whole = {"notebook": "validation_sweeps", "tag": "", "questions": 1474, "full_units": "", "calls": 999}
    assert "| 1,474 | 999 |" in table(whole, part)[0]  # the full run, although the part came later
    # one dataset alone at full size (--set datasets=...) carries worse than a share of both: the share stays in the
    # table, and the single dataset's run is said below it
    alone = {"notebook": "validation_sweeps", "tag": "", "questions": 200, "full_units": 1474, "calls": 77,
             "overrides": json.dumps({"datasets": ["rawfc"]})}
    shown = table(part, alone)
    assert "147 of 1,474 (×10 below)" in shown[0] and "rawfc alone at full size: 200 of its 1,474 claims, 77 model calls" in shown[1]
    assert "200 of 1,474 (×7 below)" in table(alone)[0] and len(table(alone)) == 1  # the only run: in the table, not repeated
    # each dataset alone at full size, the two adding up to the whole count: one full-size row made of both runs, summed
    # (their peak the larger), and neither said again below it
    liar = {**alone, "questions": 1274, "calls": 300, "harness_s": 120, "peak_rss_gb": 2.5,
            "overrides": json.dumps({"datasets": ["liar-raw"]})}
    (both,) = table(part, alone, liar)
    assert "| 1,474 (rawfc, liar-raw run apart) | 377 | 200 |" in both and " in 2 runs" in both and "| 2.5 GB |" in both, both
    assert "≈" not in both and "for the part" not in both
    short = table(part, alone, {**liar, "questions": 1000})  # 200 + 1,000 is not the whole count: no join
    assert "147 of 1,474" in short[0] and [l.count("alone at full size") for l in short[1:]] == [1, 1], short
    twice = table(part, alone, {**liar, "overrides": json.dumps({"datasets": ["rawfc"]})})  # one dataset twice: the latest
    assert "147 of 1,474" in twice[0] and len(twice) == 2 and "300 model calls" in twice[1], twice


def test_the_cost_table_says_what_a_row_ran_differently(tmp_path):
    """A row's own departures reach the table: a self-training round served by `serve:`, a corpus other than the 1M
    passages (LEAF only: FFRR reads no MedRAG passage), and the trainer-step footnote on the self-training rows."""
    row = dict.fromkeys(paper_scale.COLUMNS, "")
    base = {"rc": 0, "calls": 100, "http_requests": 100, "prompt_tokens": 1000, "completion_tokens": 100, "harness_s": 60,
            "peak_rss_gb": 1.0, "cache_mb": 1.0, "gpu_hours": 0.1, "max_train_steps": 2, "other_busy_cpus": 0.0, "tag": ""}
    small = "benchmarks/paper_scale.py --passages 10000"
    rows = [{"notebook": "table3_sft", "questions": 7663, "command": small,
             "overrides": json.dumps({"backend": "serve:{python} benchmarks/paper_scale.py _standin --port {port}"})},
            {"notebook": "table2_verification", "questions": 1451, "command": small, "overrides": "{}"}]
    p = tmp_path / "t.csv"
    with open(p, "w", newline="") as f:
        w = csv.DictWriter(f, paper_scale.COLUMNS); w.writeheader()
        for r in rows: w.writerow({**row, **base, **r})
    text = paper_scale.notebook_table(p)
    (t3,) = [l for l in text.splitlines() if "`table3_sft`" in l]
    (t2,) = [l for l in text.splitlines() if "`table2_verification`" in l]
    assert "served (`serve:`" in t3 and "a 10,000-passage corpus" in t3 and "1.0† GB" in t3
    assert "corpus" not in t2 and "serve" not in t2 and "†" not in t2
    assert paper_scale.TRAINER_NOTE in text
    rows[0]["notebook"] = "table1_filtered_accuracy"
    with open(p, "w", newline="") as f:
        w = csv.DictWriter(f, paper_scale.COLUMNS); w.writeheader()
        for r in rows: w.writerow({**row, **base, **r})
    assert paper_scale.TRAINER_NOTE not in paper_scale.notebook_table(p)  # the footnote only beside a row it explains
    # a row that also set the trainer's batch says so, and its peak is not the paper batch's: no footnote
    rows[0].update(notebook="table5_simpo", overrides=json.dumps(
        {"train_overrides": {"max_steps": 1, "per_device_batch_size": 1, "grad_accum": 1}}))
    with open(p, "w", newline="") as f:
        w = csv.DictWriter(f, paper_scale.COLUMNS); w.writeheader()
        for r in rows: w.writerow({**row, **base, **r})
    text = paper_scale.notebook_table(p)
    (t5,) = [l for l in text.splitlines() if "`table5_simpo`" in l]
    assert "trainer grad_accum 1, per_device_batch_size 1" in t5 and "capped at 2 steps" in t5 and "†" not in t5, t5
    assert paper_scale.TRAINER_NOTE not in text
