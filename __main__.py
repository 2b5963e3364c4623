"""``python -m podsim``: the ``podsim`` command."""

from podsim.scenarios.cli import main

if __name__ == "__main__":
    main()
