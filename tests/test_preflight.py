"""The pre-flight checklist, as a new user meets it: `leaf-nb reproduce ... --profile h100 --dry-run` on a machine that has
downloaded nothing prints one checklist (each ✘ with the command from data/README.md that fixes it) and a price made
without the data, exits non-zero and shows no traceback and no kernel warning; `--all --check` is one table; a lab
profile whose items are real (an index built here, the embedded model's folder, a server on loopback) is checked item by
item; and a missing path that still reaches a notebook stops it with one line."""
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from leaf_nb.llm import embedded_dir
from leaf_nb.runs import paper_notebooks

ROOT = Path(__file__).resolve().parents[1]
LEAF = ROOT / "nbs" / "papers" / "leaf"
TABLE1, TABLE2 = LEAF / "table1_filtered_accuracy.ipynb", LEAF / "table2_fcrag.ipynb"
LEAF_NB = str(Path(sys.executable).with_name("leaf-nb"))
NOT_READY = 4
CALLS = ("notebook,stage,model role,unit,calls_per_unit,prompt_tokens_per_call,completion_tokens_per_call\n"
         "table2_fcrag,answers,answerer,question,2,900,400\n"
         "table2_fcrag,verdicts,rater,question,10,1400,300\n"
         "table2_verification,train (d),llm,train_claim,6,1200,1\n")


def run(*args, env=None, timeout=600):
    keyless = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "LEAF_NB_API_KEY")}
    return subprocess.run([LEAF_NB, *map(str, args)], capture_output=True, text=True, timeout=timeout, env={**keyless, **(env or {})})


def clean(out):
    "No traceback and no kernel chatter reach the user."
    text = out.stdout + out.stderr
    assert "Traceback" not in text and "without encryption" not in text and "KeyboardInterrupt" not in text, text[-3000:]


@pytest.mark.skipif(Path("/data/indexes/medrag-colbert").exists(), reason="this machine has the workstation's data")
def test_the_readme_dry_run_on_a_bare_machine(tmp_path):
    calls = tmp_path / "calls_per_question.csv"
    calls.write_text(CALLS)
    out = run("reproduce", TABLE2, "--profile", "h100", "--dry-run", "--calls-file", calls, "--tokens-per-s", "2000")
    clean(out)
    assert out.returncode == NOT_READY, out.stderr
    lines = out.stdout.splitlines()
    index = lines.index(next(l for l in lines if "✘ index" in l and "/data/indexes/medrag-colbert" in l))
    assert lines[index + 1].strip() == ("fix: leaf-nb index /data/medrag --retriever colbert --checkpoint /data/models/colbertv2.0 "
                                        "--out /data/indexes/medrag-colbert  (data/README.md, “From a fresh workstation to a paper table”)")
    assert "fix: git clone https://github.com/Teddy-XiongGZ/MIRAGE /data/MIRAGE" in out.stdout
    assert "fix: start it: vllm serve Qwen/Qwen2-72B-Instruct --port 8001" in out.stdout or "✔ server" in out.stdout
    # priced without the data: MIRAGE's 7,663 questions times the measured calls per question
    assert "7,663 questions (medqa 1,273 + mmlu 1,089 + pubmedqa 500 + bioasq 618 + medmcqa 4,183)" in out.stdout
    assert f"about {7663 * 12:,} model calls" in out.stdout
    assert "table2_fcrag.ipynb: not run (its data is missing)" in out.stdout
    # without the measured file, it says so, and still counts the questions
    bare = run("reproduce", TABLE2, "--profile", "h100", "--dry-run", "--calls-file", tmp_path / "absent.csv")
    clean(bare)
    assert bare.returncode == NOT_READY and "not priced: every stage: absent.csv is absent" in bare.stdout and "7,663 questions" in bare.stdout
    # and a run that is not a dry run does not start
    real = run("reproduce", TABLE2, "--profile", "h100")
    clean(real)
    assert real.returncode == NOT_READY and "not started" in real.stderr and "✘ index" in real.stdout


def test_check_all_notebooks_is_one_table():
    out = run("reproduce", "--all", "--profile", "h100", "--check")
    clean(out)
    if Path("/data/indexes/medrag-colbert").exists(): pytest.skip("this machine has the workstation's data")
    assert out.returncode == NOT_READY
    lines = out.stdout.splitlines()
    n = len(paper_notebooks())  # every paper notebook, however many the repository holds
    assert lines[0].startswith(f"pre-flight, profile h100, {n} notebooks:")
    item = [i for i, l in enumerate(lines) if "✘ index" in l and "/data/indexes/medrag-colbert" in l]
    assert len(item) == 1  # listed once, with every notebook that needs it
    users = lines[item[0] + 1]
    assert users.strip().startswith("for ") and users.count("table") + users.count("fig") + users.count("leakage") + users.count("adaptive") >= 9
    assert "(index)" in users
    assert sum("OPENAI_API_KEY for https://api.openai.com/v1" in l for l in lines) == 1  # Factcheck-GPT's GPT-3.5, never the key itself
    smoke = run("reproduce", "--all", "--check")
    clean(smoke)
    assert smoke.returncode == 0 and "✘" not in smoke.stdout and "✔ claims          data/rawfc_sample" in smoke.stdout


