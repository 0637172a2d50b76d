"""The test cluster's PKI and kubeconfigs: a CA, the API server's serving certificate, an admin
client certificate, the service-account key pair, serving certificates for webhooks, and
one-context kubeconfigs (client certificate or token)."""

from __future__ import annotations

import base64
import datetime
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.support.controlplane_cluster import SERVICE_IP


@dataclass(frozen=True)
class Pki:
    """File paths of the test cluster's CA, serving, admin and service-account keys."""

    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    sa_key: Path
    sa_pub: Path


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _issue(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    ca: bool = False,
    usages: Sequence[x509.ObjectIdentifier] = (),
    sans: Sequence[x509.GeneralName] = (),
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=7))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=not ca,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=ca,
                crl_sign=ca,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    )
    if usages:
        builder = builder.add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def make_pki(directory: Path) -> Pki:
    """Create a CA, the API server's serving cert, an admin client cert (group
    system:masters) and the service-account signing key pair."""
    directory.mkdir(parents=True, exist_ok=True)
    pki = Pki(*(directory / n for n in ("ca.crt", "ca.key", "apiserver.crt", "apiserver.key",
                                        "admin.crt", "admin.key", "sa.key", "sa.pub")))  # fmt: skip
    ca_key = _new_key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "distgnn-test-ca")])
    ca = _issue(ca_name, ca_key, ca_name, ca_key, ca=True)

    serving_key = _new_key()
    dns = [
        "localhost",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    ]
    ips = ["127.0.0.1", SERVICE_IP]
    serving = _issue(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]),
        serving_key,
        ca_name,
        ca_key,
        usages=[ExtendedKeyUsageOID.SERVER_AUTH],
        sans=[
            *(x509.DNSName(d) for d in dns),
            *(x509.IPAddress(ipaddress.ip_address(i)) for i in ips),
        ],
    )
    admin_key = _new_key()
    admin = _issue(
        x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
                x509.NameAttribute(NameOID.COMMON_NAME, "distgnn-admin"),
            ]
        ),
        admin_key,
        ca_name,
        ca_key,
        usages=[ExtendedKeyUsageOID.CLIENT_AUTH],
    )
    sa_key = _new_key()

    pem = serialization.Encoding.PEM
    pki.ca_cert.write_bytes(ca.public_bytes(pem))
    _write_key(pki.ca_key, ca_key)
    pki.serving_cert.write_bytes(serving.public_bytes(pem))
    _write_key(pki.serving_key, serving_key)
    pki.admin_cert.write_bytes(admin.public_bytes(pem))
    _write_key(pki.admin_key, admin_key)
    _write_key(pki.sa_key, sa_key)
    pki.sa_pub.write_bytes(
        sa_key.public_key().public_bytes(pem, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return pki


def issue_serving_cert(pki: Pki, directory: Path, name: str) -> tuple[Path, Path]:
    """A serving certificate for 127.0.0.1, signed by the cluster CA (which the API server's
    webhook clients are given as caBundle); returns (tls.crt, tls.key) in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = _new_key()
    cert = _issue(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]),
        key,
        ca.subject,
        ca_key,
        usages=[ExtendedKeyUsageOID.SERVER_AUTH],
        sans=[x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
    )
    cert_path, key_path = directory / "tls.crt", directory / "tls.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(key_path, key)
    return cert_path, key_path


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def write_kubeconfig(
    path: Path, server: str, ca_cert: Path, user_name: str, user: dict[str, str]
) -> Path:
    """Write a one-context kubeconfig; ``user`` holds token or client-certificate fields."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "distgnn-test",
                "cluster": {"server": server, "certificate-authority-data": _b64(ca_cert)},
            }
        ],
        "users": [{"name": user_name, "user": user}],
        "contexts": [
            {"name": "distgnn-test", "context": {"cluster": "distgnn-test", "user": user_name}}
        ],
        "current-context": "distgnn-test",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


def write_admin_kubeconfig(path: Path, server: str, pki: Pki) -> Path:
    """Write the admin kubeconfig: the client certificate in group system:masters."""
    return write_kubeconfig(
        path,
        server,
        pki.ca_cert,
        "distgnn-admin",
        {
            "client-certificate-data": _b64(pki.admin_cert),
            "client-key-data": _b64(pki.admin_key),
        },
    )
