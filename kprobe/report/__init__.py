"""Output formats, one module per format, each taking a Report and returning text.

Formats never decide anything: diagnosis happens before, in `kprobe.diagnose`.
"""
