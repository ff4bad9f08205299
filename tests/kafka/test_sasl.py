"""The SASL client side kprobe speaks itself, on the RFCs' own test vectors and on hostile servers.

The same code is proven against real brokers in tests/findings/test_findings_lab.py (the lab's `sasl`
scenario: SCRAM-SHA-256 and PLAIN users) and tests/kafka/test_sasl_scram.py (SCRAM-SHA-512).
"""

from __future__ import annotations

import base64

import pytest

from kprobe.kafka.sasl import Plain, SaslError, Scram

# RFC 7677, section 3: SCRAM-SHA-256 for user "user", password "pencil".
C_NONCE = "rOprNGfwEbeRWgbNEkqO"
SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
CLIENT_FINAL = b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_rfc7677_scram_sha_256_vector():
    client = Scram("SCRAM-SHA-256", "user", "pencil", nonce=C_NONCE)
    assert client.start() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert client.step(SERVER_FIRST) == CLIENT_FINAL
    assert client.step(SERVER_FINAL) is None  # the server proved it knows the password


def test_a_server_that_does_not_know_the_password_is_refused():
    client = Scram("SCRAM-SHA-256", "user", "not-pencil", nonce=C_NONCE)
    client.start()
    client.step(SERVER_FIRST)
    with pytest.raises(SaslError, match="does not verify"):
        client.step(SERVER_FINAL)


def test_sha_512_differs_and_user_names_are_escaped():
    client = Scram("SCRAM-SHA-512", "a=b,c", "pencil", nonce=C_NONCE)
    assert client.start() == b"n,,n=a=3Db=2Cc,r=rOprNGfwEbeRWgbNEkqO"
    final = client.step(SERVER_FIRST)
    assert final is not None and final.startswith(b"c=biws,r=") and final != CLIENT_FINAL
    proof = base64.b64decode(final.split(b",p=")[1])
    assert len(proof) == 64  # SHA-512


@pytest.mark.parametrize(("server_first", "why"), [
    (b"r=someone-elses-nonce,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "nonce"),
    (b"r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "nonce"),  # not extended
    (b"r=rOprNGfwEbeRWgbNEkqOxyz,s=not base64!,i=4096", "malformed"),
    (b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1", "iterations"),
    (b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=999999999", "iterations"),
    (b"e=unknown-user", "refused"),
    (b"\xff\xfe", "UTF-8"),
    (b"garbage", "malformed"),
])
def test_hostile_server_first_messages(server_first, why):
    client = Scram("SCRAM-SHA-256", "user", "pencil", nonce=C_NONCE)
    client.start()
    with pytest.raises(SaslError, match=why) as caught:
        client.step(server_first)
    assert "pencil" not in str(caught.value)


def test_plain_is_one_message():
    plain = Plain("alice", "s3cret")
    assert plain.start() == b"\x00alice\x00s3cret" and plain.step(b"") is None


def test_a_server_quoting_the_password_back_does_not_get_it_printed():
    """PLAIN sends the password in clear: a hostile broker could put it in its error message."""
    assert Plain("alice", "s3cret").redact("bad password s3cret for alice") == "bad password [redacted] for alice"
    assert Scram("SCRAM-SHA-256", "user", "pencil").redact("pencil?") == "[redacted]?"
