"""The API server refuses a Kafka connection in Strimzi's shape that lacks what its type needs,
with the CEL rules' messages (the models give the same ones: tests/unit/test_connection.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ordo_testbed.kube.fixtures import Kube, kubectl

pytestmark = pytest.mark.usefixtures("kube_server")


def _expansion(name: str, kafka: dict[str, Any]) -> str:
    spec = {"topic": "orders", "partitions": 8, "kafka": kafka}
    return json.dumps(
        {
            "apiVersion": "ordo.dev/v1alpha1",
            "kind": "OrderedTopicExpansion",
            "metadata": {"name": name},
            "spec": spec,
        }
    )


@pytest.mark.parametrize(
    ("kafka", "message"),
    [
        ({"authentication": {"type": "scram-sha-512", "username": "ordo"}},
         "authentication of type scram-sha-512, scram-sha-256 or plain needs username and passwordSecret"),
        ({"authentication": {"type": "tls"}, "tls": {}},
         "authentication of type tls needs certificateAndKey: {secretName, certificate, key}"),
        ({"authentication": {"type": "oauth", "clientId": "ordo"}},
         "authentication of type oauth needs clientId, clientSecret: {secretName, key} and tokenEndpointUri"),
        ({"authentication": {"type": "tls",
                             "certificateAndKey": {"secretName": "u", "certificate": "c", "key": "k"}}},
         "authentication of type tls needs tls (a TLS listener)"),
        ({"authentication": {"type": "gssapi"}}, 'Unsupported value: "gssapi"'),
    ],
)  # fmt: skip
def test_a_connection_missing_what_its_type_needs_is_refused(
    kube: Kube, kafka: dict[str, Any], message: str
) -> None:
    refused = kubectl(
        kube, "apply", "-f", "-", stdin=_expansion("refused", {"bootstrapServers": "k:9093", **kafka})
    )
    assert refused.returncode != 0 and message in refused.stderr, refused.stderr


def test_a_strimzi_shaped_connection_is_accepted(kube: Kube) -> None:
    kafka = {
        "bootstrapServers": "my-cluster-kafka-bootstrap.kafka:9093",
        "authentication": {"type": "scram-sha-512", "username": "ordo",
                           "passwordSecret": {"secretName": "ordo", "password": "password"}},
        "tls": {"trustedCertificates": [{"secretName": "c-cluster-ca-cert", "certificate": "ca.crt"}]},
    }  # fmt: skip
    done = kubectl(kube, "apply", "--dry-run=server", "-f", "-", stdin=_expansion("accepted", kafka))
    assert done.returncode == 0, done.stderr
