"""kprobe: why a Kafka client that reaches the bootstrap broker still fails.

The package is importable as a library; the CLI (`kprobe.cli`) is a thin shell over it.
Heavy imports (confluent_kafka, dns, pyspark) stay inside the functions that need them so
that `kprobe --help` and a probe start fast.
"""

__version__ = "0.1.0"
