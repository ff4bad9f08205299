"""kprobe.clientprops.keystores against the real producers of these stores: the JDK's keytool and openssl.

The stores are made once for the module, as Confluent's, MSK's and Aiven's guides make them: a CA and a
client certificate with openssl; `keytool -importcert -trustcacerts` truststores (JKS, PKCS12); a JKS
keystore by keytool -genkeypair (its own -keypass), -certreq, signed by the CA, and both certificates
imported back; a PKCS12 keystore by -genkeypair; a JCEKS store; openssl's own PKCS12 files. Each
keytool command is the JDK's keytool itself (sun.security.tools.keytool.Main, what the `keytool`
launcher runs), called in one JVM for many commands: a JVM start per command cost more than all the
tests that read the stores. Two JVMs in all, one before the CA signs the JKS keystore's request and
one after; openssl's files are made beside the first.

What Java trusts is not guessed: the second JVM also loads every truststore with the JDK's KeyStore and
TrustManagerFactory and lists its accepted issuers, which kprobe must equal.
"""

from __future__ import annotations

import base64
import shutil
import ssl
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from kprobe.clientprops.keystores import KeyPair, StoreError, keystore_pair, truststore_pem

pytestmark = pytest.mark.lab  # the stores are made by the JDK's keytool (a JVM per store)

TRUST_PW = "tr-Secret-4821"
STORE_PW = "st-Secret-9137"
KEY_PW = "ky-Secret-5523"  # the JKS key entry's own -keypass, and the encrypted PEM key's password
PASSWORDS = (TRUST_PW, STORE_PW, KEY_PW)

# keytool commands, each a list of arguments ended by ";", run by keytool's own Main in this JVM (it
# exits non-zero on the first that fails); then, after "oracle" and an output file, triples of store
# type, file and password ("-" for none): what the JDK's TrustManager accepts from each store.
TOOLS = r"""
import java.io.*; import java.security.*; import java.security.cert.*; import javax.net.ssl.*; import java.util.*;
public class Tools { public static void main(String[] a) throws Exception {
  List<String> command = new ArrayList<>();
  int i = 0;
  for (; i < a.length && !a[i].equals("oracle"); i++) {
    if (!a[i].equals(";")) { command.add(a[i]); continue; }
    sun.security.tools.keytool.Main.main(command.toArray(new String[0]));
    command.clear();
  }
  if (i == a.length) return;
  try (PrintStream out = new PrintStream(new FileOutputStream(a[i + 1]), true, "US-ASCII")) {
    for (i += 2; i + 2 < a.length; i += 3) {
      KeyStore ks = KeyStore.getInstance(a[i]);
      try (InputStream in = new FileInputStream(a[i + 1])) { ks.load(in, a[i + 2].equals("-") ? null : a[i + 2].toCharArray()); }
      TrustManagerFactory tmf = TrustManagerFactory.getInstance("PKIX"); tmf.init(ks);
      X509TrustManager tm = (X509TrustManager) tmf.getTrustManagers()[0];
      StringBuilder line = new StringBuilder(a[i + 1]);
      for (X509Certificate c : tm.getAcceptedIssuers()) line.append(' ').append(Base64.getEncoder().encodeToString(c.getEncoded()));
      out.println(line);
    }
  }
}}
"""


def _keytool_jvm(source: Path, *commands: list[str], oracle: tuple[str, ...] | list[str] = ()) -> None:
    """Run keytool commands (and the trust oracle) in one JVM: C1 only and the serial collector start fastest."""
    args = [arg for command in commands for arg in (*command, ";")]
    _run("java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "--add-exports",
         "java.base/sun.security.tools.keytool=ALL-UNNAMED", str(source), *args, *oracle)


def _run(*args: str) -> None:
    subprocess.run(list(args), check=True, capture_output=True, timeout=120)


def _der(pem_file: Path) -> bytes:
    return ssl.PEM_cert_to_DER_cert(pem_file.read_text())


