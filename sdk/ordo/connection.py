"""One Kafka connection shape, Strimzi's, turned into librdkafka settings: the only place that does.

The operator (a resource's ``spec.kafka``, and its own default from the chart), the ``ordo``
command and the Spark apps all build their client settings here, so a Strimzi KafkaUser Secret
(keys ``password``, ``sasl.jaas.config``, ``user.crt``, ``user.key``) and the cluster CA Secret
``<cluster>-cluster-ca-cert`` (key ``ca.crt``) work as they are, wherever they are read.

The API (pure, apart from the two readers at the end that touch files and the environment):

``librdkafka_config(bootstrap, authentication=None, tls=None, options=None, *, secrets=NO_SECRETS,
where="kafka") -> dict[str, str]``
    librdkafka settings for a connection. ``authentication`` and ``tls`` are
    :class:`~ordo.api.KafkaAuthentication` / :class:`~ordo.api.KafkaTls` or their camelCase dicts
    (``{"type": "scram-sha-512", "username": "u", "passwordSecret": {"secretName": "u",
    "password": "password"}}``, ``{"trustedCertificates": [{"secretName": "c-cluster-ca-cert",
    "certificate": "ca.crt"}]}``). ``secrets(name)`` returns a Secret's data (decoded text) or None
    when there is no such Secret; passwords and PEMs are taken from it and passed inline
    (``sasl.password``, ``ssl.ca.pem``, ``ssl.certificate.pem``, ``ssl.key.pem``). ``options``:
    raw librdkafka options, the escape hatch; they may add to what the shape decides, not
    contradict it. ``where`` prefixes field names in error messages (``spec.kafka``).
``connection_config(connection: KafkaConnection, secrets, where="spec.kafka") -> dict[str, str]``
    The same for a resource's ``spec.kafka`` (its ``secretRef`` Secret's keys are raw options).
``mounted_secrets(root) -> SecretReader``
    Secrets mounted as volumes, one folder each: ``<root>/<secretName>/<key>`` (the chart mounts
    the operator's at ``/etc/ordo/kafka-secrets``; a Spark pod can mount them the same way).
``secret_options(name, data, where) -> dict[str, str]``
    A Secret whose keys are librdkafka options (the escape hatch); a Strimzi-shaped Secret there is
    refused with the fields to use instead.
``parse_properties(text) -> dict[str, str]``, ``command_config(text) -> dict[str, str]``,
``x_options(["k=v", ...]) -> dict[str, str]``
    The ``ordo`` command's ``--command-config FILE`` (a Java properties file, as Kafka's tools take:
    librdkafka options, and Java's ``sasl.jaas.config`` and PEM ``ssl.truststore.location``
    translated) and ``-X key=value`` (as kcat's).
``bootstrap_from_env(env=os.environ) -> str | None``
    ``ORDO_KAFKA_BOOTSTRAP``, the one name for the bootstrap everywhere; the old
    ``KAFKA_BOOTSTRAP`` still works with a FutureWarning naming the new one.

Every bad input raises :class:`InvalidConnectionError` (a :class:`~ordo.errors.ConfigError`)
whose message names the field or Secret key to fix.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ._extras import missing_extra
from .api.common import first_error
from .api.kafka import KafkaAuthentication, KafkaConnection, KafkaTls
from .errors import ConfigError

__all__ = [
    "BOOTSTRAP_ENV",
    "DEPRECATED_BOOTSTRAP_ENV",
    "NO_SECRETS",
    "InvalidConnectionError",
    "SecretReader",
    "bootstrap_from_env",
    "command_config",
    "connection_config",
    "librdkafka_config",
    "mounted_secrets",
    "parse_properties",
    "secret_options",
    "secrets_needed",
    "x_options",
]

BOOTSTRAP_ENV = "ORDO_KAFKA_BOOTSTRAP"
DEPRECATED_BOOTSTRAP_ENV = "KAFKA_BOOTSTRAP"

SecretReader = Callable[[str], Mapping[str, str] | None]
"""A Secret's data by name (decoded text), or None when there is no such Secret."""


def NO_SECRETS(name: str) -> None:
    """A reader that knows no Secret: for connections that need none."""
    return None


class InvalidConnectionError(ConfigError):
    """The Kafka connection cannot be built; the message names the field or Secret key to fix."""


