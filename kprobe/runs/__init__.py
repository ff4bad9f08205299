"""The runs a command starts: a probe of every bootstrap, a kcat-style listing, a check of listener files.

Each takes validated options (kprobe.config) and returns data (kprobe.models); none prints.
"""
