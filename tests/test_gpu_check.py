"""benchmarks/gpu_check.py, the one command prepared for a lent GPU, proven on the CPU: `--tiny` runs every section
on tiny shapes and writes the JSON a GPU run writes; missing packages and a spent budget skip sections with a
recorded reason instead of crashing."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.py"
SECTIONS = {"factcheck", "simpo", "ffrr"}


def run(tmp_path, *args, timeout=600):  # a guard against a hang, not a speed test
    out = tmp_path / "gpu_check.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, str(SCRIPT), "--tiny", "--out", str(out), *args], env=env,
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return json.loads(out.read_text()), time.perf_counter() - t0, r.stdout


def test_tiny_run_writes_every_section(tmp_path):
    report, seconds, stdout = run(tmp_path)
    print(f"--tiny took {seconds:.0f} s")  # 25-45 s on two shared cores
    assert {"script", "mode", "budget_s", "environment", "packages", "missing", "weights", "tokenizer", "sections", "wall_s"} <= set(report)
    assert report["mode"] == "tiny" and set(report["sections"]) == SECTIONS
    for name, s in report["sections"].items():
        assert s["status"] in ("ran", "skipped"), (name, s)  # a failure or a timeout in --tiny is a bug
        if s["status"] == "skipped":
            assert s["reason"].startswith("missing: ") and all(report["packages"][p] is None for p in s["reason"][9:].split(", "))
            continue
        r = s["results"]
        assert r["environment"]["torch"]
        # the tiny shapes ran on the CPU, not the papers' (this replaces a bound on the seconds, which a busy machine breaks)
        if name == "simpo": assert " ".join(r["argv"]).startswith("--shape tiny --device cpu"), r["argv"]
        else: assert (r["setup"]["shape"], r["setup"]["device"]) == ("tiny", "cpu"), (name, r["setup"])
        if name == "factcheck":
            for key in ("batched_logprob", "batched_cot", "sequential_logprob", "sequential_cot"):
                run_ = r["runs"][key]
                assert run_["checks_per_s"] > 0 and run_["sentences"] > 0, (key, run_)
            b = r["runs"]["batched_cot"]
            assert b["sentences"] == r["setup"]["batched"] and b["new_tokens"] == {"query": 8, "rating": 8}
            assert 600 < b["rating_prompt_tokens"]["mean"] < 1000  # the real prompt with three passages, about 700 tokens
            assert "ratio_to_70" not in b  # no roofline comparison on a CPU
        elif name == "simpo":
            (step,) = r["simpo_step"]
            assert step["shape"] == "tiny" and step["median_step_seconds"] > 0
        else:
            assert r["setup"]["levels"] == ["d", "q", "d+q"] and r["argv"][:4] == ["--levels", "d", "q", "d+q"]
            assert {x["level"] for x in r["ffrr_step"]} == {"d", "q", "d+q"} and all(x["s/step"] >= 0 for x in r["ffrr_step"])
            ref = r["refresh"]  # the policy's refresh, tokenizing against from kept tokens: the same embeddings
            assert ref["docs"] == 96 and ref["identical"] is True and ref["kept_docs_per_s"] > 0 and ref["kept_bytes_per_doc"] > 0
    assert "| section | status | figures |" in stdout


def test_missing_packages_and_budget_skip_with_reasons(tmp_path):
    report, _, _ = run(tmp_path, "--hide", "pysbd,trl,faiss", timeout=60)  # each section is skipped, none started
    assert {"pysbd", "trl", "faiss"} <= set(report["missing"]) and report["environment"]["hidden"] == ["faiss", "pysbd", "trl"]
    for name, pkg in (("factcheck", "pysbd"), ("simpo", "trl"), ("ffrr", "faiss")):
        s = report["sections"][name]
        assert s["status"] == "skipped" and s["reason"].startswith("missing: ") and pkg in s["reason"], s

    report, _, _ = run(tmp_path, "--budget-s", "1", timeout=60)
    for s in report["sections"].values():
        assert s["status"] == "skipped" and s["reason"].startswith("budget: "), s


def test_a_module_missing_inside_a_section_is_a_recorded_skip(tmp_path, monkeypatch):
    import argparse
    import importlib.util
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)

    def section(a, rec, device): import leaf_nb_no_such_module  # noqa: F401  (what an unlisted import does on a bare machine)
    monkeypatch.setattr(gpu_check, "ffrr", section)
    out = tmp_path / "ffrr.json"
    assert gpu_check.child(argparse.Namespace(child="ffrr", child_out=out, deadline=time.time() + 60, tiny=True)) == 0
    res = json.loads(out.read_text())
    assert res["status"] == "skipped" and res["reason"].startswith("missing: leaf_nb_no_such_module"), res
