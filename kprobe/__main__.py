"""Allows `python -m kprobe`, which some hosts prefer to a console script on PATH."""

from kprobe.cli import main

main()
