"""`python -m rubric_core`: the command-line interface."""

from __future__ import annotations

from rubric_core.cli import main

if __name__ == "__main__":
    main()
