"""What the Spark jobs read from their pod: Kafka settings from the ``ORDO_KAFKA_*`` variables the
operator reads too (the Secret ordo-spark-kafka; Strimzi's shape through ``ordo.connection``),
never from what the kubelet injects, and source options from ``--option``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ordo.connection import InvalidConnectionError
from ordo_spark.apps import job_parser, kafka_config_from_env

# what the kubelet injects into every pod of a namespace holding a Service named kafka (and one
# named ordo-kafka), and the names the jobs read before
KUBELET = {
    "KAFKA_PORT": "tcp://10.0.0.12:9092",
    "KAFKA_PORT_9092_TCP_ADDR": "10.0.0.12",
    "KAFKA_SERVICE_HOST": "10.0.0.12",
    "KAFKA_SERVICE_PORT": "9092",
    "ORDO_KAFKA_PORT": "tcp://10.0.0.13:9092",
    "ORDO_KAFKA_SERVICE_HOST": "10.0.0.13",
    "KAFKA_BOOTSTRAP": "elsewhere:9092",
    "KAFKA_BOOTSTRAP_SERVERS": "elsewhere:9092",
}


def test_only_ordos_variables_are_read() -> None:
    env = {**KUBELET, "ORDO_KAFKA_BOOTSTRAP": "kafka.kafka:9092"}
    assert kafka_config_from_env(env) == {"bootstrap.servers": "kafka.kafka:9092"}
    assert kafka_config_from_env(env, bootstrap="other:9092") == {"bootstrap.servers": "other:9092"}
    with pytest.raises(InvalidConnectionError, match="no bootstrap servers"):
        kafka_config_from_env(KUBELET)


def test_strimzi_shaped_credentials_from_mounted_secrets(tmp_path: Path) -> None:
    """A KafkaUser's Secret and the cluster CA's, mounted one folder each, as Strimzi makes them."""
    (tmp_path / "spark").mkdir()
    (tmp_path / "spark" / "password").write_text("s3cret")
    (tmp_path / "my-cluster-cluster-ca-cert").mkdir()
    (tmp_path / "my-cluster-cluster-ca-cert" / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\nX\n")
    env = {
        "ORDO_KAFKA_BOOTSTRAP": "my-cluster-kafka-bootstrap:9093",
        "ORDO_KAFKA_AUTHENTICATION": json.dumps({
            "type": "scram-sha-512", "username": "spark",
            "passwordSecret": {"secretName": "spark", "password": "password"},
        }),
        "ORDO_KAFKA_TLS": json.dumps(
            {"trustedCertificates": [{"secretName": "my-cluster-cluster-ca-cert", "certificate": "ca.crt"}]}
        ),
        "ORDO_KAFKA_SECRETS_DIR": str(tmp_path),
    }  # fmt: skip
    config = kafka_config_from_env(env)
    assert config["security.protocol"] == "SASL_SSL" and config["sasl.mechanism"] == "SCRAM-SHA-512"
    assert config["sasl.username"] == "spark" and config["sasl.password"] == "s3cret"
    assert "BEGIN CERTIFICATE" in config["ssl.ca.pem"]
    with pytest.raises(
        InvalidConnectionError, match=r"kafka\.tls\.trustedCertificates\[0\]: Secret .* not found"
    ):
        kafka_config_from_env({**env, "ORDO_KAFKA_SECRETS_DIR": str(tmp_path / "elsewhere")})


def test_options_are_a_json_object_of_librdkafka_settings() -> None:
    env = {
        "ORDO_KAFKA_BOOTSTRAP": "kafka:9093",
        "ORDO_KAFKA_OPTIONS": '{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", '
        '"sasl.username": "spark", "sasl.password": "s3cret", "enable.ssl.certificate.verification": true, '
        '"socket.timeout.ms": 30000}',
    }
    assert kafka_config_from_env(env) == {
        "bootstrap.servers": "kafka:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "spark",
        "sasl.password": "s3cret",
        "enable.ssl.certificate.verification": "true",
        "socket.timeout.ms": "30000",
    }
    assert kafka_config_from_env({"ORDO_KAFKA_OPTIONS": '{"bootstrap.servers": "a:1"}'}) == {
        "bootstrap.servers": "a:1"
    }


@pytest.mark.parametrize(
    ("env", "complaint"),
    [
        ({"ORDO_KAFKA_OPTIONS": "security.protocol=SSL"}, "ORDO_KAFKA_OPTIONS is not JSON"),
        ({"ORDO_KAFKA_OPTIONS": '["SSL"]'}, "ORDO_KAFKA_OPTIONS must be a JSON object"),
        ({"ORDO_KAFKA_OPTIONS": '{"sasl": {"password": "x"}}'}, "ORDO_KAFKA_OPTIONS must map"),
        ({"ORDO_KAFKA_BOOTSTRAP": "a:1", "ORDO_KAFKA_TLS": "{"}, "ORDO_KAFKA_TLS is not JSON"),
        (
            {"ORDO_KAFKA_BOOTSTRAP": "a:1", "ORDO_KAFKA_AUTHENTICATION": '{"type": "kerberos"}'},
            "authentication",
        ),
        (
            {"ORDO_KAFKA_BOOTSTRAP": "a:1", "ORDO_KAFKA_OPTIONS": '{"bootstrap.servers": "b:2"}'},
            "bootstrap.servers",
        ),
    ],
)
def test_a_wrong_value_names_its_variable(env: dict[str, str], complaint: str) -> None:
    with pytest.raises(InvalidConnectionError, match=complaint):
        kafka_config_from_env(env)


def test_source_options_are_repeatable_name_value_pairs() -> None:
    parser = job_parser("job.py")
    args = parser.parse_args(["--checkpoint=/c", "--option=maxTasks=8", "--option", "kafka.client.id=a=b"])
    assert args.options == [("maxTasks", "8"), ("kafka.client.id", "a=b")]
    with pytest.raises(SystemExit):
        parser.parse_args(["--checkpoint=/c", "--option=maxTasks"])
