"""Certificates made for the TLS tests (trustme): a CA, a server certificate for
127.0.0.1 / localhost, client certificates by CN, written as PEM files."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import trustme


@dataclass(frozen=True)
class Pki:
    """PEM files of one test PKI."""

    directory: Path
    ca: trustme.CA
    cafile: Path
    certfile: Path
    keyfile: Path

    def client(self, common_name: str) -> tuple[Path, Path]:
        """A client certificate whose subject CN is `common_name`: (certfile, keyfile)."""
        cert = self.ca.issue_cert(f"{common_name}.clients.test", common_name=common_name)
        certfile = self.directory / f"client-{common_name}.pem"
        keyfile = self.directory / f"client-{common_name}.key"
        cert.cert_chain_pems[0].write_to_path(str(certfile))
        cert.private_key_pem.write_to_path(str(keyfile))
        return certfile, keyfile

    def renew_server(self, name: str) -> None:
        """Replace the server certificate and key files with a new pair (SIGHUP tests)."""
        write_server(self.ca, name, self.certfile, self.keyfile)


def write_server(ca: trustme.CA, name: str, certfile: Path, keyfile: Path) -> None:
    """A server certificate for 127.0.0.1 and localhost whose CN is `name`."""
    cert = ca.issue_cert("127.0.0.1", "localhost", common_name=name)
    certfile.write_bytes(b"".join(blob.bytes() for blob in cert.cert_chain_pems))
    cert.private_key_pem.write_to_path(str(keyfile))


def make_pki(directory: Path) -> Pki:
    """A new CA and server certificate under `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    cafile = directory / "ca.pem"
    ca.cert_pem.write_to_path(str(cafile))
    certfile, keyfile = directory / "server.pem", directory / "server.key"
    write_server(ca, "mqttq-test-server", certfile, keyfile)
    return Pki(directory, ca, cafile, certfile, keyfile)
