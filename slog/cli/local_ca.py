"""A local certificate authority for `slog cluster up --tls`.

One CA per data dir signs a broker certificate (SANs 127.0.0.1, localhost and
::1: every broker of a local cluster listens there, so they share it) and a
client certificate for ``ssl.client.auth``. Files live in ``<data-dir>/tls/``,
private keys 0600, and are reused on the next ``up`` while they stay valid (a
new ``--host`` gets a new broker certificate from the same CA, so clients keep
trusting it).
Keys are ECDSA P-256: quick to make, and every Kafka client speaks it.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOCAL_NAMES = ("127.0.0.1", "localhost", "::1")
VALID_DAYS = 825  # what browsers and macOS accept for a leaf; the CA lives ten years
RENEW_BEFORE = datetime.timedelta(days=7)


@dataclass(frozen=True)
class TlsFiles:
    directory: Path

    @property
    def ca(self) -> Path:  # the trust anchor clients pass as --ca / ssl.ca.location
        return self.directory / "ca.pem"

    @property
    def ca_key(self) -> Path:
        return self.directory / "ca.key"

    @property
    def broker_keystore(self) -> Path:  # key + chain: ssl.keystore.location
        return self.directory / "broker-keystore.pem"

    @property
    def broker_cert(self) -> Path:
        return self.directory / "broker.pem"

    @property
    def broker_key(self) -> Path:
        return self.directory / "broker.key"

    @property
    def client_cert(self) -> Path:
        return self.directory / "client.pem"

    @property
    def client_key(self) -> Path:
        return self.directory / "client.key"

    def all(self) -> tuple[Path, ...]:
        return (self.ca, self.ca_key, self.broker_keystore, self.broker_cert, self.broker_key,
                self.client_cert, self.client_key)


def ensure_local_ca(directory: Path, names: tuple[str, ...] = LOCAL_NAMES) -> TlsFiles:
    """The CA and certificates in ``directory``, made when missing, about to expire, or
    when the broker certificate does not name all of ``names``. A CA that is still good
    is kept (clients already trust it); only the leaf certificates are made again."""
    files = TlsFiles(directory)
    if all(p.is_file() for p in files.all()) and _still_valid(files.ca) \
            and _still_valid(files.broker_cert, names) and _still_valid(files.client_cert):
        return files
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)

    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "slog local cluster"),
                          x509.NameAttribute(NameOID.COMMON_NAME, common)])

    def key_pem(key: Any) -> bytes:
        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())

    def cert_pem(cert: x509.Certificate) -> bytes:
        return cert.public_bytes(serialization.Encoding.PEM)

    kept = _load_ca(files) if _still_valid(files.ca) else None
    if kept is not None:
        ca_key, ca_cert = kept
    else:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = name(f"slog local CA {os.urandom(4).hex()}")
        usage = x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                              content_commitment=False, key_encipherment=False,
                              data_encipherment=False, key_agreement=False,
                              encipher_only=False, decipher_only=False)
        ca_cert = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
                   .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=3650))
                   .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                   .add_extension(usage, critical=True)
                   .add_extension(x509.SubjectKeyIdentifier.from_public_key(
                       ca_key.public_key()), critical=False)
                   .sign(ca_key, hashes.SHA256()))
        _write(files.ca_key, key_pem(ca_key), private=True)
        _write(files.ca, cert_pem(ca_cert))

    def leaf(common: str, usages: list[x509.ObjectIdentifier],
             sans: list[x509.GeneralName]) -> tuple[Any, x509.Certificate]:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (x509.CertificateBuilder().subject_name(name(common))
                   .issuer_name(ca_cert.subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now)
                   .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None),
                                  critical=True)
                   .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                       ca_key.public_key()), critical=False))
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return key, builder.sign(ca_key, hashes.SHA256())

    sans: list[x509.GeneralName] = []
    for host in names:
        address = _normal(host)
        sans.append(x509.DNSName(host) if isinstance(address, str) else x509.IPAddress(address))
    # Brokers are clients of each other too (replica fetchers), hence both usages.
    broker_key, broker_cert = leaf("localhost", [ExtendedKeyUsageOID.SERVER_AUTH,
                                                 ExtendedKeyUsageOID.CLIENT_AUTH], sans)
    client_key, client_cert = leaf("slog-client", [ExtendedKeyUsageOID.CLIENT_AUTH], [])
    _write(files.broker_key, key_pem(broker_key), private=True)
    _write(files.broker_cert, cert_pem(broker_cert) + cert_pem(ca_cert))
    _write(files.broker_keystore, key_pem(broker_key) + cert_pem(broker_cert)
           + cert_pem(ca_cert), private=True)
    _write(files.client_key, key_pem(client_key), private=True)
    _write(files.client_cert, cert_pem(client_cert) + cert_pem(ca_cert))
    return files


def _load_ca(files: TlsFiles) -> tuple[Any, Any] | None:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    try:
        key = serialization.load_pem_private_key(files.ca_key.read_bytes(), password=None)
        return key, x509.load_pem_x509_certificate(files.ca.read_bytes())
    except (OSError, ValueError, TypeError):
        return None


def _write(path: Path, data: bytes, private: bool = False) -> None:
    """Created with its final mode: a key is never readable by others, even for an instant."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(tmp, 0o600 if private else 0o644)
    os.replace(tmp, path)


def _still_valid(path: Path, names: tuple[str, ...] = ()) -> bool:
    from cryptography import x509

    try:
        cert = x509.load_pem_x509_certificate(path.read_bytes())
    except (OSError, ValueError):
        return False
    if cert.not_valid_after_utc - RENEW_BEFORE <= datetime.datetime.now(datetime.UTC):
        return False
    if not names:
        return True
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    named = {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}
    named |= set(sans.get_values_for_type(x509.DNSName))
    return all(str(_normal(name)) in named for name in names)


def _normal(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | str:
    """An IP address as the certificate spells it (``::1``, not ``0:0::1``); else the name."""
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return name
