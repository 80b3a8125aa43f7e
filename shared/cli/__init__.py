"""The ``statewise`` command line: one module per command."""
