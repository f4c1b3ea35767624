"""Declarations of agents combined: routing rules, `Team`, the workflow agents, the
coordination patterns and meta-tools.
Imports `agents`, `core` and the ports.
"""
