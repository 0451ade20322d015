"""The Kafka connection of ordo's resources, in the shape Strimzi's clients take (KafkaConnect,
KafkaBridge, KafkaMirrorMaker2): ``bootstrapServers``, ``authentication``, ``tls`` and ``config``.
A Strimzi KafkaUser Secret and ``<cluster>-cluster-ca-cert`` are referenced as they are.
:mod:`ordo.connection` turns it into librdkafka settings."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from .common import Model, Validation

__all__ = [
    "AUTHENTICATION_TYPES",
    "BOOTSTRAP_PATTERN",
    "CertSecretSource",
    "CertificateAndKey",
    "GenericSecretSource",
    "KafkaAuthentication",
    "KafkaConnection",
    "KafkaTls",
    "KafkaTopicRef",
    "PasswordSecret",
    "SecretRef",
]

BOOTSTRAP_PATTERN = r"^[A-Za-z0-9.\[\]:_-]+:[0-9]{1,5}(,[A-Za-z0-9.\[\]:_-]+:[0-9]{1,5})*$"
DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
SECRET_KEY_PATTERN = r"^[-._a-zA-Z0-9]+$"  # what Kubernetes allows as a key of a Secret's data
AUTHENTICATION_TYPES = ("scram-sha-512", "scram-sha-256", "plain", "tls", "oauth")
# librdkafka options that carry credentials: they belong in a Secret, never in a CR.
SECRET_OPTION_MARKERS = ("password", "secret", "sasl.username", "ssl.key.pem", "ssl.keystore", "token")

# Each rule once, for the API server (CEL) and for the model (the SDK and the operator).
NEEDS_PASSWORD = Validation(
    rule="!(self.type in ['scram-sha-512', 'scram-sha-256', 'plain']) "
    "|| (has(self.username) && has(self.passwordSecret))",
    message="authentication of type scram-sha-512, scram-sha-256 or plain needs username and "
    "passwordSecret: {secretName, password} (a Strimzi KafkaUser's Secret: password: password)",
)
NEEDS_CERTIFICATE = Validation(
    rule="self.type != 'tls' || has(self.certificateAndKey)",
    message="authentication of type tls needs certificateAndKey: {secretName, certificate, key} "
    "(a Strimzi KafkaUser's Secret: certificate: user.crt, key: user.key)",
)
NEEDS_OAUTH_CLIENT = Validation(
    rule="self.type != 'oauth' "
    "|| (has(self.clientId) && has(self.clientSecret) && has(self.tokenEndpointUri))",
    message="authentication of type oauth needs clientId, clientSecret: {secretName, key} "
    "and tokenEndpointUri",
)
TLS_AUTHENTICATION_NEEDS_TLS = Validation(
    rule="!has(self.authentication) || self.authentication.type != 'tls' || has(self.tls)",
    message="authentication of type tls needs tls (a TLS listener): tls: {trustedCertificates: "
    "[{secretName: <cluster>-cluster-ca-cert, certificate: ca.crt}]}",
)


class PasswordSecret(Model):
    """Strimzi's PasswordSecretSource."""

    secret_name: str = Field(
        pattern=DNS_SUBDOMAIN_PATTERN, max_length=253, description="Secret in the resource's namespace."
    )
    password: str = Field(
        pattern=SECRET_KEY_PATTERN,
        description="The key holding the password (Strimzi's KafkaUser: password).",
    )


class CertificateAndKey(Model):
    """Strimzi's CertAndKeySecretSource: a client certificate and its key, PEM."""

    secret_name: str = Field(
        pattern=DNS_SUBDOMAIN_PATTERN, max_length=253, description="Secret in the resource's namespace."
    )
    certificate: str = Field(
        pattern=SECRET_KEY_PATTERN, description="The key holding the certificate (Strimzi: user.crt)."
    )
    key: str = Field(
        pattern=SECRET_KEY_PATTERN, description="The key holding the private key (Strimzi: user.key)."
    )


class CertSecretSource(Model):
    """Strimzi's CertSecretSource: a certificate to trust, PEM."""

    secret_name: str = Field(
        pattern=DNS_SUBDOMAIN_PATTERN,
        max_length=253,
        description="Secret in the resource's namespace (Strimzi: <cluster>-cluster-ca-cert).",
    )
    certificate: str = Field(
        pattern=SECRET_KEY_PATTERN, description="The key holding the certificate (Strimzi: ca.crt)."
    )


class GenericSecretSource(Model):
    """Strimzi's GenericSecretSource: one key of a Secret."""

    secret_name: str = Field(
        pattern=DNS_SUBDOMAIN_PATTERN, max_length=253, description="Secret in the resource's namespace."
    )
    key: str = Field(pattern=SECRET_KEY_PATTERN, description="The key holding the value.")


