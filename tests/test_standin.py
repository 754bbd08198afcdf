"""The stand-in OpenAI-compatible server (`leaf_nb.standin`) as a real process on loopback: its API as `OpenAICompatible`
and the openai client use it, determinism, pacing, label scoring through `logit_bias`, and a fact-check through it."""
import http.client
import json
import threading
import time
from pathlib import Path

import numpy as np
import openai
import pytest

from leaf_nb.cache import Cache
from leaf_nb.factcheck import FactCheckSettings, fact_check, question_context
from leaf_nb.llm import LMError, OpenAICompatible, embedded_dir, user
from leaf_nb.prompts import UNPARSED, fact_check_prompt, parse_verdict, query_prompt
from leaf_nb.retrieve import BM25
from leaf_nb.standin import StandinServer, biased_reply, render_chat, reply

ROOT = Path(__file__).resolve().parents[1]
CTX = question_context("Which drug reverses opioid-induced respiratory depression?", {"A": "Naloxone", "B": "Flumazenil", "C": "Atropine"})


@pytest.fixture(scope="module")
def plain():
    "A stand-in without a tokenizer, serving two names."
    with StandinServer(["standin", "second"]) as s:
        yield s


@pytest.fixture(scope="module")
def tokenized():
    "A stand-in with the embedded model's tokenizer: chat template and logit_bias."
    with StandinServer(tokenizer=embedded_dir()) as s:
        yield s


def client(s):
    return openai.OpenAI(base_url=s.base_url, api_key="none", max_retries=0)


def test_starts_and_stops_as_its_own_process():
    s = StandinServer().start()
    try:
        assert s.proc.poll() is None and s.base_url.startswith("http://127.0.0.1:")
        assert s.spec == f"openai:{s.base_url}#standin"
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=5)
        conn.request("GET", "/health")
        assert conn.getresponse().status == 200
    finally:
        s.stop()
    assert s.proc.returncode is not None
    with pytest.raises(OSError):
        http.client.HTTPConnection("127.0.0.1", s.port, timeout=2).request("GET", "/v1/models")


def test_a_bad_start_says_why(tmp_path):
    with pytest.raises(RuntimeError, match="exited with code"):
        StandinServer(tokenizer=tmp_path / "missing").start()


def test_models_lists_every_name_with_an_identity(plain):
    served = plain.lm(progress=False).models()
    assert [m["id"] for m in served] == ["standin", "second"]
    assert all(m["root"] and m["max_model_len"] for m in served)
    a, b = plain.lm(progress=False).identity, plain.lm("second", progress=False).identity
    assert a != b and a.startswith("standin@sha256:")


def test_a_tokenizer_folders_bookkeeping_leaves_the_identity_as_it_was(tmp_path):
    """The stand-in's identity hashes its tokenizer folder's files; leaf-nb's hidden source record (written into the
    embedded model's folder by embedded_dir) is not one of them, so marking a folder keeps a rehearsal's cache valid."""
    import shutil
    from leaf_nb.cache import mark_source
    from leaf_nb.standin import _folder_digest
    folder = Path(shutil.copytree(embedded_dir(), tmp_path / "tok", ignore=shutil.ignore_patterns("*.safetensors", ".*")))
    before = _folder_digest(folder)
    mark_source(folder, "ab" * 32)
    assert (folder / ".leaf_nb_source.json").exists() and _folder_digest(folder) == before
    (folder / "tokenizer_config.json").write_text("{}")
    assert _folder_digest(folder) != before


def test_list_prompts_get_their_choices_in_order(plain):
    prompts = [f"Drug {i} lowers blood pressure." for i in range(5)]
    r = client(plain).completions.create(model="standin", prompt=prompts, n=2, max_tokens=64, temperature=0.8, seed=4)
    assert [c.index for c in r.choices] == list(range(10))
    for c in r.choices:
        p, j = divmod(c.index, 2)
        assert c.text == reply(prompts[p], 64, seed=4, index=j + 1)  # server seed 0 combined with the request's
        assert f"drug {p}" in c.text.lower() or "lowers" in c.text  # built from its own prompt's words
    assert r.usage.completion_tokens > 0 and r.usage.prompt_tokens > 0


def test_replies_are_deterministic_across_processes(plain):
    body = dict(model="standin", prompt="Metformin lowers hepatic glucose output.", max_tokens=128, temperature=0.9, seed=11)
    first = client(plain).completions.create(**body).choices[0].text
    with StandinServer() as again, StandinServer(seed=1) as other:
        assert client(again).completions.create(**body).choices[0].text == first
        assert client(other).completions.create(**body).choices[0].text != first
        assert client(other).models.list().data[0].root != client(plain).models.list().data[0].root


