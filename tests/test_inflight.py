"""Many requests in flight: a large `fact_check` against a server keeps `max_concurrency` requests open through every
stage, and a slow or failing request does not stall the rest. The server is a scripted loopback endpoint that counts the
requests it holds at once, per stage (stages are told apart by their `max_tokens`, never by prompt wording)."""
import time
from pathlib import Path

import pytest

from leaf_nb.cache import Cache
from leaf_nb.factcheck import FactCheckSettings, fact_check
from leaf_nb.llm import LMError, OpenAICompatible
from leaf_nb.retrieve import BM25

CORPUS = Path(__file__).resolve().parents[1] / "data" / "medcorpus.jsonl"
QUERY_TOKENS, RATER_TOKENS, CONCURRENCY = 21, 37, 8


def answers(n):
    "n answers of three distinct sentences each: 3n sentences to check."
    drugs = ["metformin", "warfarin", "heparin", "naloxone", "insulin", "amoxicillin", "lisinopril", "atorvastatin"]
    return [f"Answer {i} names {drugs[i % 8]} as the drug. It acts within hours in case {i}. Patient {i} should be monitored."
            for i in range(n)]


def script(delay, slow=None, failing=None):
    "Answers by stage: a query in a code block, or a short rating ending in a label; `slow`/`failing` pick requests by number."
    def answer(body, number):
        if failing is not None and number == failing: return ("status", 500)
        wait = 3.0 if slow is not None and number == slow else delay
        text = "```\nanticoagulant monitoring\n```" if body.get("max_tokens") == QUERY_TOKENS else "The documents agree.\n[Supported]"
        return ("sleep", wait, text)
    return answer


@pytest.fixture(scope="module")
def bm25():
    return BM25(CORPUS, progress=False)


def lms(srv, cache=None):
    return OpenAICompatible(srv.base_url, "scripted", max_concurrency=CONCURRENCY, max_retries=0, timeout=30,
                            cache=cache, progress=False)


SETTINGS = FactCheckSettings(query_max_tokens=QUERY_TOKENS, rater_max_tokens=RATER_TOKENS, n_searches=1)


def test_every_stage_keeps_max_concurrency_in_flight(scripted, bm25):
    srv = scripted(script(delay=0.15))
    res = fact_check(answers(16), ["Which drug?"] * 16, llm=lms(srv), retriever=bm25, settings=SETTINGS)
    assert len(res.sentences) == 48
    assert srv.max_in_flight_by[QUERY_TOKENS] == CONCURRENCY, srv.max_in_flight_by
    assert srv.max_in_flight_by[RATER_TOKENS] == CONCURRENCY, srv.max_in_flight_by
    assert srv.max_in_flight <= CONCURRENCY  # never more than asked for


def test_a_slow_request_holds_one_slot_only(scripted, bm25):
    srv = scripted(script(delay=0.1, slow=0))  # the very first request takes 3 s
    t0 = time.time()
    fact_check(answers(16), ["Which drug?"] * 16, llm=lms(srv), retriever=bm25, settings=SETTINGS)
    took = time.time() - t0
    # 96 requests at 0.1 s over 8 slots is ~1.2 s of work; had the pool waited on the slow one per round it would be far more
    assert took < 3.0 + 3.0, took
    assert srv.max_in_flight_by[QUERY_TOKENS] == CONCURRENCY


def test_a_failing_request_does_not_stop_the_others(scripted, bm25, tmp_path):
    srv = scripted(script(delay=0.05, failing=5))
    cache = Cache(tmp_path / "c.sqlite")
    with pytest.raises(LMError, match="1 of 48 requests failed"):
        fact_check(answers(16), ["Which drug?"] * 16, llm=lms(srv, cache), retriever=bm25, settings=SETTINGS)
    assert len(cache) == 47  # every other query was written and kept
    # the rerun sends only the one that failed (it succeeds now), then the verdicts
    srv2 = scripted(script(delay=0.0))
    res = fact_check(answers(16), ["Which drug?"] * 16, llm=lms(srv2, cache), retriever=bm25, settings=SETTINGS)
    assert len(srv2.requests) == 1 + 48 and (res.sentences.verdict == "supported").all()
