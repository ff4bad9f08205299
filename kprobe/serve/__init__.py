"""`kprobe serve`: a Prometheus exporter that probes on demand, in blackbox_exporter's style.

Prometheus scrapes `/probe?target=HOST:PORT&module=NAME`; the exporter runs one probe within the
scrape's own timeout and answers the exposition of its report (kprobe.output.prometheus), so
targets, intervals and alerting live in Prometheus. `modules` reads the config, `exporter` serves.
"""
