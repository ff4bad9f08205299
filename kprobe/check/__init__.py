"""`kprobe check`'s input: a cluster's listener settings read from its configuration files.

`listeners` holds the settings as data (and what the check makes of them); `deployments` reads
server.properties files, Compose files, a Strimzi `Kafka` resource and Bitnami chart values into
them. The rules that judge them are findings like any other (`kprobe.findings.check`), and the run
that strings reading, resolving and judging together is `kprobe.runs.check`.
"""
