"Fixtures shared by the tests: a real llama.cpp OpenAI-compatible server on loopback."
import pytest

from leaf_nb.llm import LlamaCppServer


@pytest.fixture(scope="session")
def server():
    "llama-cpp-python's server serving the embedded SmolLM2 GGUF, for the whole test session."
    with LlamaCppServer() as s:
        yield s
