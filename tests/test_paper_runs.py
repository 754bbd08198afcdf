"""LEAF's Tables 1-5 as paper runs: every parameter parses and each paper profile resolves against the shared one
(models by reference, data paths from the shared profile); a prompts file reaches a self-training table's checks; and runs of
one notebook under two profiles keep apart, each in its own `<out_dir>/<profile>/` folder with a provenance file naming
the models that produced its numbers."""
import hashlib
import json
from pathlib import Path

import papermill as pm
import pytest
import yaml

from leaf_nb.prompts import PAPER_PROMPTS
from leaf_nb.runs import parameter_names, read_profile, reproduce, run_parameters

ROOT = Path(__file__).resolve().parents[1]
LEAF = ROOT / "nbs" / "papers" / "leaf"
TABLE1 = LEAF / "table1_filtered_accuracy.ipynb"
TABLES = ["table1_filtered_accuracy", "table2_fcrag", "table3_sft", "table4_ranking_delta", "table5_simpo"]
SHARED = {"index", "medrag_index", "benchmark", "work_dir", "out_dir"}  # what the shared profile (or the notebook's default) holds
MODEL_KEYS = ("llm", "rater", "fcgpt_llm", "fcgpt_rater", "model", "reward_model")
OUTPUTS = ["table1_filtered_accuracy.csv", "table1_beside_paper.csv", "table1_intervals.csv", "table1_filtered_accuracy.png",
           "table1_rows.jsonl"]

# The "other" run gives each stage its own token budget, so the scripted server can tell the stages apart by the
# request's structure (its max_tokens), never by a prompt's wording.
BUDGETS = {"answer_max_tokens": 40, "query_max_tokens": 41, "rater_max_tokens": 42, "fcgpt_max_tokens": 43}
REPLIES = {40: "The answer is A.", 41: "```\nnaloxone opioid antagonist\n```", 42: "The documents agree. [Supported]",
           43: '["Yes"]'}  # 43: Factcheck-GPT's claim, check-worthiness and question stages; its stances (16 tokens) get "A"


@pytest.mark.parametrize("name", TABLES)
def test_parameters_parse_and_the_paper_profile_resolves(name):
    nb, paper_yaml = LEAF / f"{name}.ipynb", LEAF / f"{name}.paper.yaml"
    declared = pm.inspect_notebook(str(nb))
    assert list(declared) == parameter_names(nb)  # papermill skips a parameter whose comment holds "=": none may be lost
    assert all(p["help"] for p in declared.values())  # every parameter says what it is
    assert {"profile", "out_dir", "replay", "prompts", "cache"} <= set(declared) and declared["profile"]["default"] == '"smoke"'
    paper = read_profile(paper_yaml)
    assert not SHARED & set(paper), SHARED & set(paper)
    assert all(paper[k].startswith("@") for k in MODEL_KEYS if paper.get(k)), {k: paper[k] for k in MODEL_KEYS if k in paper}
    assert all("  # " in line for line in paper_yaml.read_text().splitlines() if line.strip() and not line.startswith("#"))
    params = run_parameters(nb, profile="h100", files=[paper_yaml])
    assert params["profile"] == "h100" and params["replay"] == "" and params["prompts"] == "" and params["index"]
    assert not [v for v in params.values() if isinstance(v, str) and v.startswith("@")]


def test_factcheck_gpt_runs_on_gpt35_in_both_tables_that_use_it():
    "LEAF paper, Filtered Accuracy via Fact-Checking: Factcheck-GPT 'uses GPT-3.5 as the rating model' (Tables 1 and 3)."
    assert read_profile(LEAF / "table1_filtered_accuracy.paper.yaml")["fcgpt_llm"] == "@gpt35"
    assert read_profile(LEAF / "table3_sft.paper.yaml")["fcgpt_llm"] == "@gpt35"


