"""The chart's Kafka connection in Strimzi's shape (kafka.authentication, kafka.tls): each
authentication type renders its JSON for the operator and mounts exactly the Secrets it names,
and what the operator makes of the rendered env and mounts is the librdkafka config
``ordo.connection`` gives for the same shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest

from ordo.connection import librdkafka_config
from ordo_operator.config import DEFAULT_SECRETS_DIR, OperatorConfig

from .chart import CHART, NAMESPACE, RELEASE, of_kind

CA = {"trustedCertificates": [{"secretName": "my-cluster-cluster-ca-cert", "certificate": "ca.crt"}]}
SECRETS: dict[str, dict[str, str]] = {  # what Strimzi's operators put in them
    "ordo": {"password": "s3cret", "sasl.jaas.config": "…", "user.crt": "CERT", "user.key": "KEY"},
    "my-cluster-cluster-ca-cert": {"ca.crt": "CA"},
    "sso": {"client-secret": "oauth-secret"},
}
PASSWORD = {"secretName": "ordo", "password": "password"}
USER_CERT = {"secretName": "ordo", "certificate": "user.crt", "key": "user.key"}
AUTHENTICATIONS: dict[str, tuple[dict[str, Any], dict[str, Any] | None, set[str]]] = {
    "scram-sha-512": (
        {"type": "scram-sha-512", "username": "ordo", "passwordSecret": PASSWORD},
        CA, {"ordo", "my-cluster-cluster-ca-cert"},
    ),
    "scram-sha-256 without TLS": (
        {"type": "scram-sha-256", "username": "ordo", "passwordSecret": PASSWORD},
        None, {"ordo"},
    ),
    "plain": (
        {"type": "plain", "username": "ordo", "passwordSecret": PASSWORD},
        CA, {"ordo", "my-cluster-cluster-ca-cert"},
    ),
    "tls": (
        {"type": "tls", "certificateAndKey": USER_CERT},
        CA, {"ordo", "my-cluster-cluster-ca-cert"},
    ),
    "oauth": (
        {"type": "oauth", "clientId": "ordo", "clientSecret": {"secretName": "sso", "key": "client-secret"},
         "tokenEndpointUri": "https://sso.example.com/token"},
        CA, {"sso", "my-cluster-cluster-ca-cert"},
    ),
}  # fmt: skip


def _operator_container(values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    import yaml

    with helm.Chart.load(CHART) as chart:
        chart.validate_schema(values)
        manifests = chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    objects = [
        d for t, text in manifests.items() if not t.endswith(".txt") for d in yaml.safe_load_all(text) if d
    ]
    pod = of_kind(objects, "Deployment")[0]["spec"]["template"]["spec"]
    return pod, pod["containers"][0]


@pytest.mark.parametrize("case", sorted(AUTHENTICATIONS))
def test_each_authentication_type_renders_its_json_and_mounts_its_secrets(case: str, tmp_path: Path) -> None:
    authentication, tls, secrets = AUTHENTICATIONS[case]
    kafka: dict[str, Any] = {"bootstrapServers": "k:9093", "authentication": authentication}
    if tls is not None:
        kafka["tls"] = tls
    pod, container = _operator_container({"kafka": kafka})
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert json.loads(env["ORDO_KAFKA_AUTHENTICATION"]) == authentication
    assert (json.loads(env["ORDO_KAFKA_TLS"]) if "ORDO_KAFKA_TLS" in env else None) == tls
    mounts = {m["name"]: m for m in container["volumeMounts"] if m["name"].startswith("kafka-secret-")}
    volumes = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    assert set(volumes.values()) == secrets and volumes.keys() == mounts.keys()
    for name, mount in mounts.items():
        assert mount == {
            "name": name,
            "mountPath": f"{DEFAULT_SECRETS_DIR}/{volumes[name]}",
            "readOnly": True,
        }
    assert not any("secretKeyRef" in str(e) for e in container["env"]), "no credential in the env"

    # the operator, given that env and those Secrets mounted where the chart mounts them
    for secret in secrets:
        for key, value in SECRETS[secret].items():
            (tmp_path / secret).mkdir(exist_ok=True)
            (tmp_path / secret / key).write_text(value)
    config = OperatorConfig.from_env({**{k: v for k, v in env.items() if v is not None},
                                      "ORDO_KAFKA_SECRETS_DIR": str(tmp_path)})  # fmt: skip
    assert config.kafka_config() == librdkafka_config("k:9093", authentication, tls, secrets=SECRETS.get)


def test_without_authentication_nothing_is_mounted() -> None:
    pod, container = _operator_container({"kafka": {"bootstrapServers": "k:9092"}})
    assert [v["name"] for v in pod["volumes"]] == ["tmp"]
    assert not {"ORDO_KAFKA_AUTHENTICATION", "ORDO_KAFKA_TLS"} & {e["name"] for e in container["env"]}


@pytest.mark.parametrize(
    "kafka",
    [
        {"authentication": {"type": "scram-sha-1", "username": "u"}},
        {"authentication": {"type": "scram-sha-512", "username": "u"}},  # no passwordSecret
        {"authentication": {"type": "tls"}},  # no certificateAndKey
        {"authentication": {"username": "u", "passwordSecret": {"secretName": "u", "password": "password"}}},
        {"authentication": {"type": "plain", "username": "u", "password": "inline"}},
        {"tls": {"trustedCertificates": [{"secretName": "c"}]}},  # which key
        {"tls": {"trustedCertificates": [{"secretName": "Not_A_Name", "certificate": "ca.crt"}]}},
    ],
)
def test_the_values_schema_refuses_a_bad_shape(kafka: dict[str, Any]) -> None:
    with helm.Chart.load(CHART) as chart, pytest.raises(helm.HelmValuesError):
        chart.validate_schema({"kafka": kafka})


def test_the_operator_refuses_a_bad_default_at_start_naming_the_chart_value(tmp_path: Path) -> None:
    from ordo.connection import InvalidConnectionError

    with pytest.raises(InvalidConnectionError, match=r"chart values kafka\.authentication, kafka\.tls"):
        OperatorConfig.from_env({"ORDO_KAFKA_AUTHENTICATION": '{"type": "scram-sha-512"}'})
    config = OperatorConfig.from_env(
        {"ORDO_KAFKA_BOOTSTRAP": "k:9093", "ORDO_KAFKA_SECRETS_DIR": str(tmp_path),
         "ORDO_KAFKA_AUTHENTICATION": json.dumps(AUTHENTICATIONS["scram-sha-512"][0])}
    )  # fmt: skip
    with pytest.raises(
        InvalidConnectionError, match=r"kafka\.authentication\.passwordSecret: Secret 'ordo' not found"
    ):
        config.kafka_config()
