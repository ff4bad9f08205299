"""Getting a finished report to the user and beyond: written atomically, printed, published to a
topic (with a spool while the collector is away), progress on a terminal, and `watch`'s schedule.
"""
