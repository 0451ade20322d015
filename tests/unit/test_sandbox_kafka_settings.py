"""The sandbox's connection handed to its programs: a file only its owner reads, never argv."""

from __future__ import annotations

import argparse
import json
import stat
from pathlib import Path

import pytest

from ordo_sandbox.kafka_settings import add_kafka_arguments, environment, settings_from, write_settings

SECRET = {"bootstrap.servers": "k:9093", "security.protocol": "SASL_SSL", "sasl.password": "s3cret"}


def _parse(argv: list[str]) -> dict[str, str]:
    parser = argparse.ArgumentParser(prog="program")
    add_kafka_arguments(parser)
    return settings_from(parser.parse_args(argv), parser)


def test_the_settings_file_is_the_owners_alone_and_read_back_whole(tmp_path: Path) -> None:
    path = tmp_path / "kafka.json"
    path.write_text("{}")
    path.chmod(0o644)  # an existing file is narrowed too
    write_settings(SECRET, path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert _parse(["--kafka-config", str(path)]) == SECRET
    # --bootstrap over the file's (a producer through a fault proxy), the rest kept
    assert _parse(["--kafka-config", str(path), "--bootstrap", "proxy:1"]) == {
        **SECRET,
        "bootstrap.servers": "proxy:1",
    }
    assert _parse(["--bootstrap", "k:9092"]) == {"bootstrap.servers": "k:9092"}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "No such file"),
        ("not json", "--kafka-config"),
        ('{"linger.ms": 5}', "expected a JSON object of librdkafka settings"),
        ('{"security.protocol": "SSL"}', "give --bootstrap, or --kafka-config with bootstrap.servers"),
    ],
)
def test_a_bad_kafka_config_is_a_usage_error_naming_it(
    content: str | None, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "kafka.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(SystemExit):
        _parse(["--kafka-config", str(path)])
    assert message in capsys.readouterr().err


def test_the_environment_for_the_operator_and_spark() -> None:
    env = environment(SECRET)
    assert env["ORDO_KAFKA_BOOTSTRAP"] == "k:9093"
    assert json.loads(env["ORDO_KAFKA_OPTIONS"]) == {
        "security.protocol": "SASL_SSL",
        "sasl.password": "s3cret",
    }
    assert environment({"bootstrap.servers": "k:9092"}) == {"ORDO_KAFKA_BOOTSTRAP": "k:9092"}