def _ders(pem_text: str) -> list[bytes]:
    blocks = pem_text.split("-----END CERTIFICATE-----")[:-1]
    return [ssl.PEM_cert_to_DER_cert(b.strip() + "\n-----END CERTIFICATE-----\n") for b in blocks]


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if not (shutil.which("keytool") and shutil.which("java") and shutil.which("openssl")):
        pytest.skip("needs a JDK (keytool, java) and openssl on PATH")
    d = tmp_path_factory.mktemp("stores")
    p = {name: d / name for name in (
        "ca.key", "ca.pem", "client.key", "client.csr", "client.pem", "client.enc.pem", "client.p12",
        "openssl-truststore.p12", "truststore.jks", "truststore.p12", "keystore.jks", "keystore.p12",
        "store.jceks", "jks-client.csr", "jks-client.pem", "random.bin", "Tools.java", "oracle.txt")}
    rsa = ["-newkey", "rsa:2048", "-nodes"]
    _run("openssl", "req", "-x509", *rsa, "-keyout", str(p["ca.key"]), "-out", str(p["ca.pem"]), "-days", "2",
         "-subj", "/CN=kprobe test CA")

    def sign(csr: Path, out: Path, serial: str) -> None:
        _run("openssl", "x509", "-req", "-in", str(csr), "-CA", str(p["ca.pem"]), "-CAkey", str(p["ca.key"]),
             "-set_serial", serial, "-out", str(out), "-days", "2")

    def openssl_files() -> None:  # Aiven's way: a client key and certificate, then openssl pkcs12 -export
        _run("openssl", "req", *rsa, "-keyout", str(p["client.key"]), "-out", str(p["client.csr"]),
             "-subj", "/CN=kprobe-openssl-client")
        sign(p["client.csr"], p["client.pem"], "1002")
        _run("openssl", "pkcs12", "-export", "-inkey", str(p["client.key"]), "-in", str(p["client.pem"]),
             "-certfile", str(p["ca.pem"]), "-name", "client", "-out", str(p["client.p12"]), "-passout",
             f"pass:{STORE_PW}")
        _run("openssl", "pkcs12", "-export", "-nokeys", "-in", str(p["ca.pem"]), "-out",
             str(p["openssl-truststore.p12"]), "-passout", f"pass:{TRUST_PW}")
        _run("openssl", "pkcs8", "-topk8", "-in", str(p["client.key"]), "-out", str(p["client.enc.pem"]),
             "-passout", f"pass:{KEY_PW}")

    p["Tools.java"].write_text(TOOLS)
    ks = ["-keystore", str(p["keystore.jks"]), "-storepass", STORE_PW]
    jceks = ["-keystore", str(p["store.jceks"]), "-storetype", "JCEKS", "-storepass", TRUST_PW]

    def import_ca(*store: str) -> list[str]:
        return ["-importcert", "-noprompt", "-trustcacerts", "-alias", "CARoot", "-file", str(p["ca.pem"]), *store]

    def genkeypair(cn: str, *store: str) -> list[str]:
        return ["-genkeypair", "-alias", "client", "-keyalg", "RSA", "-keysize", "2048", "-dname", f"CN={cn}",
                "-validity", "2", *store]

    with ThreadPoolExecutor(2) as pool:
        made_by_openssl = pool.submit(openssl_files)
        _keytool_jvm(
            p["Tools.java"],
            # MSK's guide: genkeypair, certreq, (the CA signs), import the CA, then the signed certificate
            genkeypair("kprobe-jks-client", "-storetype", "JKS", *ks, "-keypass", KEY_PW),
            ["-certreq", "-alias", "client", *ks, "-keypass", KEY_PW, "-file", str(p["jks-client.csr"])],
            import_ca(*ks),
            genkeypair("kprobe-jceks-client", *jceks, "-keypass", KEY_PW),  # a key entry and a trusted CA in JCEKS
            import_ca(*jceks),
            genkeypair("kprobe-p12-client", "-keystore", str(p["keystore.p12"]), "-storetype", "PKCS12",
                       "-storepass", STORE_PW),
            *(import_ca("-keystore", str(p[name]), "-storetype", store_type, "-storepass", TRUST_PW)
              for name, store_type in (("truststore.jks", "JKS"), ("truststore.p12", "PKCS12"))),
        )
        made_by_openssl.result()
    sign(p["jks-client.csr"], p["jks-client.pem"], "1001")
    p["random.bin"].write_bytes(bytes(range(7, 256)) * 8)

    # What the JDK trusts in each store, in the JVM that finishes the JKS keystore.
    oracle = ["oracle", str(p["oracle.txt"])]
    for name, store_type, password in (
        ("truststore.jks", "JKS", TRUST_PW), ("truststore.jks", "JKS", "-"), ("truststore.p12", "PKCS12", TRUST_PW),
        ("truststore.p12", "JKS", TRUST_PW), ("store.jceks", "JCEKS", TRUST_PW), ("keystore.jks", "JKS", STORE_PW),
        ("keystore.p12", "PKCS12", STORE_PW), ("client.p12", "PKCS12", STORE_PW),
        ("openssl-truststore.p12", "PKCS12", TRUST_PW), ("truststore.p12", "PKCS12", "-"),
    ):
        oracle += [store_type, str(p[name]), password]
    _keytool_jvm(p["Tools.java"],
                 ["-importcert", "-noprompt", "-alias", "client", "-file", str(p["jks-client.pem"]), *ks,
                  "-keypass", KEY_PW], oracle=oracle)
    return p


