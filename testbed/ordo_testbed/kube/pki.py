"""The testbed API server's certificates, made at its first start and kept in its state folder:
a CA, the server's serving certificate (127.0.0.1, localhost, and the ``server_names`` given),
the admin's client certificate (group ``system:masters``) and the service-account signing key.
The CA's key is kept too, so that :meth:`Pki.client` can issue more client certificates (the
e2e suite's kubelet and kube-proxy)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["Pki"]

_YEARS = datetime.timedelta(days=3650)


@dataclass(frozen=True)
class Pki:
    """The files, in one folder: ``ca.{crt,key}``, ``server.{crt,key}``, ``admin.{crt,key}``,
    ``sa.{pub,key}``. ``server_names``: more names of the server (DNS names or IP addresses)."""

    folder: Path
    server_names: tuple[str, ...] = ()

    def path(self, name: str) -> Path:
        return self.folder / name

    def ensure(self) -> Pki:
        """Make whatever is missing (all of it on a first start); certificates last ten years."""
        if all(self.path(n).exists() for n in ("ca.crt", "server.crt", "admin.crt", "sa.key")):
            return self
        self.folder.mkdir(parents=True, exist_ok=True)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ordo-testbed-ca")])
        ca = _builder(ca_name, ca_name, ca_key.public_key()).add_extension(
            x509.BasicConstraints(ca=True, path_length=None), critical=True
        )
        ca_cert = ca.sign(ca_key, hashes.SHA256())
        names = [_name(n) for n in ("localhost", "127.0.0.1", *self.server_names)]
        server = self._leaf(ca_cert, ca_key, "kube-apiserver", None, ExtendedKeyUsageOID.SERVER_AUTH, names)
        admin = self._leaf(ca_cert, ca_key, "ordo-admin", "system:masters", ExtendedKeyUsageOID.CLIENT_AUTH)
        sa_key = ec.generate_private_key(ec.SECP256R1())
        self._write("ca.key", _private(ca_key))
        self._write("ca.crt", ca_cert.public_bytes(serialization.Encoding.PEM))
        for name, (cert, key) in (("server", server), ("admin", admin)):
            self._write(f"{name}.key", _private(key))
            self._write(f"{name}.crt", cert.public_bytes(serialization.Encoding.PEM))
        self._write("sa.pub", sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ))  # fmt: skip
        self._write("sa.key", _private(sa_key))  # last: ensure() checks it to know all are there
        return self

    def client(self, name: str, common_name: str, group: str | None = None) -> tuple[Path, Path]:
        """A client certificate ``<name>.crt`` and its key (made once), signed by the CA: the user
        ``common_name`` in ``group``. Returns the two paths."""
        crt, key_path = self.path(f"{name}.crt"), self.path(f"{name}.key")
        if not crt.exists():
            ca_cert = x509.load_pem_x509_certificate(self.path("ca.crt").read_bytes())
            ca_key = serialization.load_pem_private_key(self.path("ca.key").read_bytes(), None)
            assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
            cert, key = self._leaf(ca_cert, ca_key, common_name, group, ExtendedKeyUsageOID.CLIENT_AUTH)
            self._write(f"{name}.key", _private(key))
            self._write(f"{name}.crt", cert.public_bytes(serialization.Encoding.PEM))
        return crt, key_path

    @staticmethod
    def _leaf(
        ca_cert: x509.Certificate,
        ca_key: ec.EllipticCurvePrivateKey,
        common_name: str,
        group: str | None,
        usage: x509.ObjectIdentifier,
        names: list[x509.GeneralName] | None = None,
    ) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        key = ec.generate_private_key(ec.SECP256R1())
        attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        if group is not None:  # the API server reads a client certificate's O as its groups
            attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, group))
        builder = _builder(x509.Name(attributes), ca_cert.subject, key.public_key())
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return builder.sign(ca_key, hashes.SHA256()), key

    def _write(self, name: str, data: bytes) -> None:
        partial = self.path(name + ".partial")
        partial.write_bytes(data)
        partial.chmod(0o600)
        partial.replace(self.path(name))


def _builder(
    subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePublicKey
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + _YEARS)
    )


def _name(text: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(text))
    except ValueError:
        return x509.DNSName(text)


def _private(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
