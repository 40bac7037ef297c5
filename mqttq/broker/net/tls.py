"""TLS for the MQTT listeners: server contexts built from `[listener.tls]` /
`[listener.wss]`, checked at start (one error naming the bad key) and reloaded on SIGHUP
for new connections (`CertificateHolder`)."""

from __future__ import annotations

import asyncio
import logging
import ssl
from pathlib import Path
from typing import Final, Protocol

from mqttq.errors import ConfigError

__all__ = ["CertificateHolder", "TlsOptions", "certificate_common_name", "server_context"]

logger = logging.getLogger("mqttq.broker.tls")

MIN_VERSIONS: Final = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}


class TlsOptions(Protocol):
    """The TLS keys of `[listener.tls]` and `[listener.wss]`."""

    @property
    def certfile(self) -> str: ...
    @property
    def keyfile(self) -> str: ...
    @property
    def cafile(self) -> str: ...
    @property
    def min_version(self) -> str: ...


def _read(path: str, key: str) -> bytes:
    try:
        return Path(path).expanduser().read_bytes()
    except FileNotFoundError:
        raise ConfigError(key, f"no such file {path!r}") from None
    except IsADirectoryError:
        raise ConfigError(key, f"{path!r} is a directory, not a PEM file") from None
    except PermissionError:
        raise ConfigError(key, f"cannot read {path!r}: permission denied") from None
    except OSError as exc:
        raise ConfigError(key, f"cannot read {path!r}: {exc.strerror or exc}") from None


def server_context(options: TlsOptions, section: str) -> ssl.SSLContext:
    """A server-side context for `options`; raises ConfigError naming the key
    (`listener.tls.certfile`, ...) when a file is missing, unreadable or not what it
    should be, or when the key does not match the certificate."""
    certfile, keyfile = f"{section}.certfile", f"{section}.keyfile"
    cert_pem = _read(options.certfile, certfile)
    key_pem = _read(options.keyfile, keyfile)
    if b"-----BEGIN CERTIFICATE-----" not in cert_pem:
        raise ConfigError(certfile, f"{options.certfile!r} holds no PEM certificate")
    if b"PRIVATE KEY-----" not in key_pem:
        raise ConfigError(keyfile, f"{options.keyfile!r} holds no PEM private key")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = MIN_VERSIONS[options.min_version]
    try:
        context.load_cert_chain(
            str(Path(options.certfile).expanduser()), str(Path(options.keyfile).expanduser())
        )
    except ssl.SSLError as exc:
        if exc.reason == "KEY_VALUES_MISMATCH":
            raise ConfigError(
                keyfile, f"{options.keyfile!r} does not match the certificate in {certfile}"
            ) from None
        raise ConfigError(
            certfile, f"cannot load {options.certfile!r} with {keyfile}: {exc.reason or exc}"
        ) from None
    if options.cafile:
        cafile = f"{section}.cafile"
        if b"-----BEGIN CERTIFICATE-----" not in _read(options.cafile, cafile):
            raise ConfigError(cafile, f"{options.cafile!r} holds no PEM certificate")
        try:
            context.load_verify_locations(cafile=str(Path(options.cafile).expanduser()))
        except ssl.SSLError as exc:
            raise ConfigError(cafile, f"cannot load {options.cafile!r}: {exc.reason}") from None
        context.verify_mode = ssl.CERT_REQUIRED
    return context


class CertificateHolder:
    """The server context of one TLS listener, and the certificates it serves now.

    The listener is created with `context` (`base`); its SNI callback, which OpenSSL
    calls for every ClientHello (with or without a server name), switches each new
    connection to the context that `reload()` last built. Connections already up keep
    the session they negotiated.
    """

    __slots__ = ("base", "current", "options", "section")

    def __init__(self, options: TlsOptions, section: str) -> None:
        """Build the first context (ConfigError naming the key when it cannot be)."""
        self.options = options
        self.section = section
        self.base = self.current = server_context(options, section)
        self.base.sni_callback = self._select

    @property
    def context(self) -> ssl.SSLContext:
        """The context the listener is created with."""
        return self.base

    def _select(
        self, connection: ssl.SSLObject | ssl.SSLSocket, _name: str | None, _ctx: ssl.SSLContext
    ) -> None:
        if self.current is not self.base:
            connection.context = self.current

    def reload(self) -> bool:
        """Re-read the certificate, key and CA files; on an error the old context stays
        (and the error is logged): True when the new one is in use."""
        try:
            self.current = server_context(self.options, self.section)
        except ConfigError as error:
            logger.warning("[%s] certificates not reloaded: %s", self.section, error)
            return False
        logger.info("[%s] certificates reloaded", self.section)
        return True


def certificate_common_name(transport: asyncio.BaseTransport | None) -> str | None:
    """The CN of the client certificate verified on `transport` (the last CN of the
    subject, as Mosquitto's use_identity_as_username reads it); None without one."""
    if transport is None:
        return None
    peercert = transport.get_extra_info("peercert")
    if not peercert:
        return None
    name: str | None = None
    for rdn in peercert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                name = value
    return name