def java_trusts(stores: dict[str, Path], index: int) -> set[bytes]:
    """The DER of every certificate the JDK's TrustManager accepted for the oracle's index-th store."""
    line = stores["oracle.txt"].read_text().splitlines()[index]
    return {base64.b64decode(w) for w in line.split(" ")[1:]}


def error(fn, *args, **kwargs) -> str:
    """The StoreError's message, which must be one line and carry no password."""
    with pytest.raises(StoreError) as caught:
        fn(*args, **kwargs)
    message = str(caught.value)
    assert "\n" not in message
    assert not any(pw in message for pw in PASSWORDS), message
    return message


def assert_pair_usable(pair: KeyPair, chain: list[bytes], tmp_path: Path) -> None:
    """The chain read back is the one expected, the key is the leaf's, and Python's ssl takes both."""
    assert _ders(pair.certificate_chain_pem) == chain
    assert pair.private_key_pem.startswith("-----BEGIN PRIVATE KEY-----\n")
    key = serialization.load_pem_private_key(pair.private_key_pem.encode(), None)
    leaf = x509.load_der_x509_certificate(chain[0])
    assert key.public_key().public_numbers() == leaf.public_key().public_numbers()
    (tmp_path / "chain.pem").write_text(pair.certificate_chain_pem)
    (tmp_path / "key.pem").write_text(pair.private_key_pem)
    ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_cert_chain(tmp_path / "chain.pem", tmp_path / "key.pem")
    assert "PRIVATE" not in repr(pair) and "PRIVATE" not in str(pair)


# --- truststores: what Java trusts, to the byte ------------------------------------------------


def test_jks_truststore_is_the_imported_ca(stores):
    ca = _der(stores["ca.pem"])
    assert _ders(truststore_pem(str(stores["truststore.jks"]), "JKS", TRUST_PW)) == [ca]
    assert java_trusts(stores, 0) == {ca}


def test_jks_truststore_without_password_is_read_without_integrity_check_as_java_does(stores):
    assert _ders(truststore_pem(str(stores["truststore.jks"]), None, None)) == [_der(stores["ca.pem"])]
    assert java_trusts(stores, 1) == {_der(stores["ca.pem"])}


def test_pkcs12_truststore_and_the_jks_type_reading_it_by_content(stores):
    ca = _der(stores["ca.pem"])
    assert _ders(truststore_pem(str(stores["truststore.p12"]), "PKCS12", TRUST_PW)) == [ca]
    assert _ders(truststore_pem(str(stores["truststore.p12"]), "JKS", TRUST_PW)) == [ca]  # keystore.type.compat
    assert _ders(truststore_pem(str(stores["truststore.jks"]), "pkcs12", TRUST_PW)) == [ca]
    assert java_trusts(stores, 2) == java_trusts(stores, 3) == {ca}


@pytest.mark.parametrize(("index", "name", "store_type", "password"), [
    (4, "store.jceks", "JCEKS", TRUST_PW),  # trusted CA and the key entry's certificate
    (5, "keystore.jks", "JKS", STORE_PW),  # CA entry and the leaf of the key entry, not the CA in its chain twice
    (6, "keystore.p12", "PKCS12", STORE_PW),  # keytool's self-signed key entry
    (7, "client.p12", "PKCS12", STORE_PW),  # openssl's: the leaf only; the CA in the chain is not trusted
])
def test_key_entries_in_a_truststore_trust_their_leaf_as_java_does(stores, index, name, store_type, password):
    got = _ders(truststore_pem(str(stores[name]), store_type, password))
    assert len(got) == len(set(got))
    assert set(got) == java_trusts(stores, index)
    assert len(got) == {4: 2, 5: 2, 6: 1, 7: 1}[index]


