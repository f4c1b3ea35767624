"""Runnable example teams that ship in the package, so an installed relayrace can show
itself: ``relayrace demo`` runs `relayrace.examples.support` offline.

Layer: an entry point. Each example is declared with the public API, as a user would write it.
"""
