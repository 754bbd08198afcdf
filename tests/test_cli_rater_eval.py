"`leaf-nb rater-eval` (issue 24) as a user runs it: a dry run, a bad file, and a real run on the embedded model."
import json
import subprocess
import sys
from pathlib import Path

from leaf_nb.cache import Cache

LEAF_NB = str(Path(sys.executable).with_name("leaf-nb"))
DATA = Path(__file__).resolve().parents[1] / "data" / "agreement"


def run(*args, timeout=600):
    return subprocess.run([LEAF_NB, "rater-eval", *map(str, args)], capture_output=True, text=True, timeout=timeout)


def test_dry_run_prices_every_row_and_calls_nothing(tmp_path):
    rows = sum(1 for line in (DATA / "factcheck_bench_sample.jsonl").read_text().splitlines() if line.strip())
    cache = tmp_path / "c.sqlite"
    out = run(DATA / "factcheck_bench_sample.jsonl", "--format", "factcheck-bench", "--dry-run", "--cache", cache, "--out", tmp_path / "o")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"factcheck_bench_sample.jsonl: {rows} rows; {rows} model calls to make"), out.stdout
    assert "LEAF verdicts" in out.stdout and not (tmp_path / "o").exists()  # a dry run writes no results
    assert not cache.exists() or len(Cache(cache)) == 0  # and puts nothing in the cache


def test_a_bad_file_is_one_line_with_its_line_number():
    out = run(DATA / "bad" / "factcheck_bench_unknown_stance.jsonl", "--format", "factcheck-bench", "--dry-run")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    line = [l for l in out.stderr.splitlines() if l.startswith("leaf-nb rater-eval: error:")]
    assert len(line) == 1 and "factcheck_bench_unknown_stance.jsonl:" in line[0] and "unknown stance" in line[0], out.stderr
    wrong = run(DATA / "healthfc_sample.csv", "--format", "snopes")
    assert wrong.returncode == 2 and "invalid choice" in wrong.stderr


def test_embedded_rater_end_to_end_writes_rows_metrics_and_provenance(tmp_path):
    out = run(DATA / "healthfc_sample.csv", "--format", "healthfc", "--verdict", "logprob", "-n", "6", "--json",
              "--out", tmp_path / "out", "--cache", tmp_path / "c.sqlite")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["rows"] == 6 and summary["verdict"] == "logprob" and "→" in summary["labels"]  # the mapping is named
    for name in ("balanced_accuracy", "cohen_kappa", "macro_f1", "unparsed_share", "ece"):
        m = summary["metrics"][name]
        assert m["low"] <= m["value"] <= m["high"], (name, m)
    assert {p.name for p in (tmp_path / "out").iterdir()} >= {"rater_eval_rows.jsonl", "rater_eval_metrics.csv", "rater_eval.provenance.json"}
    rows = [json.loads(l) for l in (tmp_path / "out" / "rater_eval_rows.jsonl").read_text().splitlines()]
    assert len(rows) >= 6
    # the same command again reads every verdict from the cache and prints the same lines
    first = run(DATA / "healthfc_sample.csv", "--format", "healthfc", "--verdict", "logprob", "-n", "6", "--out", tmp_path / "a",
                "--cache", tmp_path / "c.sqlite")
    again = run(DATA / "healthfc_sample.csv", "--format", "healthfc", "--verdict", "logprob", "-n", "6", "--out", tmp_path / "a",
                "--cache", tmp_path / "c.sqlite", "--dry-run")
    assert first.returncode == 0 and "balanced accuracy" in first.stdout and "[" in first.stdout.splitlines()[2]
    assert again.returncode == 0 and "6 rows; 0 model calls to make" in again.stdout, again.stdout
