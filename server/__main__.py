"""``python -m server`` is the ``tripeaks`` command."""

from server.cli import main

main()