def test_greedy_ignores_seed_and_sampling_varies(plain):
    c = client(plain)
    greedy = {c.completions.create(model="standin", prompt="Aspirin", max_tokens=64, temperature=0, seed=s).choices[0].text for s in range(3)}
    sampled = {c.completions.create(model="standin", prompt="Aspirin", max_tokens=64, temperature=1.0, seed=s).choices[0].text for s in range(3)}
    assert len(greedy) == 1 and len(sampled) == 3


def test_stop_and_errors(plain):
    c = client(plain)
    text = c.completions.create(model="standin", prompt="Warfarin", max_tokens=64, stop=["Search"]).choices[0].text
    assert "Search" not in text and text
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        c.completions.create(model="nobody", prompt="x")
    with pytest.raises(openai.BadRequestError, match="tokenizer"):
        c.completions.create(model="standin", prompt="x", max_tokens=1, logit_bias={"5": 100})
    with pytest.raises(LMError, match="does not serve"):
        OpenAICompatible(plain.base_url, "nobody", progress=False).generate(["x"])


def test_chat_equals_completions_of_the_rendered_prompt(tokenized):
    "With a tokenizer the server renders chat through its template, as vLLM does: the same reply either way."
    c = client(tokenized)
    tok = tokenized.lm().tokenizer
    msgs = user(fact_check_prompt("Naloxone reverses opioid toxicity.", ["Naloxone is an opioid antagonist."], CTX))
    chat = c.chat.completions.create(model="standin", messages=msgs, max_tokens=256, temperature=0).choices[0].message.content
    text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    completion = c.completions.create(model="standin", prompt=text, max_tokens=256, temperature=0).choices[0].text
    assert chat == completion == reply(render_chat(msgs, tok), 256)
    assert parse_verdict(chat) != UNPARSED


def test_label_scoring_through_logit_bias(tokenized):
    lm = tokenized.lm(progress=False)
    labels = ["[Supported]", "[Not Supported]"]
    prompts = ["Naloxone reverses opioid overdose. Verdict:", user("Is metformin a biguanide?")]
    lp = lm.label_logprobs(prompts, labels)
    assert lp.shape == (2, 2) and (lp < 0).all() and np.isfinite(lp).all()
    tok = lm.tokenizer
    # the sum over the label's tokens of what the server draws for each, the text growing by each forced token
    text, want = prompts[0], 0.0
    for t in tok(labels[1], add_special_tokens=False)["input_ids"]:
        piece, lpt = biased_reply(text, t, tok)
        want, text = want + lpt, text + piece
    assert lp[0, 1] == pytest.approx(want)
    assert (lm.label_logprobs(prompts, labels) == lp).all()  # deterministic


def test_fact_check_through_it_parses_every_query_and_verdict(plain, tmp_path):
    bm25 = BM25(ROOT / "data" / "medcorpus.jsonl", progress=False)
    answers = [f"Answer {i}: naloxone reverses opioid toxicity. It acts within minutes in case {i}. Flumazenil reverses benzodiazepines."
               for i in range(12)]
    lm = plain.lm(cache=Cache(tmp_path / "c.sqlite"), progress=False)
    res = fact_check(answers, [CTX] * len(answers), llm=lm, retriever=bm25, settings=FactCheckSettings(n_searches=2))
    s = res.sentences
    assert len(s) == 36 and set(s.query_status) == {"ok"} and UNPARSED not in set(s.verdict)
    assert all(len(q) >= 1 for q in s.queries) and (s.evidence_ids.map(len) >= 3).all()
    assert 0 < (s.verdict == "supported").mean() < 1


def test_latency_per_token_is_honoured_without_blocking_others():
    with StandinServer(latency_per_token=0.01) as s:
        c = client(s)
        t0 = time.perf_counter()
        r = c.completions.create(model="standin", prompt="Heparin", max_tokens=64)
        took = time.perf_counter() - t0
        assert r.usage.completion_tokens >= 10 and took >= 0.01 * r.usage.completion_tokens
        # a long request in flight does not hold up a short one sent after it (on another connection)
        order = []
        def ask(tokens, name):
            client(s).completions.create(model="standin", prompt="Heparin", max_tokens=tokens)
            order.append(name)
        slow = threading.Thread(target=ask, args=(256, "slow"))
        slow.start(); time.sleep(0.2)
        ask(1, "fast")
        slow.join()
        assert order == ["fast", "slow"]


def test_answers_on_one_connection_keep_their_order():
    "Pipelined requests on one keep-alive connection: the slow first answer still comes first."
    with StandinServer(latency_per_token=0.01) as s:
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
        conn.connect()
        bodies = [json.dumps({"model": "standin", "prompt": f"p{i}", "max_tokens": m}).encode() for i, m in enumerate((256, 1))]
        raw = b"".join(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
                       + str(len(b)).encode() + b"\r\n\r\n" + b for b in bodies)
        conn.sock.sendall(raw)
        got = b""
        while got.count(b'"text_completion"') < 2:
            got += conn.sock.recv(65536)
        assert got.index(b"cmpl-standin-1") < got.index(b"cmpl-standin-2")
