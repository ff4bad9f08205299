"""The SASL mechanism names kprobe knows, apart from the code that speaks them.

Why a module of its own: the settings (kprobe.kafka.security), the probe's steps and the findings
compare mechanism names on every run, but only a run that authenticates needs the SASL conversations
(kprobe.kafka.sasl: hashlib, hmac, secrets) or the OAuth token settings (kprobe.kafka.oauth_settings).
Naming a mechanism must not import either: a PLAINTEXT probe loads neither (tests/test_imports.py).
"""

from __future__ import annotations

SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MECHANISMS = ("PLAIN", *SCRAM_HASHES, "OAUTHBEARER")
MSK_IAM = "AWS_MSK_IAM"  # the Java client's mechanism name for Amazon MSK IAM (OAUTHBEARER on the wire)
