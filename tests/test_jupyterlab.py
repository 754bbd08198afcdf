"""The notebooks open in JupyterLab: a real JupyterLab server on loopback serves a notebook through its REST API, starts
a kernel for it, runs one of its cells and returns the cell's output, as a reader who runs `.venv/bin/jupyter lab`
would see it."""
import asyncio
import json
import os
import secrets
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from leaf_nb.llm import free_port

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = "nbs/api/00_cache.ipynb"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    port, token = free_port(), secrets.token_hex(16)
    runtime = tmp_path_factory.mktemp("jupyter-runtime")
    cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={ROOT}", "--ServerApp.open_browser=False"]
    if hasattr(os, "geteuid") and os.geteuid() == 0: cmd.append("--allow-root")  # CI containers run as root
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(runtime)}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    while True:
        try:
            with urllib.request.urlopen(urllib.request.Request(f"{base}/api/status", headers={"Authorization": f"token {token}"}), timeout=2):
                break
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                pytest.fail(f"jupyter lab did not start: {proc.stderr.read().decode()[-2000:]}")
            time.sleep(0.5)
    yield base, token
    proc.terminate()
    try: proc.wait(15)
    except subprocess.TimeoutExpired: proc.kill()


def call(lab, method, path, body=None):
    base, token = lab
    req = urllib.request.Request(f"{base}{path}", method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": f"token {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read() or b"null")


async def execute(lab, kernel_id: str, code: str, timeout: float = 120) -> list[dict]:
    "Send one execute_request on the kernel's websocket; return its iopub messages up to the idle status."
    from tornado.websocket import websocket_connect
    base, token = lab
    ws = await websocket_connect(f"{base.replace('http', 'ws')}/api/kernels/{kernel_id}/channels?token={token}")
    msg_id, session = uuid.uuid4().hex, uuid.uuid4().hex
    await ws.write_message(json.dumps({
        "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "test", "session": session, "date": "", "version": "5.3"},
        "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
        "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}}))
    out, deadline = [], time.time() + timeout
    while time.time() < deadline:
        raw = await asyncio.wait_for(ws.read_message(), timeout=max(1.0, deadline - time.time()))
        if raw is None: break
        msg = json.loads(raw)
        if msg.get("parent_header", {}).get("msg_id") != msg_id or msg.get("channel") != "iopub": continue
        out.append(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle": break
    ws.close()
    return out


def test_open_a_notebook_and_run_a_cell(lab):
    nb = call(lab, "GET", f"/api/contents/{NOTEBOOK}")
    assert nb["type"] == "notebook" and nb["content"]["cells"]
    code = ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in nb["content"]["cells"] if c["cell_type"] == "code"]
    imports = next(c for c in code if c.startswith("#| export") and "import hashlib" in c)  # the notebook's own cells
    example = next(c for c in code if "request_key(r)" in c and c.lstrip().startswith("r = "))
    session = call(lab, "POST", "/api/sessions", {"path": NOTEBOOK, "type": "notebook", "name": "", "kernel": {"name": "python3"}})
    kernel = session["kernel"]["id"]
    try:
        setup = asyncio.run(execute(lab, kernel, imports + "\nfrom leaf_nb.cache import request_key\nfrom fastcore.test import test_eq, test_ne"))
        assert not [m for m in setup if m["msg_type"] == "error"], setup
        result = asyncio.run(execute(lab, kernel, example + "\nprint(request_key(r)[:12])"))
        errors = [m["content"] for m in result if m["msg_type"] == "error"]
        assert not errors, errors
        printed = "".join(m["content"]["text"] for m in result if m["msg_type"] == "stream")
        from leaf_nb.cache import request_key
        expected = request_key({"kind": "openai", "model": "smollm2", "prompt": "What is metformin?", "params": {"temperature": 0.0}, "sample": 0})
        assert printed.strip() == expected[:12]
    finally:
        call(lab, "DELETE", f"/api/sessions/{session['id']}")
