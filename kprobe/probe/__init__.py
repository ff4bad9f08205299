"""The steps of a probe, in the order data flows through them.

bootstrap (metadata on each bootstrap connection) -> endpoints (the distinct advertised ones)
-> resolve -> connect (and `reach`, which runs both for every endpoint) -> identity -> tls.
Each step takes plain data and a `RunContext` and returns plain data; `kprobe.runs.probe`
strings them together, `kprobe.findings` judges what they found.
"""
