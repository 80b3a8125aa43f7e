"""``python -m shared.cli.main``: the statewise command."""

from shared.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
