"""Run the customer-support team: offline on a scripted model, or on a real one.

    python3 dev demo                                  # offline, no key, no network
    python3 dev demo --model openai:gpt-4o-mini       # or set OPENAI_API_KEY / OPENAI_BASE_URL
    python3 dev demo --model ollama:llama3.2          # any OpenAI-compatible local server

The same as ``relayrace demo``, whose code ships in the package
(src/relayrace/examples/support/demo.py).
"""

from __future__ import annotations

import sys

from relayrace.cli import main

if __name__ == "__main__":
    main(["demo", *sys.argv[1:]])
