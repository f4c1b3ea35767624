"""Declarations of agents combined: `shapes` (one implementation per shape), and the front-ends
over them: routing rules and `Team`, the workflow agents, the patterns and the meta-tools.
Imports `agents`, `core` and the ports.
"""
