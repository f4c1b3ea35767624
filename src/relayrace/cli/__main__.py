"""``python -m relayrace.cli``: the ``relayrace`` command."""

from . import main

main()
