"""The configuration users already have: Java and librdkafka files, JAAS, kcat's file.

Pure tests of kprobe.clientprops on files made here, plus the CLI's handling of them where no broker is
needed (a bootstrap nobody listens on: the run fails fast, and what matters is what was read). The
Java client's agreement on the same files is tests/runs/test_probe_agreement.py's (real brokers); the
java.util.Properties syntax against the JDK is tests/clientprops/test_javaprops.py's; the stores are
tests/clientprops/test_keystores.py's.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
from pathlib import Path

import pytest
from cli_runner import run_cli

from kprobe.clientprops.jaas import parse_jaas
from kprobe.clientprops.load import kcat_config_file, load
from kprobe.errors import UsageError
from kprobe.kafka.security import security_from
from kprobe.options import probe_options

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


def write(tmp_path: Path, text: str, name: str = "client.properties") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# -- JAAS, as Kafka's JaasConfig (java.io.StreamTokenizer) reads it ---------------------------------------

@pytest.mark.parametrize(("text", "options"), [
    (f'{PLAIN} required username="alice" password="a b;c";', {"username": "alice", "password": "a b;c"}),
    (f"{SCRAM} required username='bob' password='p\"q';", {"username": "bob", "password": 'p"q'}),
    (f'{PLAIN} required username=alice password="x\\"y\\\\z\\n";', {"username": "alice", "password": 'x"y\\z\n'}),
    (f'{PLAIN} required /* who */ username="u" // the user\n password="p";', {"username": "u", "password": "p"}),
    (f'{OAUTH} required;', {}),
    (f'{PLAIN} REQUIRED username="u";', {"username": "u"}),
    (f'{PLAIN} required username=al-ice_$1.x password="\\101";', {"username": "al-ice_$1.x", "password": "A"}),
])
def test_jaas_options(text, options):
    module = parse_jaas(text)
    assert (module.flag, module.options) == ("required", options)
    assert module.simple_name == text.split()[0].rsplit(".", 1)[1]
    assert "a b;c" not in repr(module)


@pytest.mark.parametrize(("text", "says"), [
    ("", "it is empty"),
    (f'{PLAIN} username="u";', "control flag"),
    (f'{PLAIN} required username="u" password="p"', "must end with ';'"),
    (f'{PLAIN} required lifetime=3600;', "the value of lifetime is missing or unquoted"),
    (f'{PLAIN} required username "u";', "option username has no '='"),
    (f'{PLAIN} required password="unclosed;', "not closed"),
    (f'{PLAIN} required; {SCRAM} required;', "more than one login module"),
])
def test_jaas_refused_in_one_line_without_the_value(text, says):
    with pytest.raises(UsageError, match=says) as caught:
        parse_jaas(text, source="client.properties")
    assert "unclosed" not in str(caught.value) and "\n" not in str(caught.value)
    assert "client.properties" in str(caught.value)


@pytest.mark.parametrize(("options", "says"), [
    ("username=app password=correct horse battery staple;",
     'the value of option password has spaces or characters a bare word cannot hold: quote it, write password="..."'),
    ("username=app password=correct!horse;",
     'the value of option password has spaces or characters a bare word cannot hold: quote it, write password="..."'),
    ('username="app" password "correct horse";',
     "what follows option username's value is not an option: write options as key=\"value\", separated by spaces"),
])
def test_an_unquoted_value_with_spaces_names_its_option_and_never_a_word_of_it(options, says):
    """The words after an unquoted value's first are more of it, most likely a password's: no message quotes one."""
    with pytest.raises(UsageError) as caught:
        parse_jaas(f"{PLAIN} required {options}", source="client.properties")
    assert str(caught.value) == f"bad sasl.jaas.config in client.properties: {says}"
    for word in ("correct", "horse", "battery", "staple"):
        assert word not in str(caught.value)


def test_a_few_control_characters_in_keys_are_warned_about_more_are_not_text(tmp_path, caplog):
    """A stray control character in a key is a key kprobe does not know; past three such lines, not a text file."""
    odd = "".join(f"x{chr(c)}y=1\n" for c in (1, 2, 27))
    with caplog.at_level(logging.WARNING, logger="kprobe.clientprops"):
        client = load([write(tmp_path, f"security.protocol=PLAINTEXT\n#\x04 a comment\n{odd}")])
    assert len(client.warnings) == 3 and client.props["security.protocol"] == "PLAINTEXT"
    path = write(tmp_path, f"security.protocol=PLAINTEXT\n{odd}x\x7fy=1\n")
    with pytest.raises(UsageError) as caught:
        load([path])
    assert str(caught.value) == (f"cannot read -F {path}: keys with control characters on more than 3 lines, so it is "
                                 "not a text file (a key store or another binary file?): give the properties file "
                                 "itself")
    (tmp_path / "nul.properties").write_bytes(b"security.protocol=PLAINTEXT\nsasl.password=a\0b\n")
    with pytest.raises(UsageError, match="it holds NUL bytes, so it is not a text file"):
        load([str(tmp_path / "nul.properties")])


# -- Java client properties translated -------------------------------------------------------------------

def test_confluent_cloud_file_is_read_whole(tmp_path, caplog):
    """The file Confluent Cloud hands out: continued JAAS line, common keys, Schema Registry keys."""
    path = write(tmp_path, (
        "# Required connection configs for Kafka producer, consumer, and admin\n"
        "bootstrap.servers=pkc-abc12.us-west-2.aws.confluent.cloud:9092\n"
        "security.protocol=SASL_SSL\n"
        f"sasl.jaas.config={PLAIN} required \\\n"
        "    username='KEY123' \\\n    password='s3cr\\\\et';\n"
        "sasl.mechanism=PLAIN\n"
        "# Best practice for higher availability in Apache Kafka clients prior to 3.0\n"
        "session.timeout.ms=45000\n"
        "client.dns.lookup=use_all_dns_ips\n"
        "schema.registry.url=https://psrc-1.us-east-2.aws.confluent.cloud\n"
        "basic.auth.credentials.source=USER_INFO\n"
        "basic.auth.user.info=SRKEY:srsecret\n"))
    with caplog.at_level(logging.WARNING, logger="kprobe.clientprops"):
        client = load([path])
    assert client.props == {
        "bootstrap.servers": "pkc-abc12.us-west-2.aws.confluent.cloud:9092", "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN", "client.dns.lookup": "use_all_dns_ips", "sasl.username": "KEY123",
        "sasl.password": "s3cret"}  # the file's `\\\\e` is JAAS's `\\e`, whose quoted escape is `e`
    assert client.bootstrap == "pkc-abc12.us-west-2.aws.confluent.cloud:9092"
    assert client.notes == (f"read {path} as Java client properties",)
    # Every key kprobe leaves out is named, one line each, and none shows a value.
    named = {line.split(": ")[1].split()[0] for line in client.warnings}
    assert named == {"session.timeout.ms", "schema.registry.url", "basic.auth.credentials.source",
                     "basic.auth.user.info"}
    assert [r.getMessage() for r in caplog.records] == list(client.warnings)
    assert not any("srsecret" in line or "s3cr" in line for line in client.warnings)


def test_scram_oauth_msk_and_kerberos_logins(tmp_path):
    def java(text: str) -> dict[str, str]:
        return load([write(tmp_path, text)]).props

    assert java(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                f'sasl.jaas.config={SCRAM} required username="u" password="p";\n') == {
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "u",
        "sasl.password": "p"}
    unsecured = java(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\nsasl.jaas.config={OAUTH} "
                     "required unsecuredLoginStringClaim_sub=\"alice\" unsecuredLoginListClaim_scope=\",read,write\" "
                     "unsecuredLoginExtension_traceId=\"t1\" unsecuredLoginLifetimeSeconds=\"600\";\n")
    assert unsecured["enable.sasl.oauthbearer.unsecure.jwt"] == "true"
    assert unsecured["sasl.oauthbearer.config"] == "principal=alice scope=read,write lifeSeconds=600 extension_traceId=t1"
    oidc = java("security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\n"
                "sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer."
                "OAuthBearerLoginCallbackHandler\nsasl.oauthbearer.token.endpoint.url=https://idp.example/token\n"
                f"sasl.jaas.config={OAUTH} required clientId=\"app\" clientSecret=\"shh\" scope=\"kafka\" "
                "extension_logicalCluster=\"lkc-1\";\n")
    assert {k: v for k, v in oidc.items() if k.startswith("sasl.oauthbearer")} == {
        "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token", "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": "app", "sasl.oauthbearer.client.secret": "shh",
        "sasl.oauthbearer.scope": "kafka", "sasl.oauthbearer.extensions": "logicalCluster=lkc-1"}
    assert security_from(oidc).oauth is not None and security_from(oidc).oauth.method == "oidc"
    msk = java("security.protocol=SASL_SSL\nsasl.mechanism=AWS_MSK_IAM\nsasl.client.callback.handler.class="
               "software.amazon.msk.auth.iam.IAMClientCallbackHandler\nsasl.jaas.config=software.amazon.msk.auth.iam."
               "IAMLoginModule required awsProfileName=\"prod\" awsRoleArn=\"arn:aws:iam::1:role/r\";\n")
    assert (msk["sasl.mechanism"], msk["aws.profile"], msk["aws.role.arn"]) == ("AWS_MSK_IAM", "prod",
                                                                                "arn:aws:iam::1:role/r")
    # MSK IAM through the OAUTHBEARER handler, as AWS's newer guides write it
    via_oauth = java("security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\nsasl.login.callback.handler.class="
                     "software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler\n"
                     f"sasl.jaas.config={OAUTH} required;\n")
    assert via_oauth["sasl.mechanism"] == "AWS_MSK_IAM"
    kerberos = java("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\nsasl.kerberos.service.name=kafka\n"
                    "sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true "
                    "keyTab=\"/etc/app.keytab\" principal=\"app@EXAMPLE.COM\";\n")
    assert (kerberos["sasl.kerberos.keytab"], kerberos["sasl.kerberos.principal"]) == ("/etc/app.keytab",
                                                                                      "app@EXAMPLE.COM")


@pytest.mark.parametrize(("text", "says"), [
    ("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\nssl.truststore.type=PEM\n",
     "no sasl.jaas.config, so a Java client has no credentials"),
    (f'security.protocol=SASL_SSL\nsasl.jaas.config={PLAIN} required username="u" password="p";\n',
     "sets no sasl.mechanism, so a Java client uses GSSAPI .* set sasl.mechanism=PLAIN"),
    ("client.dns.lookup=default\nsasl.jaas.config=x required;\n", "removed in Kafka 3.0"),
    (f"security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\nsasl.jaas.config={OAUTH} required;\n",
     "needs unsecuredLoginStringClaim_sub"),
])
def test_java_configurations_a_java_client_refuses(tmp_path, text, says):
    with pytest.raises(UsageError, match=says) as caught:
        load([write(tmp_path, text)])
    assert "\n" not in str(caught.value)


def test_empty_endpoint_identification_turns_the_name_check_off(tmp_path):
    props = load([write(tmp_path, "security.protocol=SSL\nssl.endpoint.identification.algorithm=\n"
                                  "ssl.truststore.type=PEM\nssl.truststore.certificates=\n")]).props
    assert props["ssl.endpoint.identification.algorithm"] == "none"
    security = security_from(props)
    assert (security.ssl_verify, security.ssl_verify_hostname) == (True, False)


# -- dialects, misspellings, -X ----------------------------------------------------------------------------

def test_each_family_read_in_its_own_syntax(tmp_path):
    """A librdkafka file keeps a backslash (kcat's reading); a Java file unescapes it (Properties')."""
    rd = load([write(tmp_path, "sasl.username=u\nsasl.password=a\\b\n", "rd.conf")])
    assert rd.props == {"sasl.username": "u", "sasl.password": "a\\b"}
    assert rd.notes[0].endswith("as librdkafka properties")
    java = load([write(tmp_path, f"sasl.mechanism=PLAIN\nsecurity.protocol=SASL_SSL\nsasl.jaas.config={PLAIN} "
                                 "required username=\"u\" password=\"a\\b\";\n", "java.properties")])
    assert java.props["sasl.password"] == "ab"


def test_unused_keys_named_with_the_nearest_known_one(tmp_path):
    client = load([write(tmp_path, "sasl.mechansim=PLAIN\nsasl.username=u\nsasl.password=p\nssl.ca.locaton=/x\n"
                                   "ssl.truststore.location=/t.jks\nlinger.ms=5\n", "rd.conf")],
                  ["security.protocol=SASL_SSL", "sasl.jaas.config=x required;"])
    assert client.warnings == (
        "rd.conf: ssl.truststore.location is a Java client setting, which librdkafka refuses, so kprobe leaves it "
        "out: use ssl.ca.location, or give a Java file whole",
        "rd.conf: sasl.mechansim is not a setting kprobe knows: did you mean sasl.mechanism?",
        "rd.conf: ssl.ca.locaton is not a setting kprobe knows: did you mean ssl.ca.location?",
        "rd.conf: linger.ms is not used by kprobe's own client (its librdkafka clients, as in --roundtrip, get it as "
        "given)",
        "-X sasl.jaas.config is a Java client setting, which librdkafka refuses: give it in a Java properties file "
        "(--command-config FILE), or use librdkafka's sasl.username and sasl.password")
    assert "ssl.truststore.location" not in client.props and "sasl.jaas.config" not in client.props
    assert client.given["sasl.jaas.config"] == "x required;"  # the report shows it, redacted
    java = load([write(tmp_path, f"sasl.mechanism=PLAIN\nsecurity.protocol=SASL_SSL\nsasl.jaas.config={PLAIN} "
                                 "required username=\"u\" password=\"p\";\nssl.truststore.locaton=/t\n"
                                 "ssl.ca.location=/ca.pem\n")])
    assert java.warnings == (
        "client.properties: ssl.truststore.locaton is not a setting kprobe knows: did you mean "
        "ssl.truststore.location?",
        "client.properties: ssl.ca.location is a librdkafka setting, which a Java client ignores, and so does "
        "kprobe in a Java properties file: use ssl.truststore.location")
    assert "ssl.ca.location" not in java.props


def test_bootstrap_from_the_file_when_no_b(tmp_path):
    path = write(tmp_path, "bootstrap.servers=kafka1:9093,kafka2:9093\nsecurity.protocol=SSL\n"
                           "ssl.truststore.type=PEM\nssl.truststore.location=\n")
    options = probe_options(bootstrap=[], prop_files=[path])
    assert [b.hostport for b in options.bootstraps] == ["kafka1:9093", "kafka2:9093"]
    assert "bootstrap.servers" not in options.props  # each run decides where its clients start
    assert options.given_props is not None and options.given_props["bootstrap.servers"] == "kafka1:9093,kafka2:9093"
    assert [b.hostport for b in probe_options(bootstrap=["other:9092"], prop_files=[path]).bootstraps] == [
        "other:9092"]
    legacy = write(tmp_path, "metadata.broker.list=old:9092\n", "kcat.conf")
    assert [b.hostport for b in probe_options(bootstrap=[], prop_files=[legacy]).bootstraps] == ["old:9092"]


def test_credentials_are_known_by_the_key_they_were_given_under(tmp_path):
    """Where the username and password came from, for AUTH_FAILED's fix: a Java file's sasl.jaas.config, or
    librdkafka's own keys from a librdkafka file or -X (the later wins, as for the values)."""
    java = write(tmp_path, f'security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config={PLAIN} '
                           'required username="app" password="Zx9-secret";\n', "java.properties")
    librdkafka = write(tmp_path, "security.protocol=SASL_PLAINTEXT\nsasl.username=app\nsasl.password=Zx9-secret\n",
                       "librdkafka.conf")
    jaas = {"sasl.username": "sasl.jaas.config", "sasl.password": "sasl.jaas.config"}
    assert load([java]).credentials == jaas
    assert load([librdkafka]).credentials == {"sasl.username": "sasl.username", "sasl.password": "sasl.password"}
    assert load([java], ["sasl.password=other"]).credentials == {**jaas, "sasl.password": "sasl.password"}
    assert load([], ["sasl.username=app"]).credentials == {"sasl.username": "sasl.username"}
    assert probe_options(bootstrap=["127.0.0.1:1"], prop_files=[java]).credentials == jaas
    assert probe_options(bootstrap=["127.0.0.1:1"], kcat_default=False).credentials == {}
    assert "Zx9-secret" not in repr(load([java]))