def test_a_prompts_file_reaches_the_checks_of_a_self_training_table(scripted, tmp_path, monkeypatch):
    """Table 4 samples its answers from a served model and sends LEAF's checks to the same scripted server (each stage
    told apart by its token budget): the answers ranked are the server's, and the fact-check template of a student's
    prompts file is what its rater reads."""
    monkeypatch.setenv("LEAF_NB_CACHE", str(tmp_path / "cache.sqlite"))
    replies = {31: "The documents agree. [Supported]", 33: "The answer is B."}
    srv = scripted(lambda body, number: ("ok", replies.get(body.get("max_tokens"), "```\nmetformin\n```")))
    marker = "Instructions (from a student's prompt file):"
    prompts = tmp_path / "prompts.yaml"
    prompts.write_text(yaml.safe_dump({"fact_check": PAPER_PROMPTS.fact_check.replace("Instructions:", marker, 1)}))
    nb = LEAF / "table4_ranking_delta.ipynb"
    served = f"openai:{srv.base_url}#scripted@test"
    params = run_parameters(nb, overrides={"out_dir": str(tmp_path / "figures"), "prompts": str(prompts), "verdict": "cot",
                                           "llm": served, "rater_max_tokens": 31, "model": served, "sample_max_tokens": 33})
    reproduce(nb, params)
    rater = [b["messages"][-1]["content"] for b in srv.requests if b.get("max_tokens") == 31]
    assert rater and all(t.startswith(marker) for t in rater), rater[:1]
    out = tmp_path / "figures" / "smoke"
    samples = [json.loads(l) for l in (out / "table4_samples.jsonl").read_text().splitlines()]
    smoke = {k: json.loads(v["default"]) for k, v in pm.inspect_notebook(str(nb)).items() if k in ("datasets", "n_questions", "n_samples")}
    asked = sum(1 for b in srv.requests if b.get("max_tokens") == 33)
    assert len(samples) == asked == len(smoke["datasets"]) * smoke["n_questions"] * smoke["n_samples"]
    assert {s["answer"] for s in samples} == {"The answer is B."} and {s["option"] for s in samples} == {"B"}
    assert json.loads((out / "table4_ranking_delta.provenance.json").read_text())["models"]["sampled"]["spec"] == served


def reply(body, number): return ("ok", REPLIES.get(body.get("max_tokens"), "A"))


