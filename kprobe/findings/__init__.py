"""Observations in, findings out: pure rules with no network and no clock.

`catalogue` lists every code (its severity, what a client experiences, where it is documented);
the rules are split by the stage whose results they judge; `diagnose` runs them all in order.
"""
