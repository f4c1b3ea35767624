"""``python -m relayrace``: the ``relayrace`` command."""

from .cli import main

main()
