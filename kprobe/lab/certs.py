"""Certificates for the lab's TLS listeners, made fresh at each start with the openssl CLI.

Why openssl rather than a Python crypto package: it is on every machine that runs the lab,
and brokers read its PEM output directly (`ssl.keystore.type=PEM`), so no Java keystore tool is
needed. Certificates follow what strict verifiers (Python 3.13's VERIFY_X509_STRICT, the JDK)
demand: critical basicConstraints and keyUsage on the CA, key identifiers, serverAuth.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from kprobe.errors import LabError
from kprobe.hostport import is_ip_literal
from kprobe.records import record

_CURVE = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


@record
class CertSpec:
    """A broker certificate: which CA signs it, the names it holds, how long it lasts.

    A name is written into subjectAltName as an IP entry when it is an IP literal, else as a DNS
    entry; a `DNS:` or `IP:` prefix forces the type (`DNS:127.0.0.41`, the classic mistake of an
    address listed as a DNS name, which clients never match against an IP). The subject is
    `CN=<first name>` unless `subject` gives a whole one (`/O=Acme Co/CN=...`). `self_signed`
    makes a certificate that is its own issuer, as ingress controllers' default certificates are,
    instead of one `ca` signs. `client` makes a client certificate (extendedKeyUsage clientAuth),
    for listeners with ssl.client.auth, instead of a server one.
    """

    names: tuple[str, ...]
    ca: str = "lab-ca"
    days: int = 825
    subject: str | None = None
    self_signed: bool = False
    client: bool = False


def _san_entry(name: str) -> str:
    if name.startswith(("DNS:", "IP:")):
        return name
    return f"IP:{name}" if is_ip_literal(name) else f"DNS:{name}"


@record
class CertFiles:
    """Where a made certificate lives: `keystore` is key + chain, as Kafka's PEM keystore wants; `key` the key alone."""

    keystore: Path
    certificate: Path
    ca: Path
    key: Path | None = None


def _openssl(*args: str, cwd: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise LabError("the lab's TLS scenarios need the openssl command: install it (apt-get install openssl)")
    done = subprocess.run([openssl, *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        raise LabError(f"openssl {args[0]} failed: {done.stderr.strip().splitlines()[-1:]}")


def make_ca(directory: Path, name: str) -> Path:
    """A self-signed CA (ten years), returned as its PEM certificate path."""
    directory.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", *_CURVE, "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "3650",
             "-subj", f"/CN=kprobe lab {name}",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign",
             "-addext", "subjectKeyIdentifier=hash", cwd=directory)
    return directory / f"{name}.pem"


def make_cert(directory: Path, name: str, spec: CertSpec) -> CertFiles:
    """A server certificate signed by `spec.ca` (made first if needed), or signed by itself."""
    san = ",".join(_san_entry(n) for n in spec.names)
    subject = spec.subject or f"/CN={_san_entry(spec.names[0]).split(':', 1)[1]}"
    usage = "clientAuth" if spec.client else "serverAuth"
    if spec.self_signed:
        directory.mkdir(parents=True, exist_ok=True)
        _openssl("req", "-x509", *_CURVE, "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", str(spec.days),
                 "-subj", subject, "-addext", f"subjectAltName={san}", "-addext", "basicConstraints=critical,CA:FALSE",
                 "-addext", "keyUsage=critical,digitalSignature,keyEncipherment",
                 "-addext", f"extendedKeyUsage={usage}", cwd=directory)
        keystore = directory / f"{name}.keystore.pem"
        keystore.write_text((directory / f"{name}.key").read_text() + (directory / f"{name}.pem").read_text())
        return CertFiles(keystore, directory / f"{name}.pem", directory / f"{name}.pem", directory / f"{name}.key")
    ca = directory / f"{spec.ca}.pem"
    if not ca.exists():
        make_ca(directory, spec.ca)
    ext = directory / f"{name}.ext"
    ext.write_text(
        f"subjectAltName={san}\n"
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        f"extendedKeyUsage={usage}\n"
        "subjectKeyIdentifier=hash\n"
        "authorityKeyIdentifier=keyid,issuer\n"
    )
    _openssl("req", *_CURVE, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=directory)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{spec.ca}.pem", "-CAkey", f"{spec.ca}.key",
             "-CAcreateserial", "-out", f"{name}.pem", "-days", str(spec.days), "-extfile", ext.name, cwd=directory)
    keystore = directory / f"{name}.keystore.pem"
    keystore.write_text((directory / f"{name}.key").read_text() + (directory / f"{name}.pem").read_text()
                        + ca.read_text())
    return CertFiles(keystore, directory / f"{name}.pem", ca, directory / f"{name}.key")

