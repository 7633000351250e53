"""Regenerate every figure and table of the paper: ``sheaflinalg reproduce`` under its former name.

Usage: ``python scripts/reproduce_all.py --out results/paper [--quick] [--jobs 2] [--only ITEM ...] [--resume]``
(the options of ``sheaflinalg reproduce --help``; ``--list`` shows the items).
"""

import sys

from sheaflinalg.cli import main

if __name__ == "__main__":
    sys.exit(main(["reproduce", *sys.argv[1:]]))
