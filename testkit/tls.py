"""Certificates for a TLS test: a throwaway certificate authority, and certificates it signs, written as PEM files.

``Authority.make(folder, name)`` makes a CA (its certificate at ``folder / f'{name}.crt'``); ``authority.issue(name,
hosts)`` signs a certificate for ``hosts`` (IP addresses or DNS names) and returns its ``Issued`` certificate and key
files. Needs the ``cryptography`` package (the ``encryption`` extra installs it). Valid for a day from an hour ago.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

__all__ = ('Authority', 'Issued')


@dataclass(frozen=True)
class Issued:
    """A certificate and its private key, as PEM files."""

    certificate: Path
    key: Path


@dataclass(frozen=True)
class Authority:
    """A certificate authority of a test's own: its certificate file, and the key it signs with."""

    folder: Path
    certificate: Path
    key: ec.EllipticCurvePrivateKey
    name: x509.Name

    @classmethod
    def make(cls, folder: Path, name: str) -> Authority:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        certificate = (
            _builder(subject, subject, key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(key, hashes.SHA256())
        )
        path = folder / f'{name}.crt'
        path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        return cls(folder, path, key, subject)

    def issue(self, name: str, hosts: tuple[str, ...] = ()) -> Issued:
        """A certificate for `name` (its common name), valid for `hosts`, signed by this authority."""
        key = ec.generate_private_key(ec.SECP256R1())
        builder = _builder(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]), self.name, key.public_key())
        if hosts:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([_host(host) for host in hosts]), critical=False
            )
        certificate = builder.sign(self.key, hashes.SHA256())
        issued = Issued(self.folder / f'{name}.crt', self.folder / f'{name}.key')
        issued.certificate.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        issued.key.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        issued.key.chmod(0o600)  # libpq and PostgreSQL refuse a key others can read
        return issued


def _builder(subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePublicKey) -> x509.CertificateBuilder:
    now = datetime.now(UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(hours=1))
        .not_valid_after(now + timedelta(days=1))
    )


def _host(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)
