"""Throwaway certificates for TLS tests, made with the ``openssl`` command (EC P-256 keys: a few
milliseconds each).

:func:`make_pki` writes a CA, a broker certificate for ``localhost``/``127.0.0.1`` signed by it, a
client certificate (subject ``O=acme, OU=eng, CN=client``, which Kafka names
``User:CN=client,OU=eng,O=acme``) and a second, unrelated CA (for "wrong CA" tests). The broker's
key store is one PEM file with its key and certificate, as ``ssl.keystore.location`` takes it.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

CLIENT_SUBJECT = "/O=acme/OU=eng/CN=client"
CLIENT_DN = "CN=client,OU=eng,O=acme"


@dataclass(frozen=True)
class Pki:
    directory: Path
    ca_cert: Path
    broker_key: Path
    broker_cert: Path
    #: The broker's key and certificate in one file (``ssl.keystore.location``).
    broker_keystore: Path
    client_key: Path
    client_cert: Path
    other_ca_cert: Path

    def ssl_overrides(self, prefix: str = "", *, client_auth: str = "required") -> list[str]:
        """``--override`` arguments for an SSL listener with this key store and trust store."""
        pairs = {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.broker_keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca_cert),
            "ssl.client.auth": client_auth,
        }
        args: list[str] = []
        for name, value in pairs.items():
            args += ["--override", f"{prefix}{name}={value}"]
        return args


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _key(path: Path) -> None:
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(path), cwd=path.parent)


def _ca(directory: Path, name: str) -> tuple[Path, Path]:
    key, cert = directory / f"{name}.key", directory / f"{name}.pem"
    _key(key)
    _openssl(
        "req", "-x509", "-new", "-key", str(key), "-out", str(cert), "-days", "2",
        "-subj", f"/CN={name}", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory,
    )  # fmt: skip
    return key, cert


def _signed(directory: Path, name: str, subject: str, ca: tuple[Path, Path], extensions: str) -> Path:
    key, csr, cert = directory / f"{name}.key", directory / f"{name}.csr", directory / f"{name}.pem"
    _key(key)
    _openssl("req", "-new", "-key", str(key), "-out", str(csr), "-subj", subject, cwd=directory)
    ext = directory / f"{name}.ext"
    ext.write_text(extensions)
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(ca[1]), "-CAkey", str(ca[0]), "-CAcreateserial",
        "-out", str(cert), "-days", "2", "-extfile", str(ext), cwd=directory,
    )  # fmt: skip
    return cert


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca = _ca(directory, "ca")
    broker_cert = _signed(
        directory,
        "broker",
        "/CN=localhost",
        ca,
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
    )
    client_cert = _signed(directory, "client", CLIENT_SUBJECT, ca, "extendedKeyUsage=clientAuth\n")
    _, other_ca = _ca(directory, "other-ca")
    keystore = directory / "broker-keystore.pem"
    keystore.write_text((directory / "broker.key").read_text() + broker_cert.read_text())
    return Pki(
        directory=directory,
        ca_cert=ca[1],
        broker_key=directory / "broker.key",
        broker_cert=broker_cert,
        broker_keystore=keystore,
        client_key=directory / "client.key",
        client_cert=client_cert,
        other_ca_cert=other_ca,
    )
