"""Runnable example teams that ship in the package, so an installed relayrace can show
itself: ``relayrace demo`` runs `relayrace.examples.support` offline.
Layer: an entry point. May import the cli (to print a run as it does), the runner, the
testing doubles and everything below; each team is declared with the public API.
"""
