"""ordo.connection: Strimzi's connection shape into librdkafka settings, and the command's options."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from ordo.api import KafkaConnection
from ordo.connection import (
    InvalidConnectionError,
    bootstrap_from_env,
    command_config,
    connection_config,
    librdkafka_config,
    mounted_secrets,
    parse_properties,
    secrets_needed,
    x_options,
)

# A Strimzi KafkaUser's Secret (scram-sha-512 and tls users have these keys) and a cluster CA Secret
USER = {
    "password": "s3cret",
    "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="ordo" '
    'password="s3cret";',
    "user.crt": "-----BEGIN CERTIFICATE-----\nUSER\n-----END CERTIFICATE-----\n",
    "user.key": "-----BEGIN PRIVATE KEY-----\nKEY\n-----END PRIVATE KEY-----\n",
}
CA = {"ca.crt": "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n", "ca.password": "x"}
SECRETS = {"ordo": USER, "my-cluster-cluster-ca-cert": CA}
SCRAM = {
    "type": "scram-sha-512",
    "username": "ordo",
    "passwordSecret": {"secretName": "ordo", "password": "password"},
}
TLS = {"trustedCertificates": [{"secretName": "my-cluster-cluster-ca-cert", "certificate": "ca.crt"}]}


def read(name: str) -> dict[str, str] | None:
    return SECRETS.get(name)


def test_scram_over_tls_from_strimzi_secrets() -> None:
    assert librdkafka_config("k:9093", SCRAM, TLS, secrets=read) == {
        "bootstrap.servers": "k:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "ordo",
        "sasl.password": "s3cret",
        "ssl.ca.pem": CA["ca.crt"].strip(),
    }


@pytest.mark.parametrize(
    ("kind", "mechanism"),
    [("scram-sha-512", "SCRAM-SHA-512"), ("scram-sha-256", "SCRAM-SHA-256"), ("plain", "PLAIN")],
)
def test_each_sasl_type_without_tls(kind: str, mechanism: str) -> None:
    config = librdkafka_config("k:9092", {**SCRAM, "type": kind}, secrets=read)
    assert (config["security.protocol"], config["sasl.mechanism"]) == ("SASL_PLAINTEXT", mechanism)


def test_mutual_tls_from_a_strimzi_tls_user() -> None:
    auth = {
        "type": "tls",
        "certificateAndKey": {"secretName": "ordo", "certificate": "user.crt", "key": "user.key"},
    }
    config = librdkafka_config("k:9093", auth, TLS, secrets=read)
    assert config["security.protocol"] == "SSL"
    assert (config["ssl.certificate.pem"], config["ssl.key.pem"]) == (USER["user.crt"], USER["user.key"])
    assert "sasl.mechanism" not in config


def test_oauth_client_credentials() -> None:
    auth = {"type": "oauth", "clientId": "ordo", "clientSecret": {"secretName": "ordo", "key": "password"},
            "tokenEndpointUri": "https://sso/token", "scope": "kafka"}  # fmt: skip
    config = librdkafka_config("k:9093", auth, TLS, secrets=read)
    assert config["sasl.mechanism"] == "OAUTHBEARER" and config["sasl.oauthbearer.method"] == "oidc"
    assert config["sasl.oauthbearer.client.secret"] == "s3cret"
    assert config["sasl.oauthbearer.token.endpoint.url"] == "https://sso/token"
    assert config["sasl.oauthbearer.scope"] == "kafka"


def test_several_trusted_certificates_are_one_pem_bundle_and_none_means_the_systems() -> None:
    two = {
        "trustedCertificates": [
            *TLS["trustedCertificates"],
            {"secretName": "ordo", "certificate": "user.crt"},
        ]
    }
    bundle = librdkafka_config("k:9093", tls=two, secrets=read)["ssl.ca.pem"]
    assert bundle.count("BEGIN CERTIFICATE") == 2
    assert librdkafka_config("k:9093", tls={}) == {"bootstrap.servers": "k:9093", "security.protocol": "SSL"}
    assert librdkafka_config("k:9092") == {"bootstrap.servers": "k:9092"}  # the raw options may say


def test_raw_options_add_but_may_not_contradict() -> None:
    config = librdkafka_config(
        "k:9093", SCRAM, TLS, {"client.id": "me", "sasl.mechanism": "SCRAM-SHA-512"}, secrets=read
    )
    assert config["client.id"] == "me"
    with pytest.raises(
        InvalidConnectionError, match=r"kafka: the raw options set security\.protocol otherwise"
    ):
        librdkafka_config("k:9093", SCRAM, TLS, {"security.protocol": "SASL_PLAINTEXT"}, secrets=read)
    with pytest.raises(InvalidConnectionError) as raised:
        librdkafka_config("k:9093", SCRAM, TLS, {"sasl.password": "planted-pw"}, secrets=read)
    assert "planted-pw" not in str(raised.value) and "s3cret" not in str(raised.value), (
        "no credential in messages"
    )


@pytest.mark.parametrize(
    ("auth", "tls", "secrets", "message"),
    [
        (SCRAM, None, {}, r"kafka\.authentication\.passwordSecret: Secret 'ordo' not found"),
        ({**SCRAM, "passwordSecret": {"secretName": "ordo", "password": "pw"}}, None, SECRETS,
         r"kafka\.authentication\.passwordSecret: Secret 'ordo' has no key 'pw' \(its keys: password, "),
        (None, TLS, {}, r"kafka\.tls\.trustedCertificates\[0\]: Secret 'my-cluster-cluster-ca-cert' "),
        ({"type": "scram-sha-512", "username": "ordo"}, None, SECRETS, r"needs username and passwordSecret"),
        ({"type": "tls"}, TLS, SECRETS, r"needs certificateAndKey: \{secretName, certificate, key\}"),
        ({"type": "tls", "certificateAndKey": {"secretName": "o", "certificate": "c", "key": "k"}}, None, {},
         r"kafka\.authentication: type tls needs kafka\.tls"),
        ({"type": "oauth", "clientId": "x"}, None, SECRETS, r"oauth needs clientId, clientSecret"),
        ({"type": "scram-sha-1"}, None, SECRETS, r"kafka\.authentication\.type: Input should be"),
        ({**SCRAM, "password": "inline"}, None, SECRETS, r"kafka\.authentication\.password: Extra inputs"),
    ],
)  # fmt: skip
def test_bad_input_names_what_to_fix(
    auth: dict[str, Any] | None, tls: dict[str, Any] | None, secrets: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidConnectionError, match=message):
        librdkafka_config("k:9093", auth, tls, secrets=secrets.get)


def test_a_resources_connection_with_its_escape_hatch_secret() -> None:
    raw = {"raw": {"ssl.ca.pem": "PEM", "sasl.username": "u", "sasl.password": "p"}}
    connection = KafkaConnection.model_validate(
        {"bootstrapServers": "k:9093", "secretRef": {"name": "raw"},
         "config": {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}}
    )  # fmt: skip
    config = connection_config(connection, raw.get)
    assert config["sasl.password"] == "p" and config["security.protocol"] == "SASL_SSL"
    strimzi = KafkaConnection.model_validate({"bootstrapServers": "k:9093", "secretRef": {"name": "ordo"}})
    with pytest.raises(InvalidConnectionError) as raised:
        connection_config(strimzi, read)
    message = str(raised.value)
    assert message.startswith(
        "spec.kafka.secretRef: Secret 'ordo' has keys password, sasl.jaas.config, user.crt"
    )
    assert "passwordSecret: {secretName: ordo, password: password}" in message
    assert "certificateAndKey: {secretName: ordo, certificate: user.crt" in message


def test_secrets_needed_lists_what_to_mount() -> None:
    connection = KafkaConnection.model_validate(
        {"bootstrapServers": "k:9093", "authentication": SCRAM, "tls": TLS}
    )
    assert secrets_needed(connection.authentication, connection.tls) == [
        ("my-cluster-cluster-ca-cert", "ca.crt"),
        ("ordo", "password"),
    ]


def test_mounted_secrets_read_a_secret_volume(tmp_path: Path) -> None:
    folder = tmp_path / "ordo"
    (folder / "..2026_01_01").mkdir(parents=True)
    (folder / "password").write_text("s3cret")
    (folder / "..data").symlink_to(folder / "..2026_01_01")
    reader = mounted_secrets(tmp_path)
    assert reader("ordo") == {"password": "s3cret"}
    assert reader("absent") is None
    assert librdkafka_config("k:9092", SCRAM, secrets=reader)["sasl.password"] == "s3cret"


def test_command_config_takes_a_kafka_tools_properties_file() -> None:
    text = """