def digests(folder: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def test_two_profiles_keep_their_outputs_and_provenance(scripted, tmp_path, monkeypatch):
    monkeypatch.setenv("LEAF_NB_CACHE", str(tmp_path / "cache.sqlite"))  # a fresh cache: the smoke run replays its record
    monkeypatch.setenv("LEAF_NB_MAX_CALLS", "0")  # ... and must make no model call at all
    out = tmp_path / "figures"

    smoke = reproduce(TABLE1, run_parameters(TABLE1, overrides={"out_dir": str(out)}))["executed"]
    assert smoke.parent == out / "smoke"
    before = digests(out / "smoke")

    monkeypatch.delenv("LEAF_NB_MAX_CALLS")
    srv = scripted(reply)
    spec = f"openai:{srv.base_url}#scripted@scripted-v1"
    other = reproduce(TABLE1, run_parameters(TABLE1, overrides={"out_dir": str(out), "profile": "other", "llm": spec, "replay": "",
                                                                 "cache": str(tmp_path / "other.sqlite"), "verdict": "cot",
                                                                 **BUDGETS}))["executed"]
    assert other.parent == out / "other"
    assert srv.requests and {b["max_tokens"] for b in srv.requests} >= {40, 41, 42, 43}  # every stage reached the server

    assert digests(out / "smoke") == before  # the second profile left the first one's outputs as they were
    for folder, profile in ((out / "smoke", "smoke"), (out / "other", "other")):
        assert all((folder / o).stat().st_size > 0 for o in OUTPUTS), sorted(p.name for p in folder.iterdir())
        prov = json.loads((folder / "table1_filtered_accuracy.provenance.json").read_text())
        assert prov["profile"] == profile and prov["outputs"] == OUTPUTS
        assert set(prov["models"]) == {"answerer", "LEAF rater and query writer", "Factcheck-GPT"}
        for m in prov["models"].values():
            if profile == "smoke":
                assert (m["kind"], m["name"], m["spec"], m["calls"]) == ("transformers", "SmolLM2-135M-Instruct-Q4_1", "embedded", 0)
                assert m["identity"].startswith("sha256:") and m["served_from_cache"] > 0
            else:
                assert (m["kind"], m["name"], m["identity"]) == ("openai", "scripted", "scripted@scripted-v1") and m["spec"].endswith("#scripted@scripted-v1") and m["calls"] > 0
        assert prov["parameters"]["llm"] == ("embedded" if profile == "smoke" else spec)
        assert prov["index"]["kind"] == "bm25" and prov["index"]["fingerprint"]
    smoke_prov = json.loads((out / "smoke" / "table1_filtered_accuracy.provenance.json").read_text())
    other_prov = json.loads((out / "other" / "table1_filtered_accuracy.provenance.json").read_text())
    assert smoke_prov["replayed_from_record"] > 0 and other_prov["replayed_from_record"] == 0
    assert {m["calls"] for m in other_prov["models"].values()} == {len(srv.requests)}  # one model in three roles, one request a call


def test_environment_variables_in_profiles(tmp_path, monkeypatch):
    """`${NAME}` in a shared profile's values (its models, its data lists) and in a notebook's own profile is the
    environment variable; an unset one stops the run naming the file, the key and the variable; one used only by keys
    the notebook does not take need not be set."""
    shared = tmp_path / "lab.yaml"
    shared.write_text("profile: lab\n"
                      "models:\n  qwen2_72b: {spec: 'openai:http://127.0.0.1:18001/v1#Qwen/Qwen2-72B-Instruct', tokenizer: '${LAB_MODELS}/qwen2'}\n"
                      "  llama3_70b: {spec: 'openai:http://127.0.0.1:18000/v1#meta-llama/Meta-Llama-3-70B-Instruct'}\n"
                      "data:\n  pubmed_chunks: ['${LAB_DATA}/medrag/pubmed/chunk', '${LAB_DATA}/extra']\n"
                      "index: '${LAB_DATA}/indexes/medcorp-bm25'\nbenchmark: '${LAB_DATA}/MIRAGE/benchmark.json'\n"
                      "rawfc: '${LAB_NEWS}/RAWFC'\n"  # only FFRR notebooks take it
                      "other: {max_steps: '${NOT_A_LEAKAGE_KEY}'}\n")
    own = tmp_path / "leakage.paper.yaml"
    own.write_text((LEAF / "leakage.paper.yaml").read_text() + "prompts: '${LAB_PROMPTS}/mine.yaml'\n")
    nb = LEAF / "leakage.ipynb"
    monkeypatch.setenv("LAB_DATA", "/mnt/lab")
    monkeypatch.setenv("LAB_MODELS", "/mnt/models")
    monkeypatch.setenv("LAB_PROMPTS", "/home/me")
    monkeypatch.delenv("LAB_NEWS", raising=False)
    params = run_parameters(nb, profile=str(shared), files=[own])
    assert params["index"] == "/mnt/lab/indexes/medcorp-bm25" and params["benchmark"] == "/mnt/lab/MIRAGE/benchmark.json"
    assert params["pmid_files"] == ["/mnt/lab/medrag/pubmed/chunk", "/mnt/lab/extra"]
    assert params["rater_tokenizer"] == "/mnt/models/qwen2" and params["prompts"] == "/home/me/mine.yaml"
    assert not [v for v in params.values() if "${" in json.dumps(v)]
    monkeypatch.delenv("LAB_MODELS")
    with pytest.raises(ValueError, match=r"profile lab\.yaml: key 'models\.qwen2_72b\.tokenizer' uses \$\{LAB_MODELS\}, which is not set"):
        run_parameters(nb, profile=str(shared), files=[own])
    monkeypatch.delenv("LAB_PROMPTS")
    with pytest.raises(ValueError, match=r"leakage\.paper\.yaml: key 'prompts' uses \$\{LAB_PROMPTS\}"):
        run_parameters(nb, profile=str(shared), files=[own], overrides={"rater_tokenizer": ""})
    monkeypatch.setenv("LAB_PROMPTS", "/home/me")
    assert run_parameters(nb, profile=str(shared), files=[own], overrides={"rater_tokenizer": "/tok"})["rater_tokenizer"] == "/tok"


def test_every_served_rater_gets_its_tokenizer():
    """A paper profile's rater, served with a tokenizer and a batch_size in h100.yaml, is given that tokenizer, so its
    query and verdict prompts go as lists to /v1/completions (the Self-BioRAG comparison's went one to a request)."""
    models = yaml.safe_load((ROOT / "profiles" / "h100.yaml").read_text())["models"]
    checked = []
    for y in sorted((ROOT / "nbs" / "papers").glob("*/*.paper.yaml")):
        pp = yaml.safe_load(y.read_text()) or {}
        rater = pp.get("rater")
        if not (isinstance(rater, str) and rater.startswith("@")): continue
        entry = models.get(rater[1:])
        if not (isinstance(entry, dict) and entry.get("tokenizer") and entry.get("batch_size")): continue
        assert "rater_tokenizer" in pm.inspect_notebook(str(y.with_name(y.name.replace(".paper.yaml", ".ipynb")))), y.name
        assert pp.get("rater_tokenizer") == f"{rater}.tokenizer", y.name
        checked.append(y.name)
    assert "adaptive_retrieval.paper.yaml" in checked and len(checked) >= 9, checked
