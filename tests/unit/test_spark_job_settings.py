"""What the Spark jobs read from their pod: Kafka settings from exactly ``ORDO_KAFKA_BOOTSTRAP`` and
``ORDO_KAFKA_OPTIONS`` (the Secret ordo-spark-kafka), never from what the kubelet injects, and
source options from ``--option``."""

from __future__ import annotations

import pytest

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


def test_only_the_two_variables_are_read() -> None:
    env = {**KUBELET, "ORDO_KAFKA_BOOTSTRAP": "kafka.kafka:9092"}
    assert kafka_config_from_env(env) == {"bootstrap.servers": "kafka.kafka:9092"}
    assert kafka_config_from_env(KUBELET) == {}


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
        ({"ORDO_KAFKA_OPTIONS": '["SSL"]'}, "must be a JSON object"),
        ({"ORDO_KAFKA_OPTIONS": '{"sasl": {"password": "x"}}'}, "must be a JSON object"),
        (
            {"ORDO_KAFKA_BOOTSTRAP": "a:1", "ORDO_KAFKA_OPTIONS": '{"bootstrap.servers": "b:2"}'},
            "differ",
        ),
    ],
)
def test_a_wrong_value_names_its_variable(env: dict[str, str], complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        kafka_config_from_env(env)


def test_source_options_are_repeatable_name_value_pairs() -> None:
    parser = job_parser("job.py")
    args = parser.parse_args(["--checkpoint=/c", "--option=maxTasks=8", "--option", "kafka.client.id=a=b"])
    assert args.options == [("maxTasks", "8"), ("kafka.client.id", "a=b")]
    with pytest.raises(SystemExit):
        parser.parse_args(["--checkpoint=/c", "--option=maxTasks"])
