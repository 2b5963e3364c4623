"""``python -m podsim``: the ``podsim`` command."""

from podsim.scenarios.cli.app import main

if __name__ == "__main__":
    main()
