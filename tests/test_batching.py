"""`OpenAICompatible(batch_size=N)`: prompts travel as lists to /v1/completions (chat ones rendered with the tokenizer's
template), with the same answers and the same cache keys as one prompt a request through the chat endpoint; and the
cache writer batches commits without losing results."""
import json
from pathlib import Path

import pytest

from leaf_nb.cache import Cache
from leaf_nb.factcheck import FactCheckSettings, fact_check, question_context
from leaf_nb.llm import LMError, OpenAICompatible, embedded_dir, user
from leaf_nb.retrieve import BM25
from leaf_nb.standin import StandinServer

ROOT = Path(__file__).resolve().parents[1]
CTX = question_context("Which drug reverses opioid-induced respiratory depression?", {"A": "Naloxone", "B": "Flumazenil", "C": "Atropine"})
ANSWERS = [f"Answer {i}: naloxone reverses opioid toxicity. It acts within minutes in case {i}. Atropine treats bradycardia."
           for i in range(6)]


@pytest.fixture(scope="module")
def standin():
    with StandinServer(tokenizer=embedded_dir()) as s:
        yield s


def test_batched_fact_check_equals_one_prompt_a_request(standin, tmp_path):
    "The same rows, the same cache keys and values, however the prompts travelled."
    bm25 = BM25(ROOT / "data" / "medcorpus.jsonl", progress=False)
    s = FactCheckSettings(n_searches=2)
    runs = {}
    for name, kw in {"alone": {}, "lists": {"batch_size": 8, "tokenizer": embedded_dir()}}.items():
        cache = Cache(tmp_path / f"{name}.sqlite")
        lm = OpenAICompatible(standin.base_url, standin.model, cache=cache, progress=False, **kw)
        res = fact_check(ANSWERS, [CTX] * len(ANSWERS), llm=lm, retriever=bm25, settings=s)
        runs[name] = (res, dict(cache._conn().execute("SELECT key, value FROM entries").fetchall()), lm.sent)
    (a, ca, sent_a), (b, cb, sent_b) = runs["alone"], runs["lists"]
    cols = ["text", "queries", "query_statuses", "evidence_ids", "reasoning", "verdict"]
    assert a.sentences[cols].equals(b.sentences[cols])
    assert ca == cb  # byte-identical cache: the keys do not say how a prompt travelled
    assert sent_b < sent_a / 4  # lists of 8: far fewer HTTP requests


def test_lists_carry_the_rendered_chat_and_no_extra_special_tokens(scripted):
    "What reaches the server: one request per list, the chat template's text, add_special_tokens false; text prompts as they are."
    def script(body, number):
        return ("ok", "fine")
    srv = scripted(script)
    tok_dir = embedded_dir()
    lm = OpenAICompatible(srv.base_url, "scripted", batch_size=3, tokenizer=tok_dir, progress=False)
    lm.generate([user(f"Question {i}?") for i in range(5)] + ["plain text prompt"], max_tokens=7)
    bodies = [b for b in srv.requests if "prompt" in b]
    chat = [b for b in bodies if b.get("add_special_tokens") is False]
    assert sorted(len(b["prompt"]) for b in chat) == [2, 3]  # the requests run concurrently: any order
    tok = lm.tokenizer
    sent = sorted(p for b in chat for p in b["prompt"])
    assert sent == sorted(tok.apply_chat_template(user(f"Question {i}?"), tokenize=False, add_generation_prompt=True) for i in range(5))
    plain = [b for b in bodies if "add_special_tokens" not in b]
    assert [b["prompt"] for b in plain] == [["plain text prompt"]]
    assert not any("messages" in b for b in srv.requests)


def test_a_short_list_answer_is_an_error(scripted):
    "A server that answers a list of prompts with fewer choices fails the request, never misaligns answers."
    srv = scripted(lambda body, number: ("one_choice", "only one choice"))
    lm = OpenAICompatible(srv.base_url, "scripted", batch_size=4, max_retries=0, progress=False)
    with pytest.raises(LMError, match="1 choices .* for a list of 4 prompts"):
        lm.generate(["a", "b", "c", "d"], max_tokens=3)


