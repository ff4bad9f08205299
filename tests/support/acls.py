"""An ACL granted for one test on the session's shared SASL lab, and taken back after it.

Why: the `sasl` lab is started once per session and shared by every test that needs it; its scenario
says bob has no ACL, and the findings tests of his principal expect exactly that. A test that grants bob
something must take it back, and wait until the brokers' authorizer has it back (an ACL reaches it
through the metadata log, a moment after the admin request returns), whichever test runs next.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

WAIT_S = 30


@contextmanager
def describe_granted(bootstrap: str, admin_password: str, topic: str, user: str, password: str) -> Iterator[None]:
    """`user` may describe `topic` inside the block (once its authorizer says so); no longer after it."""
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    sasl = {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}
    admin = AdminClient({**sasl, "sasl.username": "alice", "sasl.password": admin_password})
    viewer = AdminClient({**sasl, "sasl.username": user, "sasl.password": password})
    rule = (ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, f"User:{user}", "*", AclOperation.DESCRIBE,
            AclPermissionType.ALLOW)
    binding = AclBinding(*rule)
    admin.create_acls([binding])[binding].result(WAIT_S)
    try:
        yield
    finally:
        unbound = AclBindingFilter(*rule)
        admin.delete_acls([unbound])[unbound].result(WAIT_S)
        deadline = time.monotonic() + WAIT_S
        while topic in viewer.list_topics(timeout=5).topics:
            if time.monotonic() > deadline:
                raise AssertionError(f"{user} still sees {topic} {WAIT_S} s after its ACL was taken back")
            time.sleep(0.3)