def test_openssl_pkcs12_truststore_has_nothing_java_trusts(stores):
    assert java_trusts(stores, 8) == set()
    path = stores["openssl-truststore.p12"]
    assert error(truststore_pem, str(path), "PKCS12", TRUST_PW) == (
        f"ssl.truststore.location={path} (PKCS12): no trusted certificate in the store, so Java fails with "
        f'"the trustAnchors parameter must be non-empty": import the CA with keytool -importcert '
        f"(keytool marks it trusted; openssl pkcs12 -export does not)"
    )


def test_pkcs12_truststore_without_password(stores):
    assert java_trusts(stores, 9) == set()  # Java skips the encrypted certificates
    path = stores["truststore.p12"]
    assert error(truststore_pem, str(path), "PKCS12", None) == (
        f"ssl.truststore.location={path} (PKCS12): its certificates are encrypted and ssl.truststore.password "
        f"is not set, so Java trusts none of them: set ssl.truststore.password"
    )


def test_pem_truststores_file_and_inline(stores):
    ca = _der(stores["ca.pem"])
    text = stores["ca.pem"].read_text()
    assert _ders(truststore_pem(str(stores["ca.pem"]), "PEM", None)) == [ca]
    two = truststore_pem(None, "PEM", None, certificates="junk before\n" + text + stores["client.pem"].read_text())
    assert _ders(two) == [ca, _der(stores["client.pem"])]
    assert error(truststore_pem, None, "PEM", None, certificates="no certificate here") == (
        "ssl.truststore.certificates: no -----BEGIN CERTIFICATE----- block: paste the CA certificate(s)"
    )


# --- keystores: the client's chain and key ---------------------------------------------------


def test_jks_keystore_with_its_own_key_password(stores, tmp_path):
    pair = keystore_pair(str(stores["keystore.jks"]), "JKS", STORE_PW, KEY_PW)
    assert_pair_usable(pair, [_der(stores["jks-client.pem"]), _der(stores["ca.pem"])], tmp_path)
    # Without ssl.key.password Java uses the store password, which is not this key's.
    path = stores["keystore.jks"]
    assert error(keystore_pair, str(path), "JKS", STORE_PW, None) == (
        f"ssl.keystore.location={path} (JKS): Cannot recover key (Java's words) of entry 'client': check "
        f"ssl.key.password (Java uses ssl.keystore.password when it is not set)"
    )


def test_pkcs12_keystores_keytool_and_openssl(stores, tmp_path):
    pair = keystore_pair(str(stores["keystore.p12"]), "PKCS12", STORE_PW, None)
    leaf = java_trusts(stores, 6)  # keytool's self-signed certificate: the one Java trusts
    assert_pair_usable(pair, list(leaf), tmp_path)
    pair = keystore_pair(str(stores["client.p12"]), "JKS", STORE_PW, STORE_PW)  # JKS-typed PKCS12
    assert_pair_usable(pair, [_der(stores["client.pem"]), _der(stores["ca.pem"])], tmp_path)


def test_pem_keystores_inline_and_encrypted_key(stores, tmp_path):
    chain = [_der(stores["client.pem"]), _der(stores["ca.pem"])]
    chain_text = stores["client.pem"].read_text() + stores["ca.pem"].read_text()
    # openssl req writes PKCS#8 ("BEGIN PRIVATE KEY"): Kafka's inline form
    pair = keystore_pair(None, "PEM", None, None, chain=chain_text, key=stores["client.key"].read_text())
    assert_pair_usable(pair, chain, tmp_path)
    encrypted = stores["client.enc.pem"].read_text()
    assert encrypted.startswith("-----BEGIN ENCRYPTED PRIVATE KEY-----")
    pair = keystore_pair(None, "PEM", None, KEY_PW, chain=chain_text, key=encrypted)
    assert_pair_usable(pair, chain, tmp_path)
    combined = tmp_path / "keystore.pem"
    combined.write_text(encrypted + chain_text)
    assert_pair_usable(keystore_pair(str(combined), "PEM", None, KEY_PW), chain, tmp_path)
    assert error(keystore_pair, None, "PEM", None, None, chain=chain_text, key=encrypted) == (
        "ssl.keystore.key (PEM): the key is encrypted and ssl.key.password is not set: set it"
    )
    assert error(keystore_pair, str(combined), "PEM", None, STORE_PW) == (
        f"ssl.keystore.location={combined} (PEM): the encrypted key does not open with ssl.key.password: "
        f"check ssl.key.password"
    )


