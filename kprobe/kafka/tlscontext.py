"""The one place a client TLS context is built: trust, the client certificate, the verification switches.

Why one builder: the bootstrap connection, every endpoint's Kafka connection and the endpoint TLS
check must present the same client certificate (a listener with `ssl.client.auth=required` refuses
a connection without one) and trust the same CAs; three hand-built contexts drifted apart before
(only one of them sent the certificate). Why a cache: a probe makes dozens of TLS connections with
one set of settings, building a context with a CA costs milliseconds, and an `SSLContext` is safe
to share between threads once built. A file's identity (inode, size, mtime) is part of the key,
so a certificate renewed on disk during `kprobe watch` is read again.

`ssl` (and `tempfile`) are imported inside the functions: a PLAINTEXT run never pays for them.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

from kprobe.kafka.security import Security

if TYPE_CHECKING:
    import ssl

_CACHE_SIZE = 32
_cache: OrderedDict[tuple[object, ...], ssl.SSLContext] = OrderedDict()
_lock = threading.Lock()


class TlsSettingsError(ValueError):
    """The TLS settings cannot be loaded (a missing CA file, a key that does not match, a bad password).

    The message names the setting and the file, never the key, its password or PEM text.
    """


def client_context(security: Security, *, verify: bool | None = None) -> ssl.SSLContext:
    """A client context for `security`, built once per distinct settings in this process.

    `verify`: None applies the client's own switches (`enable.ssl.certificate.verification`,
    `ssl.endpoint.identification.algorithm`), as a client with these settings would connect.
    True verifies the chain whatever the settings and leaves the name to the caller, which judges
    it against the advertised host itself so it can tell a wrong name from an untrusted chain.
    False verifies nothing: only to read a certificate that was refused, to name it in a message.
    The client certificate is loaded in every mode: a listener that requires one refuses even a
    connection that only wants to read the broker's certificate (TLS 1.2 fails the handshake).
    Raises TlsSettingsError when a CA, certificate or key cannot be loaded.
    """
    key = (_fingerprint(security), verify)
    with _lock:
        ctx = _cache.get(key)
        if ctx is not None:
            _cache.move_to_end(key)
            return ctx
    ctx = _build(security, verify)
    with _lock:
        _cache[key] = ctx
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return ctx


def _file_state(path: str | None) -> tuple[object, ...] | None:
    """What identifies a file's current content cheaply (a renewal on disk changes it)."""
    if not path:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return (path,)  # loading fails and says why; not cached differently from a later good state
    return (path, st.st_ino, st.st_size, st.st_mtime_ns)


def _fingerprint(sec: Security) -> tuple[object, ...]:
    """Every setting the context depends on (held in memory only, as the Security value itself is)."""
    return (_file_state(sec.ssl_cafile), sec.ssl_ca_pem, _file_state(sec.ssl_certfile), _file_state(sec.ssl_keyfile),
            sec.ssl_key_password, sec.ssl_certificate_pem, sec.ssl_key_pem, sec.ssl_verify, sec.ssl_verify_hostname)


def has_client_certificate(security: Security) -> bool:
    """Whether a connection with these settings presents a client certificate."""
    return bool(security.ssl_certfile or (security.ssl_certificate_pem and security.ssl_key_pem))


def _build(sec: Security, verify: bool | None) -> ssl.SSLContext:
    import ssl

    checks_chain = sec.ssl_verify if verify is None else verify
    if checks_chain:
        # create_default_context: the system's CAs when none is given, and the strict chain checks
        # (VERIFY_X509_STRICT on Python 3.13) every client of this probe has always applied.
        try:
            ctx = ssl.create_default_context(cafile=sec.ssl_cafile or None, cadata=sec.ssl_ca_pem or None)
        except (OSError, ssl.SSLError, ValueError) as exc:
            where = f"ssl.ca.location {sec.ssl_cafile}" if sec.ssl_cafile else "ssl.ca.pem"
            if sec.ssl_cafile and sec.ssl_ca_pem:
                where = f"ssl.ca.location {sec.ssl_cafile} or ssl.ca.pem"
            raise TlsSettingsError(f"cannot load {where}: {_why(exc)}") from None
        ctx.check_hostname = verify is None and sec.ssl_verify_hostname
    else:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False  # before verify_mode: CERT_NONE is refused while the name is checked
        ctx.verify_mode = ssl.CERT_NONE
    if sec.ssl_certfile:
        try:
            ctx.load_cert_chain(sec.ssl_certfile, sec.ssl_keyfile or None, password=sec.ssl_key_password)
        except (OSError, ssl.SSLError, ValueError) as exc:
            files = sec.ssl_certfile + (f" with ssl.key.location {sec.ssl_keyfile}" if sec.ssl_keyfile else "")
            raise TlsSettingsError(f"cannot load the client certificate ssl.certificate.location {files}: "
                                   f"{_why(exc)}") from None
    elif sec.ssl_certificate_pem or sec.ssl_key_pem:
        if not (sec.ssl_certificate_pem and sec.ssl_key_pem):
            missing = "ssl.key.pem" if sec.ssl_certificate_pem else "ssl.certificate.pem"
            raise TlsSettingsError(f"a client certificate in memory needs both ssl.certificate.pem and ssl.key.pem; "
                                   f"{missing} is missing")
        _load_pem_chain(ctx, sec.ssl_certificate_pem, sec.ssl_key_pem, sec.ssl_key_password)
    return ctx


def _why(exc: BaseException) -> str:
    """An OpenSSL or OS reason without the data it was given (never a key or a password)."""
    reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None)
    return str(reason) if reason else exc.__class__.__name__


def _load_pem_chain(ctx: ssl.SSLContext, certificate: str, key: str, password: str | None) -> None:
    """Load an in-memory certificate and key: `load_cert_chain` only reads paths.

    The PEM goes to an anonymous memory file (memfd) read back through /proc/self/fd, so the key
    never touches a disk. Where memfd is missing (not Linux), a 0600 file in a private 0700
    directory is used and removed at once.
    """
    import ssl

    data = (certificate.rstrip("\n") + "\n" + key.rstrip("\n") + "\n").encode()
    memfd = getattr(os, "memfd_create", None)
    fd = -1
    if memfd is not None:
        try:
            fd = memfd("kprobe-client-certificate", getattr(os, "MFD_CLOEXEC", 0))
        except OSError:
            fd = -1
    try:
        if fd >= 0 and os.path.isdir("/proc/self/fd"):
            os.write(fd, data)
            ctx.load_cert_chain(f"/proc/self/fd/{fd}", password=password)
            return
        import shutil
        import tempfile

        directory = tempfile.mkdtemp(prefix="kprobe-tls-")  # 0700: only this user can look inside
        try:
            path = os.path.join(directory, "client.pem")
            handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(handle, data)
            finally:
                os.close(handle)
            ctx.load_cert_chain(path, password=password)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise TlsSettingsError(f"cannot load the client certificate from ssl.certificate.pem and ssl.key.pem: "
                               f"{_why(exc)}") from None
    finally:
        if fd >= 0:
            os.close(fd)