_SASL_MECHANISMS = {"scram-sha-512": "SCRAM-SHA-512", "scram-sha-256": "SCRAM-SHA-256", "plain": "PLAIN"}
# Keys a Strimzi KafkaUser or cluster CA Secret has: no librdkafka option is named so.
_STRIMZI_KEYS = {
    "password": "authentication: {type: scram-sha-512, username: <KafkaUser>, passwordSecret: "
    "{secretName: SECRET, password: password}}",
    "sasl.jaas.config": "authentication: {type: scram-sha-512, username: <KafkaUser>, passwordSecret: "
    "{secretName: SECRET, password: password}}",
    "user.crt": "authentication: {type: tls, certificateAndKey: {secretName: SECRET, certificate: user.crt, "
    "key: user.key}}",
    "user.key": "authentication: {type: tls, certificateAndKey: {secretName: SECRET, certificate: user.crt, "
    "key: user.key}}",
    "ca.crt": "tls: {trustedCertificates: [{secretName: SECRET, certificate: ca.crt}]}",
}


def librdkafka_config(
    bootstrap: str,
    authentication: KafkaAuthentication | Mapping[str, Any] | None = None,
    tls: KafkaTls | Mapping[str, Any] | None = None,
    options: Mapping[str, str] | None = None,
    *,
    secrets: SecretReader = NO_SECRETS,
    where: str = "kafka",
) -> dict[str, str]:
    """librdkafka settings for ``bootstrap`` reached with ``authentication`` over ``tls``, plus
    the raw ``options`` (module docstring)."""
    if not bootstrap:
        raise InvalidConnectionError(
            f"{where}: no bootstrap servers (give bootstrapServers or {BOOTSTRAP_ENV})"
        )
    auth = _model(KafkaAuthentication, authentication, f"{where}.authentication")
    tls_model = _model(KafkaTls, tls, f"{where}.tls")
    if auth is not None and auth.type == "tls" and tls_model is None:
        raise InvalidConnectionError(
            f"{where}.authentication: type tls needs {where}.tls (the client certificate is shown over TLS): "
            "tls: {trustedCertificates: [{secretName: <cluster>-cluster-ca-cert, certificate: ca.crt}]}"
        )
    read = _Secrets(secrets)
    derived: dict[str, str] = {"bootstrap.servers": bootstrap}
    if auth is not None or tls_model is not None:  # else the raw options say (the escape hatch)
        sasl = auth is not None and auth.type != "tls"
        derived["security.protocol"] = ("SASL_" if sasl else "") + (
            "SSL" if tls_model is not None else "PLAINTEXT"
        )
    if tls_model is not None and tls_model.trusted_certificates:
        derived["ssl.ca.pem"] = "\n".join(
            read.value(c.secret_name, c.certificate, f"{where}.tls.trustedCertificates[{i}]").strip()
            for i, c in enumerate(tls_model.trusted_certificates)
        )
    if auth is not None:
        derived.update(_authentication(auth, read, f"{where}.authentication"))
    return _merged(derived, options or {}, where)


def connection_config(
    connection: KafkaConnection, secrets: SecretReader, where: str = "spec.kafka"
) -> dict[str, str]:
    """librdkafka settings for a resource's ``spec.kafka``: the Strimzi shape, then ``config``
    and the ``secretRef`` Secret's options (raw, the escape hatch)."""
    options = dict(connection.config)
    if connection.secret_ref is not None:
        name = connection.secret_ref.name
        data = secrets(name)
        if data is None:
            raise InvalidConnectionError(f"{where}.secretRef: Secret {name!r} not found")
        options.update(secret_options(name, data, f"{where}.secretRef"))
    return librdkafka_config(
        connection.bootstrap_servers,
        connection.authentication,
        connection.tls,
        options,
        secrets=secrets,
        where=where,
    )


def secrets_needed(authentication: KafkaAuthentication | None, tls: KafkaTls | None) -> list[tuple[str, str]]:
    """Every (Secret, key) the connection reads, in order: what a pod must mount."""
    needed: list[tuple[str, str]] = []
    if tls is not None:
        needed += [(c.secret_name, c.certificate) for c in tls.trusted_certificates]
    if authentication is not None:
        if authentication.password_secret is not None:
            needed.append(
                (authentication.password_secret.secret_name, authentication.password_secret.password)
            )
        if authentication.certificate_and_key is not None:
            pair = authentication.certificate_and_key
            needed += [(pair.secret_name, pair.certificate), (pair.secret_name, pair.key)]
        if authentication.client_secret is not None:
            needed.append((authentication.client_secret.secret_name, authentication.client_secret.key))
    return needed


def secret_options(name: str, data: Mapping[str, str], where: str = "secretRef") -> dict[str, str]:
    """A Secret of raw librdkafka options, checked: a Strimzi-shaped Secret names the fields to use."""
    strimzi = sorted(key for key in data if key in _STRIMZI_KEYS)
    if strimzi:
        uses = sorted({_STRIMZI_KEYS[key].replace("SECRET", name) for key in strimzi})
        raise InvalidConnectionError(
            f"{where}: Secret {name!r} has keys {', '.join(strimzi)}, which are not librdkafka options "
            f"(a Strimzi KafkaUser or CA Secret): reference it with {'; '.join(uses)} instead of secretRef"
        )
    return dict(data)


