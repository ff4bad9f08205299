"""`kprobe fix`: the change to the brokers' own configuration that closes the gaps the reports show.

Pure, no network: `plan` decides the change from the reports and the deployments (which listener each
report's bootstrap reached, which brokers' endpoints fail from which vantage, the address that works
there today, replace or add), `edits` writes it into the files' text as a minimal edit and a unified
diff, and `texts` reads the patched text back so `kprobe check` can judge the result before anything is
written. The runs (kprobe.runs.fix) add what needs the network: names resolved from here and, with
--verify, the what-if probe.
"""