# Kafka's tools' client.properties
security.protocol=SASL_SSL
sasl.mechanism = SCRAM-SHA-512
sasl.jaas.config=o.a.k.c.s.scram.ScramLoginModule required username="ordo" password="s3\\\\"cr=et";
ssl.truststore.type=PEM
ssl.truststore.location=/etc/ca.crt
! another comment
client.id: tools
"""
    assert command_config(text) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "ordo",
        "sasl.password": 's3"cr=et',
        "ssl.ca.location": "/etc/ca.crt",
        "client.id": "tools",
    }
    plain = 'sasl.jaas.config=o.a.k.c.s.plain.PlainLoginModule required username="a" password="b";'
    assert command_config(plain)["sasl.mechanism"] == "PLAIN"
    with pytest.raises(
        InvalidConnectionError, match=r"ssl\.truststore\.location is a JKS store.*ssl\.ca\.location"
    ):
        command_config("ssl.truststore.location=/etc/truststore.jks")
    with pytest.raises(InvalidConnectionError, match=r"ssl\.keystore\.password is a Java client setting"):
        command_config("ssl.keystore.password=x")
    # Java reads \" in a properties file as ": the JAAS entry it leaves is refused, not half read
    with pytest.raises(InvalidConnectionError, match=r'cannot be read as a JAAS entry.*as \\\\"'):
        command_config('sasl.jaas.config=S.ScramLoginModule required username="a" password="s3\\"c";')


def test_command_config_takes_a_jaas_config_continued_over_lines_as_in_kafkas_docs() -> None:
    text = """security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-256
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\
    username="alice" \\
    password="alice-secret";
