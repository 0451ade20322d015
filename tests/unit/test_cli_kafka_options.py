"""The ``ordo`` commands' Kafka options: ``--bootstrap``, ``-X`` and ``--command-config`` as kcat
and Kafka's tools take them, and ``ORDO_KAFKA_BOOTSTRAP`` (``KAFKA_BOOTSTRAP`` deprecated)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ordo.cli import CliError, build_parser
from ordo.cli.kafka_options import kafka_settings
from ordo_testbed.bench.eos import client_configs

COMMANDS = [["status"], ["verify", "--topic", "t"], ["bench", "eos"]]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_every_command_takes_x_options_over_a_command_config(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ORDO_KAFKA_BOOTSTRAP", raising=False)
    monkeypatch.delenv("KAFKA_BOOTSTRAP", raising=False)
    properties = tmp_path / "client.properties"
    properties.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="ordo" password="s3cret";\n'
    )
    argv = [*command, "--bootstrap", "k:9093", "--command-config", str(properties),
            "-X", "sasl.mechanism=SCRAM-SHA-256", "-X", "client.id=me"]  # fmt: skip
    args = build_parser().parse_args(argv)
    assert kafka_settings(args) == {
        "bootstrap.servers": "k:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-256",  # -X over the file
        "sasl.username": "ordo",
        "sasl.password": "s3cret",
        "client.id": "me",
    }


def test_the_bootstrap_comes_from_ordo_kafka_bootstrap_and_the_old_name_warns(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args = build_parser().parse_args(["verify", "--topic", "t"])
    monkeypatch.delenv("KAFKA_BOOTSTRAP", raising=False)
    monkeypatch.setenv("ORDO_KAFKA_BOOTSTRAP", "new:9092")
    assert kafka_settings(args) == {"bootstrap.servers": "new:9092"}
    monkeypatch.delenv("ORDO_KAFKA_BOOTSTRAP")
    monkeypatch.setenv("KAFKA_BOOTSTRAP", "old:9092")
    assert kafka_settings(args) == {"bootstrap.servers": "old:9092"}
    assert "ordo: KAFKA_BOOTSTRAP is deprecated: set ORDO_KAFKA_BOOTSTRAP instead" in capsys.readouterr().err
    monkeypatch.delenv("KAFKA_BOOTSTRAP")
    assert kafka_settings(args) is None


def test_bad_options_are_one_clear_error(tmp_path: Path) -> None:
    parser = build_parser()
    with pytest.raises(CliError, match=r"-X: expected key=value, got 'sasl.mechanism'"):
        kafka_settings(parser.parse_args(["status", "-X", "sasl.mechanism"]))
    with pytest.raises(CliError, match=r"--command-config: cannot read .*absent.properties"):
        kafka_settings(parser.parse_args(["status", "--command-config", str(tmp_path / "absent.properties")]))
    jks = tmp_path / "jks.properties"
    jks.write_text("ssl.truststore.location=/etc/kafka/truststore.jks\n")
    with pytest.raises(CliError, match=r"JKS store, which librdkafka cannot read; give the CA's PEM file"):
        kafka_settings(parser.parse_args(["status", "--bootstrap", "k:1", "--command-config", str(jks)]))


def test_bench_eos_gives_the_shared_settings_to_both_sides_under_their_own(tmp_path: Path) -> None:
    args = build_parser().parse_args(
        ["bench", "eos", "-X", "security.protocol=SSL", "-X", "client.id=both",
         "--producer-props", "client.id=producer"]
    )  # fmt: skip
    configs = client_configs(args, "k:9093", "run")
    assert configs.producer["security.protocol"] == configs.consumer["security.protocol"] == "SSL"
    assert (configs.producer["client.id"], configs.consumer["client.id"]) == ("producer", "both")