def _authentication(auth: KafkaAuthentication, read: _Secrets, where: str) -> dict[str, str]:
    if auth.type in _SASL_MECHANISMS:
        assert auth.username is not None and auth.password_secret is not None  # the model checked
        secret = auth.password_secret
        return {
            "sasl.mechanism": _SASL_MECHANISMS[auth.type],
            "sasl.username": auth.username,
            "sasl.password": read.value(secret.secret_name, secret.password, f"{where}.passwordSecret"),
        }
    if auth.type == "tls":
        assert auth.certificate_and_key is not None
        pair = auth.certificate_and_key
        return {
            "ssl.certificate.pem": read.value(
                pair.secret_name, pair.certificate, f"{where}.certificateAndKey"
            ),
            "ssl.key.pem": read.value(pair.secret_name, pair.key, f"{where}.certificateAndKey"),
        }
    assert auth.client_id is not None and auth.client_secret is not None and auth.token_endpoint_uri
    oauth = {
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": auth.client_id,
        "sasl.oauthbearer.client.secret": read.value(
            auth.client_secret.secret_name, auth.client_secret.key, f"{where}.clientSecret"
        ),
        "sasl.oauthbearer.token.endpoint.url": auth.token_endpoint_uri,
    }
    if auth.scope:
        oauth["sasl.oauthbearer.scope"] = auth.scope
    return oauth


def _merged(derived: dict[str, str], options: Mapping[str, str], where: str) -> dict[str, str]:
    """The raw options over the derived settings, where they add; a contradiction is refused
    (an option that silently undid ``authentication`` would connect as someone else, or in clear)."""
    clashes = sorted(k for k, v in options.items() if k in derived and str(v) != derived[k])
    if clashes:
        raise InvalidConnectionError(  # keys only: a value may be a credential
            f"{where}: the raw options set {', '.join(clashes)} otherwise than what bootstrapServers, "
            "authentication and tls decide; remove them from the options (or drop authentication/tls "
            "and give every option raw)"
        )
    return {**derived, **{k: str(v) for k, v in options.items()}}


class _Secrets:
    """Reads each Secret once and names the field at fault when a Secret or key is missing."""

    def __init__(self, reader: SecretReader) -> None:
        self._reader = reader
        self._read: dict[str, Mapping[str, str] | None] = {}

    def value(self, name: str, key: str, where: str) -> str:
        if name not in self._read:
            self._read[name] = self._reader(name)
        data = self._read[name]
        if data is None:
            raise InvalidConnectionError(f"{where}: Secret {name!r} not found")
        if key not in data:
            has = ", ".join(sorted(data)) or "none"
            raise InvalidConnectionError(f"{where}: Secret {name!r} has no key {key!r} (its keys: {has})")
        return data[key]


def _model(model: type[KafkaAuthentication] | type[KafkaTls], value: Any, where: str) -> Any:
    if value is None or isinstance(value, model):
        return value
    try:
        return model.model_validate(value)
    except ValidationError as error:
        raise InvalidConnectionError(first_error(error, within=where)) from None


# -- the ordo command's options: -X key=value and --command-config FILE -------------------------

_JAAS = re.compile(r"""(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|'([^']*)'|([^\s;]+))""")
_JAAS_MODULES = ("ScramLoginModule", "PlainLoginModule")
# what is left of one JAAS entry without its options: the login module's class, its flag and ';'
_JAAS_REST = re.compile(r"\s*[\w.$]+\s+\w+\s*;?\s*")
_SEPARATED = re.compile(r"[=:\s]")  # a properties line's key ends at one of these


def x_options(pairs: Iterable[str], flag: str = "-X") -> dict[str, str]:
    """``key=value`` command-line pairs (kcat's ``-X``, Kafka's perf tools' ``--producer-props``)."""
    options: dict[str, str] = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key.strip():
            raise InvalidConnectionError(f"{flag}: expected key=value, got {pair!r}")
        options[key.strip()] = value.strip()
    return options