# -- kcat's own file, and the CLI -------------------------------------------------------------------------

def run_kprobe(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """kprobe's entry point in this process, in that environment, as a child would run (tests/support/cli_runner.py)."""
    return run_cli(args, env=env)


def test_kcat_file_read_when_no_F(tmp_path):
    home = tmp_path / "home"
    (home / ".config").mkdir(parents=True)
    conf = home / ".config" / "kcat.conf"
    # Port 1 on loopback: nothing listens, the run fails at once; the report says what was read.
    conf.write_text("bootstrap.servers=127.0.0.1:1\nsecurity.protocol=PLAINTEXT\nsocket.keepalive.enable=true\n")
    env = {k: v for k, v in os.environ.items() if k not in ("KCAT_CONFIG", "KPROBE_CONFIG")}
    assert kcat_config_file({"HOME": str(home)}) == conf
    done = run_kprobe("probe", "--json", "-v", "--timeout", "1", env={**env, "HOME": str(home)})
    report = json.loads(done.stdout)
    assert (done.returncode, [b["address"] for b in report["bootstraps"]]) == (3, ["127.0.0.1:1"])
    assert f"read {conf} as librdkafka properties (kcat's configuration file; no -F given)" in done.stderr
    assert "kcat.conf: socket.keepalive.enable is not used by kprobe's own client" in done.stderr
    # $KCAT_CONFIG wins, and must name a file, as kcat insists
    other = write(tmp_path, "bootstrap.servers=127.0.0.1:2\n", "other.conf")
    done = run_kprobe("probe", "--json", "--timeout", "1", env={**env, "HOME": str(home), "KCAT_CONFIG": other})
    assert [b["address"] for b in json.loads(done.stdout)["bootstraps"]] == ["127.0.0.1:2"]
    done = run_kprobe("probe", "--timeout", "1", env={**env, "KCAT_CONFIG": str(tmp_path / "missing.conf")})
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1 and "KCAT_CONFIG names" in done.stderr
    # -F (or --command-config) replaces kcat's file, as in kcat
    done = run_kprobe("probe", "--json", "--timeout", "1", "--command-config", other, env={**env, "HOME": str(home)})
    assert [b["address"] for b in json.loads(done.stdout)["bootstraps"]] == ["127.0.0.1:2"]


def test_command_config_report_shows_the_file_redacted(tmp_path):
    path = write(tmp_path, f"bootstrap.servers=127.0.0.1:1\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                           f"sasl.jaas.config={PLAIN} required username=\"app\" password=\"Zx9-secret\";\n")
    env = {k: v for k, v in os.environ.items() if k not in ("KCAT_CONFIG", "KPROBE_CONFIG")}
    done = run_kprobe("probe", "--command-config", path, "--json", "-v", "--timeout", "1", env=env)
    report = json.loads(done.stdout)
    assert report["settings"]["properties"]["sasl.jaas.config"] == "[redacted]"
    assert report["settings"]["properties"]["sasl.mechanism"] == "PLAIN"
    assert "Zx9-secret" not in done.stdout + done.stderr


def test_an_endless_file_is_refused_not_read(tmp_path):
    """`-F /dev/zero`, or a truststore that is a device, is bounded: one line, exit 2, no memory spent on it."""
    env = {k: v for k, v in os.environ.items() if k not in ("KCAT_CONFIG", "KPROBE_CONFIG")}
    done = run_kprobe("probe", "-b", "127.0.0.1:1", "-F", "/dev/zero", "--timeout", "1", env=env)
    assert (done.returncode, done.stderr) == (2, "kprobe: error: cannot read -F /dev/zero: more than 1 MiB, too big "
                                                 "for a client properties file: give the properties file itself\n")
    path = write(tmp_path, "security.protocol=SSL\nssl.truststore.location=/dev/zero\nssl.truststore.type=JKS\n")
    with pytest.raises(UsageError) as caught:
        load([path])
    assert str(caught.value) == ("client.properties: ssl.truststore.location=/dev/zero: more than 16 MiB, too big for a "
                                 "key store: fix ssl.truststore.location")
