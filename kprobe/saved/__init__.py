"""Reports already written: read them back whatever their age (reading), select and summarise them
(show), and tell two of them apart (compare), the substance of `kprobe show` and `kprobe diff`.
"""
