"""A run of many LM calls, for tests/test_resume.py to kill with SIGKILL and rerun.

Usage: python resume_worker.py BASE_URL MODEL CACHE_PATH -> prints a JSON line {"calls": .., "greedy": [..], "seeded": [..]}
"""
import json
import sys

from leaf_nb.llm import OpenAICompatible

N = 24  # prompts per kind: 24 greedy + 24 seeded samples


def prompts(kind):
    return [f"Q{i} ({kind}). Name one drug used for condition number {i}:" for i in range(N)]


if __name__ == "__main__":
    base_url, model, cache_path = sys.argv[1:4]
    lm = OpenAICompatible(base_url, model, cache=cache_path, max_concurrency=2, progress=False)
    greedy = [o[0] for o in lm.generate(prompts("greedy"), max_tokens=12)]
    seeded = [o[0] for o in lm.generate(prompts("seeded"), temperature=0.9, seed=7, max_tokens=12)]
    print(json.dumps({"calls": lm.calls, "greedy": greedy, "seeded": seeded}))
