"""A throwaway CA with a server certificate (127.0.0.1, localhost), a
client certificate and a peer certificate for both uses (a replicated
nsqd is its peers' server and their client), generated when the tests run: no private key is
committed. They carry key identifiers, as RFC 5280 asks and Python 3.13's
default verification requires; ``key_identifiers=False`` makes them as
older CAs did, without."""

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass
class Certs:
    ca: str
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str
    peer_cert: str
    peer_key: str


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write(path: Path, key, cert) -> tuple[str, str]:
    key_path, cert_path = path.with_suffix(".key"), path.with_suffix(".pem")
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return str(cert_path), str(key_path)


def make_certs(directory: Path, key_identifiers: bool = True) -> Certs:
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(_name("nsqpy test CA")).issuer_name(_name("nsqpy test CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False),
                         critical=True))
    if key_identifiers:
        ca = ca.add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
    ca_cert = ca.sign(ca_key, hashes.SHA256())
    ca_path, _ = _write(directory / "ca", ca_key, ca_cert)

    def leaf(name: str, usages: list, sans):
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (x509.CertificateBuilder().subject_name(_name(name)).issuer_name(ca_cert.subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.ExtendedKeyUsage(usages), critical=False))
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        if key_identifiers:
            builder = (builder.add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
                       .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                                      critical=False))
        return _write(directory / name, key, builder.sign(ca_key, hashes.SHA256()))

    loopback = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
    server_cert, server_key = leaf("server", [ExtendedKeyUsageOID.SERVER_AUTH], loopback)
    client_cert, client_key = leaf("client", [ExtendedKeyUsageOID.CLIENT_AUTH], [])
    peer_cert, peer_key = leaf("peer", [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH], loopback)
    return Certs(ca_path, server_cert, server_key, client_cert, client_key, peer_cert, peer_key)