def test_a_lab_profile_checked_item_by_item(tmp_path, scripted):
    "Real things where the profile points: an index built here, the embedded model's folder as tokenizer, a served rater."
    root = tmp_path / "lab"
    assert run("index", ROOT / "data" / "medcorpus.jsonl", "--out", root / "indexes" / "bm25").returncode == 0
    (root / "MIRAGE").mkdir(parents=True)
    (root / "MIRAGE" / "benchmark.json").write_text((ROOT / "data" / "mirage_sample.json").read_text())
    rater = scripted(lambda body, n: ("ok", "A"), model="Qwen/Qwen2-72B-Instruct")
    other = scripted(lambda body, n: ("ok", "A"), model="someone-else")
    profile = tmp_path / "lab.yaml"
    profile.write_text(f"profile: lab\nmodels:\n"
                       f"  llama3_70b: {{spec: 'openai:{other.base_url}#meta-llama/Meta-Llama-3-70B-Instruct'}}\n"
                       f"  qwen2_72b: {{spec: 'openai:{rater.base_url}#Qwen/Qwen2-72B-Instruct', tokenizer: '{embedded_dir()}'}}\n"
                       "index: ${LAB}/indexes/bm25\nmedrag_index: ${LAB}/indexes/rrf\nbenchmark: ${LAB}/MIRAGE/benchmark.json\n")
    out = run("reproduce", TABLE2, "--profile", profile, "--check", env={"LAB": str(root)})
    clean(out)
    assert out.returncode == NOT_READY, out.stderr
    marks = {l.split()[1] + " " + l.split()[2].rstrip(":"): l.split()[0] for l in out.stdout.splitlines()[1:] if l.strip()[:1] in "✔✘"}
    assert marks == {f"server openai:{other.base_url}#meta-llama/Meta-Llama-3-70B-Instruct": "✘",
                     f"server openai:{rater.base_url}#Qwen/Qwen2-72B-Instruct": "✔",
                     f"tokenizer {embedded_dir()}": "✔", f"index {root}/indexes/bm25": "✔", f"index {root}/indexes/rrf": "✘",
                     f"file {root}/MIRAGE/benchmark.json": "✔"}, out.stdout
    assert "it serves ['someone-else'], not 'meta-llama/Meta-Llama-3-70B-Instruct'" in out.stdout
    assert "a bm25 index of 300 passages" in out.stdout
    # a server that answers with another model stops a dry run too: priced from what is known, not run
    dry = run("reproduce", TABLE2, "--profile", profile, "--dry-run", env={"LAB": str(root)})
    clean(dry)
    assert dry.returncode == NOT_READY and "table2_fcrag.ipynb: not run (its data is missing)" in dry.stdout
    # with its data all there and the answering model's server down, a dry run runs the notebook (it calls no model)
    assert run("index", ROOT / "data" / "medcorpus.jsonl", "--out", root / "indexes" / "rrf").returncode == 0
    with socket.socket() as s: s.bind(("127.0.0.1", 0)); dead = s.getsockname()[1]  # a port nothing listens on
    profile.write_text(profile.read_text().replace(other.base_url, f"http://127.0.0.1:{dead}/v1"))
    dry = run("reproduce", TABLE2, "--profile", profile, "--dry-run", "-p", "datasets", '["medqa"]', "-p", "n_questions", "1",
              "-p", "cache", tmp_path / "c.sqlite", env={"LAB": str(root)})
    clean(dry)
    assert dry.returncode == NOT_READY, dry.stderr[-2000:]
    assert "table2_fcrag.ipynb: " in dry.stdout and " model calls to make" in dry.stdout and "not run" not in dry.stdout
    assert dry.stdout.count("✘") == 1  # only the answering model's server


def test_a_missing_path_inside_a_run_is_one_line(tmp_path):
    "Without a profile nothing is checked first; the notebook stops at the missing index, and says so in one line."
    out = run("reproduce", TABLE1, "-p", "index", tmp_path / "nowhere", "-p", "out_dir", tmp_path / "figures",
              "-p", "cache", tmp_path / "c.sqlite")
    clean(out)
    assert out.returncode == 1
    said = [l for l in out.stderr.splitlines() if "stopped with" in l]
    assert len(said) == 1 and said[0].startswith("leaf-nb reproduce: table1_filtered_accuracy.ipynb: cell [")
    assert f"FileNotFoundError: {tmp_path / 'nowhere'} holds no index (no retriever.json)" in said[0]
    assert (tmp_path / "figures" / "smoke" / "table1_filtered_accuracy.executed.ipynb").exists()  # the traceback is kept there


def test_a_served_sampler_needs_no_vllm_package():
    "Table 4 samples with vLLM's engine from a folder, or over HTTP from a served model: only the folder needs the package."
    from leaf_nb.runs import needs
    folder = {"model": "hf:/data/models/Meta-Llama-3-8B-Instruct", "backend": "vllm"}
    served = {"model": "openai:http://127.0.0.1:8002/v1#meta-llama/Meta-Llama-3-8B-Instruct", "backend": "vllm"}
    assert ("package", "vllm", "backend") in needs(folder)
    assert ("package", "vllm", "backend") not in needs(served)
    assert ("server", served["model"], "model") in needs(served)


def test_a_server_check_reads_the_spec_as_the_client_does():
    """The check asks /models for the name the client would send (options and identity off), and a spec the client would
    refuse is a ✘ with its reason, not a traceback."""
    from leaf_nb.runs import check_one
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
    [c] = check_one("server", f"openai:http://127.0.0.1:{port}/v1#org/Model@mine?batch_size=32", timeout=1)
    assert not c.ok and "connection refused" in c.detail and "vllm serve org/Model " in c.fix
    [bad] = check_one("server", f"openai:http://127.0.0.1:{port}/v1#org/Model?batch_size=0", timeout=1)
    assert not bad.ok and "batch_size must be a whole number" in bad.detail and "openai:URL#MODEL" in bad.fix
