"""Kafka's wire protocol, as far as kprobe speaks it: a pure codec, security settings, one connection."""