client.id=after-the-continuation
"""
    assert command_config(text) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
        "client.id": "after-the-continuation",
    }
    # line numbers in errors count the continued lines
    with pytest.raises(InvalidConnectionError, match=r"c.properties:5: expected key=value, got 'novalue'"):
        parse_properties("a=1 \\\n  2\nb=\\\n\nnovalue\n", "c.properties")


def test_a_properties_file_reads_as_kafkas_tools_read_it() -> None:
    text = "# SASL\n! also a comment\n\nsecurity.protocol=SASL_SSL\nsasl.mechanism: SCRAM-SHA-512\n"
    text += "sasl.username alice\n  ssl.ca.location = /etc/ca.pem  \nsasl.password=a=b\n"
    assert parse_properties(text, "c.properties") == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "ssl.ca.location": "/etc/ca.pem",
        "sasl.password": "a=b",
    }
    with pytest.raises(InvalidConnectionError, match=r"c.properties:2: expected key=value"):
        parse_properties("a=1\nnovalue\n", "c.properties")
    assert parse_properties("a=1,\\\n  2\nkey\\ with\\:escapes = \\u00e9\n") == {
        "a": "1,2",
        "key with:escapes": "é",
    }
    with pytest.raises(InvalidConnectionError, match=r"c.properties:2: Invalid \\u escape"):
        parse_properties("a=1\nb=\\u12\n", "c.properties")


def test_props_are_key_value_pairs() -> None:
    assert x_options(["linger.ms=10", "client.id = x"], "--producer-props") == {
        "linger.ms": "10",
        "client.id": "x",
    }
    with pytest.raises(InvalidConnectionError, match=r"--consumer-props: expected key=value, got 'fetch.min"):
        x_options(["fetch.min.bytes"], "--consumer-props")


def test_x_options_are_kcats() -> None:
    assert x_options(["security.protocol=SSL", "ssl.ca.location=/x=y"]) == {
        "security.protocol": "SSL",
        "ssl.ca.location": "/x=y",
    }
    with pytest.raises(InvalidConnectionError, match=r"-X: expected key=value, got 'security.protocol'"):
        x_options(["security.protocol"])


def test_one_environment_name_for_the_bootstrap() -> None:
    assert bootstrap_from_env({"ORDO_KAFKA_BOOTSTRAP": "a:1", "KAFKA_BOOTSTRAP": "b:2"}) == "a:1"
    with pytest.warns(FutureWarning, match="KAFKA_BOOTSTRAP is deprecated: set ORDO_KAFKA_BOOTSTRAP instead"):
        assert bootstrap_from_env({"KAFKA_BOOTSTRAP": "b:2"}) == "b:2"
    assert bootstrap_from_env({}) is None


def test_a_properties_file_without_the_cli_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "javaproperties", None)  # what an install without [cli] has
    with pytest.raises(ImportError, match=r"reading c.properties needs javaproperties.*ordo-kafka\[cli\]"):
        parse_properties("a=1\n", "c.properties")
