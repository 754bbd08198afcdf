"The OpenAI-compatible backend against a real server process (llama-cpp-python serving the embedded GGUF)."
import csv
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from leaf_nb.cache import Cache
from leaf_nb.llm import LlamaCppServer, LMError, OpenAICompatible, embedded, user


def test_generate_text_and_chat(server, tmp_path):
    lm = server.lm(cache=tmp_path / "c.sqlite", progress=False)
    text, chat = lm.generate(["The pancreas secretes", user("What does the pancreas secrete? One sentence.")], max_tokens=24)
    assert text[0].strip() and chat[0].strip()
    assert any(w in (text[0] + chat[0]).lower() for w in ("insulin", "enzyme", "digest"))
    assert lm.calls == 2
    lm.generate(["The pancreas secretes"], max_tokens=24)
    assert lm.calls == 2  # served by the cache


def test_greedy_samples_share_one_call_and_sampling_varies(server):
    lm = server.lm(progress=False)  # no cache: every request reaches the server
    p = [user("Name a common cause of chest pain.")]
    greedy = lm.generate(p, n=3, max_tokens=16)[0]
    assert lm.calls == 1 and len(set(greedy)) == 1  # greedy: one request serves all n
    samples = lm.generate(p, n=4, temperature=1.2, seed=3, max_tokens=16)[0]
    assert lm.calls == 5 and len(set(samples)) > 1


def test_stop_sequences(server):
    out = server.lm(progress=False).generate(["1. aspirin\n2. ibuprofen\n3."], max_tokens=30, stop=["\n"])[0][0]
    assert "\n" not in out


def test_label_logprobs_rank_and_match_local_model(server):
    lm = server.lm(progress=False)
    lp = lm.label_logprobs(["The capital of France is", "Insulin is produced by the"], [" Paris", " pancreas", " banana"])
    assert lp.shape == (2, 3) and (lp < 0).all()
    assert lp[0].argmax() == 0 and lp[1].argmax() == 1
    local = embedded(progress=False)  # same GGUF weights, dequantised by transformers
    np.testing.assert_allclose(local.label_logprobs(["The capital of France is"], [" Paris", " banana"]), lp[:1, [0, 2]], atol=0.75)
    # chat prompts are rendered with the model's chat template from its tokenizer; multi-token labels are summed
    q = [user("Is the heart a muscle? Answer Yes or No.")]
    labels = ["Yes", "No", "[Not Supported]"]
    np.testing.assert_allclose(lm.label_logprobs(q, labels), local.label_logprobs(q, labels), atol=0.75)


def test_label_logprobs_need_a_tokenizer(server):
    # llama-cpp-python's server answers /v1/models with the name alone, so naming the model for the cache warns first
    with pytest.raises(LMError, match="tokenizer"), pytest.warns(UserWarning, match="says nothing about"):
        OpenAICompatible(server.base_url, server.alias, progress=False).label_logprobs(["x"], ["y"])


def test_server_killed_mid_run_gives_clear_error(tmp_path):
    victim = LlamaCppServer().start()
    cache = Cache(tmp_path / "c.sqlite")
    lm = victim.lm(cache=cache, max_concurrency=2, max_retries=2, timeout=20, progress=False)

    def kill_after_first_results():
        deadline = time.time() + 120
        while len(cache) < 3 and time.time() < deadline: time.sleep(0.02)
        victim.proc.kill()

    killer = threading.Thread(target=kill_after_first_results)
    killer.start()
    t0 = time.time()
    try:
        with pytest.raises(LMError) as err:
            lm.generate([user(f"Write a long paragraph about drug number {i}.") for i in range(40)], max_tokens=48)
    finally:
        killer.join()
        victim.stop()
    assert time.time() - t0 < 120  # no hang
    assert victim.base_url in str(err.value) and "of 40 requests failed" in str(err.value)
    assert lm.retries >= 2  # the client retried before giving up
    assert 3 <= len(cache) == lm.calls < 40  # what finished before the kill is kept


def test_llama_threads_benchmark_writes_a_row_per_condition(tmp_path):
    "benchmarks/llama_threads.py end to end at its smallest: one thread, idle and beside one spinning process."
    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "llama_threads.csv"
    p = subprocess.run([sys.executable, str(root / "benchmarks" / "llama_threads.py"), "--requests", "1", "--max-tokens", "4",
                        "--threads", "1", "--busy", "0", "1", "--csv", str(out)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    rows = list(csv.DictReader(open(out, newline="")))
    assert [(r["busy"], r["n_threads"]) for r in rows] == [("0", "1"), ("1", "1")]
    assert all(int(r["tokens"]) > 0 and float(r["tokens_per_s"]) > 0 and r["same_text"] == "True" for r in rows)
    assert [r["vs_one_thread"] for r in rows] == ["1.0", "1.0"]  # each condition's first thread count is its reference
    assert "busy CPUs 1  n_threads 1" in p.stdout
