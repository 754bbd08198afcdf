"""Bad input, swept: every entry point a user feeds, given a missing file, an empty file, the wrong JSON type, a truncated
last line, the wrong encoding, an unknown name, a mismatched label set, a mistyped profile key, an index built with another
encoder, a damaged cache, and a server that answers badly. Each must give one clear message naming the file and line or the
parameter (and the valid choices), exit non-zero from the CLI, and leave finished work intact."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from leaf_nb.cache import Cache, CacheError
from leaf_nb.cli import main
from leaf_nb.data import BenchmarkError, load_claims, load_mirage
from leaf_nb.llm import LMError, OpenAICompatible, user
from leaf_nb.retrieve import CorpusError, load_index, read_corpus

REPO = Path(__file__).resolve().parents[1]
TABLE1 = REPO / "nbs" / "papers" / "leaf" / "table1_filtered_accuracy.ipynb"
GOOD_LINE = '{"id": "p1", "title": "Metformin", "content": "Metformin lowers hepatic glucose output."}\n'


def cli(*argv, capsys):
    "Run `leaf-nb ARGV` in this process: (exit code, stderr)."
    code = main([str(a) for a in argv])
    return code, capsys.readouterr().err


def bad_files(tmp_path, good: str) -> dict:
    "The same kinds of damage for any text format: missing, empty, wrong JSON type, truncated last line, wrong encoding."
    d = tmp_path / "bad"
    d.mkdir(exist_ok=True)
    files = {"missing": d / "missing.jsonl", "empty": d / "empty.jsonl", "type": d / "type.jsonl",
             "truncated": d / "truncated.jsonl", "encoding": d / "encoding.jsonl"}
    files["empty"].write_text("")
    files["type"].write_text("[1, 2, 3]\n")
    files["truncated"].write_text(good + good.rstrip("\n")[:-12] + "\n")
    files["encoding"].write_bytes(good.encode() + good.replace("Metformin", "Métformin").encode("latin-1"))
    return files


# ---------------------------------------------------------------- corpus files: read_corpus and `leaf-nb index`
@pytest.mark.parametrize("case,message", [
    ("missing", "missing.jsonl"), ("empty", "no passages"), ("type", "type.jsonl:1: not a JSON object"),
    ("truncated", "truncated.jsonl:2: not valid JSON"), ("encoding", "encoding.jsonl:2: not UTF-8")])
def test_corpus_files(tmp_path, capsys, case, message):
    path = bad_files(tmp_path, GOOD_LINE)[case]
    with pytest.raises((CorpusError, FileNotFoundError), match=message):
        list(read_corpus(path)) if case != "empty" else _build(path, tmp_path)
    code, err = cli("index", path, "--out", tmp_path / "idx", capsys=capsys)
    assert code == 2 and message in err and "Traceback" not in err, err


def _build(path, tmp_path):
    from leaf_nb.retrieve import build_index
    return build_index(path, "bm25", out=tmp_path / "lib_idx", progress=False)


def test_index_unknown_retriever(tmp_path, capsys):
    (tmp_path / "c.jsonl").write_text(GOOD_LINE)
    code, err = cli("index", tmp_path / "c.jsonl", "--retriever", "bm26", "--out", tmp_path / "idx", capsys=capsys)
    assert code == 2 and "unknown retriever 'bm26'" in err and "bm25" in err and "dense" in err


# ---------------------------------------------------------------- index folders: `leaf-nb search`, load_index
@pytest.fixture
def bm25_index(tmp_path):
    (tmp_path / "c.jsonl").write_text(GOOD_LINE + GOOD_LINE.replace("p1", "p2").replace("hepatic", "renal"))
    assert main(["index", str(tmp_path / "c.jsonl"), "--out", str(tmp_path / "idx")]) == 0
    return tmp_path / "idx"


def test_index_folders(tmp_path, capsys, bm25_index):
    code, err = cli("search", tmp_path / "nowhere", "metformin", capsys=capsys)
    assert code == 2 and "holds no index" in err
    broken = Path(shutil.copytree(bm25_index, tmp_path / "broken"))
    (broken / "retriever.json").write_text('{"kind": "bm25", "finger')
    code, err = cli("search", broken, "metformin", capsys=capsys)
    assert code == 2 and "retriever.json" in err and "not valid JSON" in err
    (broken / "retriever.json").write_text('["bm25"]')
    code, err = cli("search", broken, "metformin", capsys=capsys)
    assert code == 2 and "retriever.json" in err and "object" in err
    (broken / "retriever.json").write_text('{"kind": "annoy"}')
    code, err = cli("search", broken, "metformin", capsys=capsys)
    assert code == 2 and "unknown retriever kind 'annoy'" in err and "bm25" in err
    gutted = Path(shutil.copytree(bm25_index, tmp_path / "gutted"))
    shutil.rmtree(gutted / "bm25s")
    code, err = cli("search", gutted, "metformin", capsys=capsys)
    assert code == 2 and str(gutted) in err and "bm25s" in err and "Traceback" not in err
    code, err = cli("search", bm25_index, "metformin", "-k", "0", capsys=capsys)
    assert code == 2 and "k must be a positive integer" in err


def test_dense_index_searched_with_another_encoder(tmp_path, capsys):
    from leaf_nb.retrieve import embedded_encoder
    (tmp_path / "c.jsonl").write_text(GOOD_LINE)
    assert main(["index", str(tmp_path / "c.jsonl"), "--retriever", "dense", "--out", str(tmp_path / "dense")]) == 0
    other = Path(shutil.copytree(embedded_encoder(), tmp_path / "other"))
    cfg = json.loads((other / "1_Pooling" / "config.json").read_text())
    (other / "1_Pooling" / "config.json").write_text(json.dumps({**cfg, "pooling_mode_mean_tokens": False, "pooling_mode_max_tokens": True}))
    with pytest.raises(ValueError, match="was built with encoder"):
        load_index(tmp_path / "dense", encoder=other)


# ---------------------------------------------------------------- MIRAGE benchmark.json
MIRAGE_GOOD = {"medqa": {"q1": {"question": "Which drug reverses opioid overdose?", "options": {"A": "Naloxone", "B": "Flumazenil"}, "answer": "A"}}}


@pytest.mark.parametrize("case,message", [
    ("missing", "missing.jsonl"), ("empty", "not valid JSON"), ("type", "expected {dataset"),
    ("truncated", "not valid JSON"), ("encoding", "not UTF-8")])
def test_mirage_files(tmp_path, case, message):
    good = json.dumps(MIRAGE_GOOD, indent=1) + "\n"
    path = bad_files(tmp_path, good)[case]
    if case == "truncated": path.write_text(good[:-15])
    if case == "encoding": path.write_bytes(good.replace("Naloxone", "Naloxöne").encode("latin-1"))
    with pytest.raises((BenchmarkError, FileNotFoundError), match=message) as e:
        load_mirage(path, "medqa")
    assert str(path) in str(e.value)


def test_mirage_names_and_labels(tmp_path):
    p = tmp_path / "benchmark.json"
    p.write_text(json.dumps(MIRAGE_GOOD))
    with pytest.raises(BenchmarkError, match=r"no dataset 'medqa-us'; it has \['medqa'\]"):
        load_mirage(p, "medqa-us")
    bad = {"medqa": {"q1": {**MIRAGE_GOOD["medqa"]["q1"], "answer": "E"}}}
    p.write_text(json.dumps(bad))
    with pytest.raises(BenchmarkError, match=r"medqa/q1: answer 'E' is not an option \(\['A', 'B'\]\)"):
        load_mirage(p, "medqa")


# ---------------------------------------------------------------- CofCED claims (RAWFC, LIAR-RAW)
CLAIM = {"event_id": "c1", "claim": "A city banned bicycles.", "label": "false", "explain": "", "reports": [{"content": "No ban exists."}]}


@pytest.mark.parametrize("case,message", [
    ("missing", "missing.jsonl"), ("empty", "no claim"), ("type", "type.jsonl:1: a claim record must be an object"),
    ("truncated", "truncated.jsonl:2: not valid JSON"), ("encoding", "encoding.jsonl:2: not UTF-8")])
def test_claim_files(tmp_path, case, message):
    path = bad_files(tmp_path, json.dumps(CLAIM) + "\n")[case]
    if case == "encoding": path.write_bytes(json.dumps(CLAIM).encode() + b"\n" + json.dumps({**CLAIM, "event_id": "c2"}).replace("ban", "b\\u00e1n").encode().replace(b"b\\u00e1n", "bán".encode("latin-1")) + b"\n")
    with pytest.raises((BenchmarkError, FileNotFoundError), match=message):
        load_claims(path, "rawfc")


def test_claims_unknown_dataset_and_label_set(tmp_path):
    path = tmp_path / "liar.jsonl"
    path.write_text(json.dumps({**CLAIM, "label": "pants-fire"}) + "\n")
    with pytest.raises(ValueError, match=r"unknown dataset 'liar'.*liar-raw"):
        load_claims(path, "liar")
    with pytest.raises(BenchmarkError, match=r"liar.jsonl:1: field `label`: unknown label 'pants-fire' for rawfc \(labels: true, half, false\)"):
        load_claims(path, "rawfc")  # LIAR-RAW data read with RAWFC's three labels
    assert load_claims(path, "liar-raw")[0].label == "pants-fire"


# ---------------------------------------------------------------- paper profiles and `leaf-nb reproduce -p`
def test_reproduce_profiles(tmp_path, capsys):
    code, err = cli("reproduce", tmp_path / "nope.ipynb", capsys=capsys)
    assert code == 2 and "nope.ipynb" in err
    typo = tmp_path / "typo.yaml"
    typo.write_text("n_question: 5\nllm: embedded\n")
    code, err = cli("reproduce", TABLE1, "-f", typo, capsys=capsys)
    assert code == 2 and "typo.yaml" in err and "n_question" in err and "n_questions" in err  # names the key and a valid one
    code, err = cli("reproduce", TABLE1, "-p", "n_qestions", "5", capsys=capsys)
    assert code == 2 and "n_qestions" in err and "n_questions" in err
    broken = tmp_path / "broken.yaml"
    broken.write_text("llm: embedded\nn_questions: [1, 2\n")
    code, err = cli("reproduce", TABLE1, "-f", broken, capsys=capsys)
    assert code == 2 and "broken.yaml" in err and "line" in err
    listy = tmp_path / "list.yaml"
    listy.write_text("- llm\n- embedded\n")
    code, err = cli("reproduce", TABLE1, "-f", listy, capsys=capsys)
    assert code == 2 and "list.yaml" in err and "mapping" in err
    code, err = cli("reproduce", TABLE1, "-p", "n_questions", "ten", capsys=capsys)
    assert code == 2 and "n_questions" in err and "int" in err
    (tmp_path / "empty.yaml").write_text("")
    code, err = cli("reproduce", TABLE1, "-f", tmp_path / "empty.yaml", "-p", "n_questions", "x", capsys=capsys)
    assert code == 2 and "n_questions" in err  # an empty profile is no profile; the -p error still comes first


def test_every_paper_profile_names_only_real_parameters():
    "Each committed *.paper.yaml sets only parameters its notebook has: a typo there would be caught at run time."
    import papermill as pm
    import yaml
    profiles = sorted((REPO / "nbs" / "papers").rglob("*.paper.yaml"))
    assert profiles
    for prof in profiles:
        nb = prof.with_name(prof.name.replace(".paper.yaml", ".ipynb"))
        names = set(pm.inspect_notebook(str(nb)))
        assert set(yaml.safe_load(prof.read_text())) <= names, (prof.name, set(yaml.safe_load(prof.read_text())) - names)


# ---------------------------------------------------------------- `leaf-nb check` arguments
def test_check_arguments(tmp_path, capsys, bm25_index):
    base = ["check", "--index", bm25_index, "--question", "Which drug?", "--answer", "Naloxone."]
    code, err = cli(*base, "--options", "{A: Naloxone}", capsys=capsys)
    assert code == 2 and "--options" in err and "JSON" in err
    code, err = cli(*base, "--options", '["Naloxone"]', capsys=capsys)
    assert code == 2 and "--options must be a JSON object" in err
    code, err = cli(*base, "--llm", "gpt4", capsys=capsys)
    assert code == 2 and "unknown LLM spec 'gpt4'" in err and "openai:URL#MODEL" in err
    code, err = cli("check", "--index", bm25_index, "--question-file", tmp_path / "q.txt", "--answer", "x", capsys=capsys)
    assert code == 2 and "q.txt" in err
    (tmp_path / "latin.txt").write_bytes("Which drug reverses opioid overdose? Naloxöne".encode("latin-1"))
    code, err = cli("check", "--index", bm25_index, "--question-file", tmp_path / "latin.txt", "--answer", "x", capsys=capsys)
    assert code == 2 and "latin.txt" in err and "UTF-8" in err


# ---------------------------------------------------------------- cache files
def test_damaged_cache(tmp_path, capsys, bm25_index):
    junk = tmp_path / "cache.sqlite"
    junk.write_bytes(b"\x00garbage" * 512)
    with pytest.raises(CacheError, match="cannot be read as a leaf-nb cache"):
        Cache(junk).get("k")
    code, err = cli("search", bm25_index, "metformin", "--cache", junk, capsys=capsys)
    assert code == 2 and str(junk) in err and "cannot be read" in err
    assert junk.read_bytes() == b"\x00garbage" * 512  # never overwritten


# ---------------------------------------------------------------- servers that answer badly
@pytest.mark.parametrize("action,message", [
    (("malformed",), "Last error"), (("no_choices",), "no choices"), (("null_content",), "no completion text"),
    (("close",), "Last error"), (("status", 500), "Last error")])
def test_bad_server_answers_keep_finished_work(scripted, tmp_path, action, message):
    # the first two requests are answered properly; then the server misbehaves on every request
    srv = scripted(lambda body, n: ("ok", f"answer {n}") if n < 2 else action)
    cache = Cache(tmp_path / "c.sqlite")
    lm = OpenAICompatible(srv.base_url, "scripted", max_concurrency=1, max_retries=0, timeout=5, cache=cache, progress=False)
    with pytest.raises(LMError, match=message) as e:
        lm.generate([user(f"question {i}") for i in range(6)], max_tokens=8)
    assert srv.base_url in str(e.value)
    assert len(cache) == 2  # the two finished answers are kept
    again = OpenAICompatible(srv.base_url, "scripted", max_concurrency=1, max_retries=0, timeout=5, cache=cache, progress=False)
    assert again.generate([user("question 0"), user("question 1")], max_tokens=8) == [["answer 0"], ["answer 1"]]
    assert again.calls == 0


def test_bad_server_from_the_cli(scripted, capsys):
    srv = scripted(lambda body, n: ("malformed",))
    code, err = cli("generate", "--llm", f"openai:{srv.base_url}#scripted", "--no-cache", "hello", capsys=capsys)
    assert code == 2 and srv.base_url in err
    code, err = cli("generate", "--llm", f"openai:{srv.base_url}#other-model", "--no-cache", "hello", capsys=capsys)
    assert code == 2 and "does not serve 'other-model'" in err and "scripted" in err


def test_cli_entry_point_exits_non_zero(tmp_path):
    "The installed console script, not just `main`: a bad input exits 2 with the message on stderr."
    r = subprocess.run([sys.executable, "-c", "from leaf_nb.cli import main; raise SystemExit(main())", "search",
                        str(tmp_path / "nowhere"), "q"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "holds no index" in r.stderr and r.stdout == ""


def test_every_notebook_parameter_is_visible_to_papermill():
    "papermill skips a parameter line it cannot parse (e.g. a comment holding '='), which `-p` and profiles then reject."
    import ast
    import papermill as pm
    for nb_path in sorted((REPO / "nbs" / "papers").rglob("*.ipynb")):
        cells = [c for c in json.loads(nb_path.read_text())["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
        assert len(cells) == 1, f"{nb_path.name}: {len(cells)} cells tagged parameters"
        assigned = {t.id for node in ast.parse("".join(cells[0]["source"])).body if isinstance(node, ast.Assign)
                    for t in node.targets if isinstance(t, ast.Name)}
        assert assigned == set(pm.inspect_notebook(str(nb_path))), (nb_path.name, assigned ^ set(pm.inspect_notebook(str(nb_path))))
