"""A run of many LM calls, for tests/test_resume.py to kill with SIGKILL and rerun.

Usage: python resume_worker.py CACHE_PATH SPEC
SPEC is an LLM spec (e.g. openai:http://127.0.0.1:PORT/v1#MODEL, or embedded). Prints one JSON line
{"calls": .., "greedy": [..], "seeded": [..]}.
"""
import json
import sys

from leaf_nb.llm import load_llm

N = 16  # prompts per kind: 16 greedy + 16 seeded samples


def prompts(kind):
    return [f"Q{i} ({kind}). Name one drug used for condition number {i}:" for i in range(N)]


if __name__ == "__main__":
    cache_path, spec = sys.argv[1:3]
    # one request at a time: batch_size=1 keeps the local model's outputs independent of batch composition
    kw = {"max_concurrency": 2} if spec.startswith("openai:") else {"batch_size": 1}
    lm = load_llm(spec, cache=cache_path, progress=False, **kw)
    greedy = [o[0] for o in lm.generate(prompts("greedy"), max_tokens=10)]
    seeded = [o[0] for o in lm.generate(prompts("seeded"), temperature=0.9, seed=7, max_tokens=10)]
    print(json.dumps({"calls": lm.calls, "greedy": greedy, "seeded": seeded}))