def test_jceks_key_entry_says_how_to_convert(stores):
    path = stores["store.jceks"]
    assert error(keystore_pair, str(path), "JCEKS", TRUST_PW, KEY_PW) == (
        f"ssl.keystore.location={path} (JCEKS): JCEKS private keys are not read; convert the store with "
        f"keytool -importkeystore -srckeystore {path} -srcstoretype JCEKS -destkeystore {path}.p12 "
        f"-deststoretype PKCS12"
    )


def test_a_truststore_is_no_keystore(stores):
    path = stores["truststore.jks"]
    assert error(keystore_pair, str(path), "JKS", TRUST_PW, None) == (
        f"ssl.keystore.location={path} (JKS): no private key entry, only trusted certificates (a truststore?): "
        f"point ssl.keystore.location at the store with the client's key"
    )


# --- what is wrong, in one line that names the property to fix --------------------------------


def test_wrong_passwords_in_javas_words(stores):
    jks, p12 = stores["truststore.jks"], stores["truststore.p12"]
    assert error(truststore_pem, str(jks), "JKS", STORE_PW) == (
        f"ssl.truststore.location={jks} (JKS): Keystore was tampered with, or password was incorrect "
        f"(Java's words): check ssl.truststore.password"
    )
    assert error(truststore_pem, str(p12), "PKCS12", STORE_PW) == (
        f"ssl.truststore.location={p12} (PKCS12): keystore password was incorrect (Java's words): "
        f"check ssl.truststore.password"
    )
    assert error(keystore_pair, str(stores["keystore.p12"]), "PKCS12", TRUST_PW, None).endswith(
        "(PKCS12): keystore password was incorrect (Java's words): check ssl.keystore.password"
    )


def test_tampered_jks_is_refused(stores, tmp_path):
    data = bytearray(stores["truststore.jks"].read_bytes())
    data[len(data) // 2] ^= 0x01  # inside the CA certificate's DER
    tampered = tmp_path / "tampered.jks"
    tampered.write_bytes(bytes(data))
    assert "Keystore was tampered with" in error(truststore_pem, str(tampered), "JKS", TRUST_PW)


def test_files_that_are_no_store(stores, tmp_path):
    random = stores["random.bin"]
    assert error(truststore_pem, str(random), "JKS", TRUST_PW) == (
        f"ssl.truststore.location={random}: not a key store (neither JKS, JCEKS, PKCS12 nor PEM by its content): "
        f"point ssl.truststore.location at the store"
    )
    missing = tmp_path / "nowhere.jks"
    assert error(truststore_pem, str(missing), "JKS", TRUST_PW) == (
        f"ssl.truststore.location={missing}: no such file: fix ssl.truststore.location"
    )
    assert error(keystore_pair, str(tmp_path), "PKCS12", STORE_PW, None).startswith(
        f"ssl.keystore.location={tmp_path}: cannot read it ("
    )


def test_types_java_would_not_open(stores):
    jceks, pem = stores["store.jceks"], stores["ca.pem"]
    assert error(truststore_pem, str(jceks), "JKS", TRUST_PW) == (
        f"ssl.truststore.location={jceks}: a JCEKS store, but ssl.truststore.type is JKS and Java's JKS type "
        f"does not open JCEKS files: set ssl.truststore.type=JCEKS"
    )
    assert error(truststore_pem, str(pem), None, None) == (
        f"ssl.truststore.location={pem}: a PEM store, but ssl.truststore.type is not set (Kafka's default: JKS) "
        f"and Java's JKS type does not open PEM files: set ssl.truststore.type=PEM"
    )
    assert error(keystore_pair, str(stores["keystore.jks"]), "JKS", None, KEY_PW) == (
        f"ssl.keystore.location={stores['keystore.jks']} (JKS): ssl.keystore.password is not set, and Kafka "
        f"needs it: set it"
    )
