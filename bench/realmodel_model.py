"""The local model of `python3 dev realmodel`, for ``relayrace eval run --model
bench/realmodel_model.py:local``: relayrace's OpenAI provider on the llama-server that
``RELAYRACE_REALMODEL_URL`` names (``http://127.0.0.1:PORT/v1``), at temperature 0, running
the tool calls the model writes as text (``text_tool_calls="parse"``). With
``RELAYRACE_REALMODEL_RECORD=FILE`` the wire of every request is written to FILE (JSON) at
exit, for the routing replay test."""

from __future__ import annotations

import atexit
import json
import os
import sys
from pathlib import Path

import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parent))

from realmodel_wire import Recorder, local_model  # noqa: E402

_URL = os.environ.get("RELAYRACE_REALMODEL_URL", "http://127.0.0.1:8737/v1")
_RECORD = os.environ.get("RELAYRACE_REALMODEL_RECORD")

if _RECORD:
    _recorder = Recorder()
    local = local_model(_recorder, _URL)
    atexit.register(lambda: Path(_RECORD).write_text(json.dumps(_recorder.exchanges)))
else:
    local = local_model(httpx2.AsyncHTTPTransport(), _URL)