def test_sampled_prompts_are_listed_by_seed(standin):
    "Samples i of several prompts share a seed (seed + i) and travel together; their answers match one a request."
    lists = OpenAICompatible(standin.base_url, standin.model, batch_size=16, tokenizer=embedded_dir(), progress=False)
    alone = OpenAICompatible(standin.base_url, standin.model, progress=False)
    prompts = [user(f"Which drug treats case {i}?") for i in range(6)]
    got = lists.generate(prompts, n=3, temperature=0.8, seed=5, max_tokens=32)
    assert got == alone.generate(prompts, n=3, temperature=0.8, seed=5, max_tokens=32)
    assert lists.sent == 3 and alone.sent == 18


def test_writer_keeps_what_finished_when_the_backend_fails(tmp_path):
    "A stage that fails part-way commits every result that arrived (the writer closes in a finally)."
    from leaf_nb.llm import through_cache
    cache = Cache(tmp_path / "c.sqlite")
    def compute(xs):
        for i, x in enumerate(xs):
            if x == 7: raise RuntimeError("the backend died")
            yield i, x * 2
    with pytest.raises(RuntimeError, match="died"):
        through_cache(cache, list(range(10)), [{"x": x} for x in range(10)], compute, "demo", progress=False)
    assert len(cache) == 7
    stored = dict(cache._conn().execute("SELECT request, value FROM entries").fetchall())
    assert stored['{"x":3}'] == "6"


def test_a_profile_sets_batch_size_per_served_model(standin, tmp_path):
    """A shared profile's `batch_size` / `max_concurrency` beside a model's spec reach every notebook that names the
    model (as the spec's `?` options): the paper path then sends lists, with the same rows and cache as one a request."""
    from leaf_nb.runs import _lm, run_parameters
    nb = ROOT / "nbs" / "papers" / "leaf" / "leakage.ipynb"
    shared = tmp_path / "lab.yaml"
    shared.write_text("profile: lab\nmodels:\n"
                      f"  qwen2_72b: {{spec: 'openai:{standin.base_url}#{standin.model}', batch_size: 8, max_concurrency: 4,"
                      f" tokenizer: '{embedded_dir()}'}}\n  llama3_70b: {{spec: 'openai:{standin.base_url}#{standin.model}'}}\n")
    own = tmp_path / "own.yaml"
    own.write_text("llm: '@llama3_70b'\nrater: '@qwen2_72b'\nrater_tokenizer: '@qwen2_72b.tokenizer'\n")
    params = run_parameters(nb, profile=str(shared), files=[own])
    assert params["rater"] == f"openai:{standin.base_url}#{standin.model}?batch_size=8&max_concurrency=4"
    assert "?" not in params["llm"]  # a model without the keys keeps its spec as written
    bm25 = BM25(ROOT / "data" / "medcorpus.jsonl", progress=False)
    runs = {}
    for role in ("llm", "rater"):
        cache = Cache(tmp_path / f"{role}.sqlite")
        lm = _lm(params[role], cache, params["rater_tokenizer"] if role == "rater" else "", progress=False)
        res = fact_check(ANSWERS, [CTX] * len(ANSWERS), llm=lm, retriever=bm25, settings=FactCheckSettings(n_searches=2))
        runs[role] = (res.sentences[["queries", "evidence_ids", "verdict"]], dict(cache._conn().execute("SELECT key, value FROM entries").fetchall()), lm)
    (a, ca, one), (b, cb, lists) = runs["llm"], runs["rater"]
    assert (lists.batch_size, lists.max_concurrency, one.batch_size) == (8, 4, 1)
    assert a.equals(b) and ca == cb and lists.sent < one.sent / 4
    shared.write_text("profile: lab\nmodels:\n  qwen2_72b: {spec: 'hf:/models/qwen', batch_size: 8}\n"
                      f"  llama3_70b: {{spec: 'openai:{standin.base_url}#{standin.model}'}}\n")
    with pytest.raises(ValueError, match="only a served model"):
        run_parameters(nb, profile=str(shared), files=[own])