def parse_properties(text: str, source: str = "properties") -> dict[str, str]:
    """A Java properties file read as Java reads it (javaproperties, the ``cli`` extra):
    ``key=value``, ``key: value`` or ``key value``; ``#`` and ``!`` comments; ``\\`` line
    continuations (Kafka's docs split ``sasl.jaas.config`` so) and escapes. Values are trimmed, as
    Kafka's clients trim them. A line with a key and no value at all is an error naming it: in a
    client's settings it is a slip, not an empty option."""
    try:
        import javaproperties
    except ModuleNotFoundError as error:
        raise missing_extra(error, "cli", f"reading {source}") from error
    pairs: dict[str, str] = {}
    line = 1
    elements = javaproperties.parse(text)
    while True:
        try:
            element = next(elements, None)
        except ValueError as error:  # javaproperties: a malformed \uXXXX escape
            raise InvalidConnectionError(f"{source}:{line}: {error}") from error
        if element is None:
            return pairs
        if isinstance(element, javaproperties.KeyValue):
            written = element.source.strip()
            if not element.value and not _SEPARATED.search(written):
                raise InvalidConnectionError(f"{source}:{line}: expected key=value, got {written!r}")
            pairs[element.key] = element.value.strip()  # Kafka's ConfigDef trims values too
        line += element.source.count("\n")


def command_config(text: str, where: str = "--command-config") -> dict[str, str]:
    """librdkafka options from a properties file as Kafka's tools take it: librdkafka options as
    they are, and the Java client's ``sasl.jaas.config`` (Scram/PlainLoginModule: user and
    password; what a Strimzi KafkaUser Secret holds) and PEM ``ssl.truststore.location``
    translated. Java-only settings librdkafka cannot use are refused with what to write instead."""
    options = parse_properties(text, where)
    jaas = options.pop("sasl.jaas.config", None)
    if jaas is not None:
        module = next((m for m in _JAAS_MODULES if m in jaas), None)
        if module is None:
            raise InvalidConnectionError(
                f"{where}: sasl.jaas.config: only ScramLoginModule and PlainLoginModule can be read; "
                "give sasl.username and sasl.password instead"
            )
        fields = {m.group(1): m.group(2) or m.group(3) or m.group(4) or "" for m in _JAAS.finditer(jaas)}
        if not _JAAS_REST.fullmatch(_JAAS.sub("", jaas)):  # a '"' the file did not escape twice
            raise InvalidConnectionError(
                f"{where}: sasl.jaas.config cannot be read as a JAAS entry; a properties file writes "
                'a \\" inside a quoted value as \\\\" (Java reads \\" as ")'
            )
        if "username" not in fields or "password" not in fields:
            raise InvalidConnectionError(f'{where}: sasl.jaas.config has no username="…" password="…"')
        options.setdefault("sasl.username", fields["username"])
        options.setdefault("sasl.password", fields["password"].replace('\\"', '"'))
        if module == "PlainLoginModule":  # SCRAM's hash (256 or 512) is sasl.mechanism's to say
            options.setdefault("sasl.mechanism", "PLAIN")
    truststore = options.pop("ssl.truststore.location", None)
    store_type = options.pop("ssl.truststore.type", "JKS" if truststore else None)
    if truststore is not None:
        if store_type != "PEM":
            raise InvalidConnectionError(
                f"{where}: ssl.truststore.location is a {store_type} store, which librdkafka cannot read; "
                "give the CA's PEM file as ssl.ca.location (Strimzi: the key ca.crt of "
                "<cluster>-cluster-ca-cert)"
            )
        options.setdefault("ssl.ca.location", truststore)
    for java_only in ("ssl.keystore.type", "ssl.truststore.password", "ssl.keystore.password"):
        if java_only in options:
            raise InvalidConnectionError(
                f"{where}: {java_only} is a Java client setting; give the certificate and key as PEM: "
                "ssl.certificate.location and ssl.key.location (Strimzi: user.crt and user.key)"
            )
    return options


# -- the readers: files and the environment ------------------------------------------------------


def mounted_secrets(root: str | os.PathLike[str]) -> SecretReader:
    """Secrets mounted as volumes under ``root``, one folder per Secret, one file per key."""
    base = Path(root)

    def read(name: str) -> Mapping[str, str] | None:
        folder = base / name
        if not folder.is_dir():
            return None
        # a Secret volume also holds ..data and ..<timestamp> entries: not keys
        return {
            p.name: p.read_text() for p in folder.iterdir() if not p.name.startswith("..") and p.is_file()
        }

    return read


def bootstrap_from_env(env: Mapping[str, str] | None = None) -> str | None:
    """The bootstrap servers from ``ORDO_KAFKA_BOOTSTRAP`` (or the deprecated ``KAFKA_BOOTSTRAP``)."""
    env = os.environ if env is None else env
    if env.get(BOOTSTRAP_ENV):
        return env[BOOTSTRAP_ENV]
    if env.get(DEPRECATED_BOOTSTRAP_ENV):
        warnings.warn(
            f"{DEPRECATED_BOOTSTRAP_ENV} is deprecated: set {BOOTSTRAP_ENV} instead",
            FutureWarning,  # shown by default: the people who set it read it
            stacklevel=2,
        )
        return env[DEPRECATED_BOOTSTRAP_ENV]
    return None
