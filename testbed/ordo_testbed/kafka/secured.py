"""A broker with secured listeners, as a Strimzi cluster offers them: ``SCRAM`` (SASL_SSL with
SCRAM-SHA-512) and ``MTLS`` (SSL, a client certificate required), beside the plain ``BROKER``
listener the harness itself uses. Its CA, broker and client certificates are made here (the
testbed's :class:`~ordo_testbed.kube.pki.Pki`), its SCRAM user with Kafka's admin API
(AlterUserScramCredentials, KIP-554), and it hands out the Secrets Strimzi would make for them:
a KafkaUser's (``password``, ``sasl.jaas.config``; ``user.crt``, ``user.key``) and the cluster
CA's (``ca.crt``)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from ordo_testbed.kafka.broker import BROKER_SETTINGS, HOST, KafkaBroker, free_port
from ordo_testbed.kube.pki import Pki

__all__ = ["SCRAM_USER", "TLS_USER", "SecuredKafka"]

SCRAM_USER = "ordo"
TLS_USER = "ordo-tls"


class SecuredKafka(KafkaBroker):
    """One KRaft node whose clients reach it through ``scram_bootstrap`` or ``tls_bootstrap``
    (:attr:`direct_bootstrap` stays plain, for the harness's own admin calls)."""

    def __init__(self, folder: Path | None = None) -> None:
        self._owned_folder = None if folder is not None else tempfile.mkdtemp(prefix="ordo-secured-kafka-")
        self.folder = folder or Path(self._owned_folder or "")
        self.pki = Pki(self.folder / "pki")
        self.password = "scram-secret-of-the-testbed"
        self.scram_port = self.tls_port = 0
        super().__init__(self.folder / "broker")

    @property
    def scram_bootstrap(self) -> str:
        return f"{HOST}:{self.scram_port}"

    @property
    def tls_bootstrap(self) -> str:
        return f"{HOST}:{self.tls_port}"

    def settings(self, advertised: str, voters: str) -> dict[str, str]:
        self.scram_port, self.tls_port = free_port(), free_port()  # with the other ports, per start
        plain = super().settings(advertised, voters)
        secured = f"SCRAM://{HOST}:{self.scram_port},MTLS://{HOST}:{self.tls_port}"
        return {
            **plain,
            "listeners": f"{plain['listeners']},{secured}",
            "advertised.listeners": f"{plain['advertised.listeners']},{secured}",
            "listener.security.protocol.map": f"{BROKER_SETTINGS['listener.security.protocol.map']},"
            "SCRAM:SASL_SSL,MTLS:SSL",
            "listener.name.scram.sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.scram.scram-sha-512.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "listener.name.mtls.ssl.client.auth": "required",
            # PEM stores (KIP-651): the key and its certificate in one file, the CA in another
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.pki.path("broker.pem")),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.pki.path("ca.crt")),
        }  # fmt: skip

    def start(
        self, advertised: str | None = None, ready: Callable[[], bool] | None = None, timeout: float = 90.0
    ) -> SecuredKafka:
        """Certificates (made once per folder), the broker alone (``advertised`` and ``ready`` as
        :meth:`KafkaBroker.start`), then its SCRAM user."""
        self.pki.ensure()
        broker_pem = self.pki.path("broker.pem")
        if not broker_pem.exists():
            broker_pem.write_bytes(
                self.pki.path("server.key").read_bytes() + self.pki.path("server.crt").read_bytes()
            )
        self.pki.client(TLS_USER, TLS_USER)
        super().start(advertised, ready, timeout)
        admin = AdminClient({"bootstrap.servers": self.direct_bootstrap})
        upsert = UserScramCredentialUpsertion(
            SCRAM_USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), self.password.encode()
        )
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(30)
        return self

    def __enter__(self) -> SecuredKafka:
        return self.start()

    def stop(self, timeout: float = 30.0) -> None:
        super().stop(timeout)
        if self._owned_folder is not None:
            shutil.rmtree(self._owned_folder, ignore_errors=True)

    # -- what Strimzi would put in Secrets ----------------------------------------------------

    def cluster_ca_secret(self) -> dict[str, str]:
        """``<cluster>-cluster-ca-cert``'s data (Strimzi adds ``ca.p12`` and ``ca.password``)."""
        return {"ca.crt": self.pki.path("ca.crt").read_text(), "ca.password": "unused-here"}

    def scram_user_secret(self) -> dict[str, str]:
        """A KafkaUser's Secret with ``authentication: {type: scram-sha-512}``."""
        jaas = (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{SCRAM_USER}" password="{self.password}";'
        )
        return {"password": self.password, "sasl.jaas.config": jaas}

    def tls_user_secret(self) -> dict[str, str]:
        """A KafkaUser's Secret with ``authentication: {type: tls}`` (Strimzi adds ``user.p12``)."""
        return {
            "ca.crt": self.pki.path("ca.crt").read_text(),
            "user.crt": self.pki.path(f"{TLS_USER}.crt").read_text(),
            "user.key": self.pki.path(f"{TLS_USER}.key").read_text(),
        }

    def secrets(self) -> Mapping[str, Mapping[str, str]]:
        """The three Secrets by the names the tests give them."""
        return {
            "ordo-cluster-ca-cert": self.cluster_ca_secret(),
            SCRAM_USER: self.scram_user_secret(),
            TLS_USER: self.tls_user_secret(),
        }
