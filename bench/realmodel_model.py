"""The local model of `python3 dev realmodel`, for ``relayrace eval run --model
bench/realmodel_model.py:local``: relayrace's OpenAI provider on the llama-server that
``RELAYRACE_REALMODEL_URL`` names (``http://127.0.0.1:PORT/v1``), at temperature 0, running
the tool calls the model writes as text (``text_tool_calls="parse"``)."""

from __future__ import annotations

import os

from relayrace import ModelSettings
from relayrace.models.openai import OpenAIChatModel

local = OpenAIChatModel(
    "qwen2.5-coder-1.5b", base_url=os.environ.get("RELAYRACE_REALMODEL_URL",
                                                  "http://127.0.0.1:8737/v1"),
    api_key="local", settings=ModelSettings(temperature=0, text_tool_calls="parse"))
