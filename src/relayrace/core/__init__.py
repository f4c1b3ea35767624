"""The data every layer speaks: messages, the events of a session log, usage, errors,
reports and the sandboxed templates.
Imports nothing else of relayrace.
"""
