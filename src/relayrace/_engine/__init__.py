"""The private engine: the run loop and what one turn does (model call, tool calls,
handoffs, delegated children, guardrails, budgets, durable steps).
Imports declarations, ports and `core`; nothing above it imports it but `runner`.
"""