class KafkaAuthentication(Model):
    """How ordo authenticates, as Strimzi's ``authentication`` of a Kafka client."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                v.as_schema() for v in (NEEDS_PASSWORD, NEEDS_CERTIFICATE, NEEDS_OAUTH_CLIENT)
            ]
        }
    )

    type: Literal["scram-sha-512", "scram-sha-256", "plain", "tls", "oauth"] = Field(
        description="scram-sha-512, scram-sha-256 or plain (SASL with username and passwordSecret), "
        "tls (a client certificate: certificateAndKey) or oauth (OAUTHBEARER, OIDC client credentials)."
    )
    username: str | None = Field(
        default=None, min_length=1, description="SASL user name (Strimzi: the KafkaUser's name)."
    )
    password_secret: PasswordSecret | None = Field(default=None, description="Where the SASL password is.")
    certificate_and_key: CertificateAndKey | None = Field(
        default=None, description="Where the client certificate and key are (type tls)."
    )
    client_id: str | None = Field(default=None, min_length=1, description="OAuth client id (type oauth).")
    client_secret: GenericSecretSource | None = Field(
        default=None, description="Where the OAuth client secret is (type oauth)."
    )
    token_endpoint_uri: str | None = Field(
        default=None, min_length=1, description="The OAuth token endpoint (type oauth)."
    )
    scope: str | None = Field(default=None, description="OAuth scope to ask for (type oauth).")

    @model_validator(mode="after")
    def _complete(self) -> KafkaAuthentication:
        if self.type in ("scram-sha-512", "scram-sha-256", "plain") and (
            self.username is None or self.password_secret is None
        ):
            raise ValueError(NEEDS_PASSWORD.message)
        if self.type == "tls" and self.certificate_and_key is None:
            raise ValueError(NEEDS_CERTIFICATE.message)
        if self.type == "oauth" and None in (self.client_id, self.client_secret, self.token_endpoint_uri):
            raise ValueError(NEEDS_OAUTH_CLIENT.message)
        return self


class KafkaTls(Model):
    """Strimzi's ClientTls: connect over TLS, trusting these certificates (none: the system's)."""

    trusted_certificates: list[CertSecretSource] = Field(
        default_factory=list,
        description="Certificates to trust, e.g. "
        "[{secretName: <cluster>-cluster-ca-cert, certificate: ca.crt}].",
    )


class SecretRef(Model):
    name: str = Field(
        pattern=DNS_SUBDOMAIN_PATTERN,
        max_length=253,
        description="Secret in the resource's namespace whose keys are librdkafka options "
        "(e.g. sasl.username, sasl.password, ssl.ca.pem), merged over `config`. For a Strimzi "
        "KafkaUser's Secret use `authentication` instead.",
    )


class KafkaTopicRef(Model):
    """A Strimzi KafkaTopic that manages the topic: after creating partitions the operator raises
    its ``spec.partitions`` to the new count, so Strimzi's topic operator stays Ready instead of
    refusing a count below the topic's ("Number of partitions cannot be decreased")."""

    name: str = Field(
        pattern=DNS_SUBDOMAIN_PATTERN, max_length=253, description="The KafkaTopic's metadata.name."
    )
    namespace: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        max_length=63,
        description="The KafkaTopic's namespace (default: the resource's own).",
    )


class KafkaConnection(Model):
    """How the operator reaches Kafka: Strimzi's client shape. Credentials come only from Secrets."""

    model_config = ConfigDict(
        json_schema_extra={"x-kubernetes-validations": [TLS_AUTHENTICATION_NEEDS_TLS.as_schema()]}
    )

    bootstrap_servers: str = Field(
        pattern=BOOTSTRAP_PATTERN, description="Comma-separated host:port list of Kafka brokers."
    )
    authentication: KafkaAuthentication | None = Field(
        default=None, description="SASL or client-certificate authentication (none: the listener needs none)."
    )
    tls: KafkaTls | None = Field(default=None, description="Connect over TLS (none: plain TCP).")
    config: dict[str, str] = Field(
        default_factory=dict,
        description="More librdkafka options, none of them secret and none that authentication or "
        "tls decide, e.g. client.id, socket.timeout.ms.",
    )
    secret_ref: SecretRef | None = Field(
        default=None,
        description="Escape hatch: a Secret whose keys are librdkafka options (credentials, TLS).",
    )

    @field_validator("config")
    @classmethod
    def _no_credentials(cls, value: dict[str, str]) -> dict[str, str]:
        leaked = sorted(k for k in value if any(marker in k for marker in SECRET_OPTION_MARKERS))
        if leaked:
            raise ValueError(
                "credentials must come from a Secret (authentication, or secretRef), not config: "
                + ", ".join(leaked)
            )
        return value

    @model_validator(mode="after")
    def _tls_for_certificates(self) -> KafkaConnection:
        if self.authentication is not None and self.authentication.type == "tls" and self.tls is None:
            raise ValueError(TLS_AUTHENTICATION_NEEDS_TLS.message)
        return self
