"""A finished report (or listing) turned into text: one module per format, plus atomic files.

Formatters take models and return strings; where the strings go is `kprobe.delivery.deliver`'s business.
"""
