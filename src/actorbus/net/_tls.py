"""TLS on links: the ``ssl.SSLContext`` of a service or a connection, the
checks a context given in code must pass, and what a failed handshake means.

A service with a certificate and its key speaks TLS on every link it accepts
(``connect_accepted_socket(ssl=...)``); with a CA file as well it requires a
client certificate signed by that CA (mutual TLS).  A connection with a CA
file speaks TLS and verifies the service's certificate and host name against
it (``create_connection(ssl=..., server_hostname=...)``); with a certificate
and key of its own it presents them when the service asks.

The rules every context follows, made here or handed in:

* TLS 1.2 at least (1.3 when both ends have it);
* a client always verifies: ``CERT_REQUIRED`` and ``check_hostname``; there is
  no setting that turns it off, and a context that does is refused;
* the standard library's ``ssl`` module only: the record layer runs in C
  (OpenSSL), none of it in Python.

TLS and the link's secret are independent (docs/security.md): TLS encrypts the
traffic and authenticates the hosts, the secret authenticates the node id.
"""

from __future__ import annotations

import os
import ssl
from typing import Final

from ..config.schema import tls_file_problem, tls_pair_problem
from ..errors import ConfigError, UsageError

__all__ = [
    "TLS_MINIMUM",
    "check_client_context",
    "check_server_context",
    "handshake_failure",
    "tls_client_context",
    "tls_server_context",
]

#: The oldest TLS version a link accepts.
TLS_MINIMUM: Final = ssl.TLSVersion.TLSv1_2

#: X.509 verification results that have a fix of their own to say
_EXPIRED: Final = 10  # X509_V_ERR_CERT_HAS_EXPIRED
_NOT_YET_VALID: Final = 9  # X509_V_ERR_CERT_NOT_YET_VALID
_UNTRUSTED: Final = frozenset({18, 19, 20, 21})  # self-signed, unknown issuer
_HOSTNAME: Final = 62  # X509_V_ERR_HOSTNAME_MISMATCH
_IP_ADDRESS: Final = 64  # X509_V_ERR_IP_ADDRESS_MISMATCH


def tls_server_context(
    cert_file: str | os.PathLike[str],
    key_file: str | os.PathLike[str],
    ca_file: str | os.PathLike[str] | None = None,
) -> ssl.SSLContext:
    """The TLS context of a service: it presents the certificate in
    ``cert_file`` (PEM, intermediate CA certificates after it) with the private
    key in ``key_file`` (PEM, unencrypted, not readable by every user).  With
    ``ca_file`` (PEM CA certificates) every client must present a certificate
    signed by one of them (mutual TLS).  Pass it to ``Bus.listen(tls=...)``.
    Raises ConfigError naming the file and what is wrong with it."""
    return server_context(
        cert_file,
        key_file,
        ca_file,
        ("tls_server_context(cert_file)", "tls_server_context(key_file)"),
        "tls_server_context(ca_file)",
    )


def tls_client_context(
    ca_file: str | os.PathLike[str],
    cert_file: str | os.PathLike[str] | None = None,
    key_file: str | os.PathLike[str] | None = None,
) -> ssl.SSLContext:
    """The TLS context of a connection: it verifies the service's certificate
    against the CA certificates in ``ca_file`` (PEM) and the dialled host name
    (always; ``Bus.connect(tls_server_name=...)`` names another).  With
    ``cert_file`` and ``key_file`` it presents that certificate to a service
    that asks for one (mutual TLS).  Pass it to ``Bus.connect(tls=...)``.
    Raises ConfigError naming the file and what is wrong with it."""
    return client_context(
        ca_file,
        cert_file,
        key_file,
        "tls_client_context(ca_file)",
        ("tls_client_context(cert_file)", "tls_client_context(key_file)"),
    )


def server_context(
    cert_file: str | os.PathLike[str],
    key_file: str | os.PathLike[str],
    ca_file: str | os.PathLike[str] | None,
    pair_names: tuple[str, str],
    ca_name: str,
) -> ssl.SSLContext:
    """:func:`tls_server_context`, with the names of the settings for errors
    (``actorbus.service.NAME.tlsCertFile`` for a properties file)."""
    cert, key = _pair(cert_file, key_file, pair_names)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = TLS_MINIMUM
    context.load_cert_chain(cert, key)
    if ca_file is not None:
        context.load_verify_locations(cafile=_file(ca_file, "ca", ca_name))
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def client_context(
    ca_file: str | os.PathLike[str],
    cert_file: str | os.PathLike[str] | None,
    key_file: str | os.PathLike[str] | None,
    ca_name: str,
    pair_names: tuple[str, str],
) -> ssl.SSLContext:
    """:func:`tls_client_context`, with the names of the settings for errors."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED, check_hostname
    context.minimum_version = TLS_MINIMUM
    context.load_verify_locations(cafile=_file(ca_file, "ca", ca_name))
    if cert_file is not None or key_file is not None:
        if cert_file is None or key_file is None:
            missing, given = pair_names if cert_file is None else pair_names[::-1]
            raise ConfigError(
                f"{given} is given without {missing}: a client certificate needs its "
                "private key and the key its certificate; give both, or neither",
                key=missing,
            )
        context.load_cert_chain(*_pair(cert_file, key_file, pair_names))
    return context


def check_server_context(context: object, what: str) -> ssl.SSLContext:
    """A context handed to ``listen(tls=...)``, refused unless a service can use it."""
    context = _context(context, what)
    if context.protocol is ssl.PROTOCOL_TLS_CLIENT:
        raise UsageError(
            f"{what}: a client context (PROTOCOL_TLS_CLIENT) cannot accept links; make it "
            "with actorbus.net.tls_server_context(cert_file, key_file, ca_file=None) or "
            "ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)"
        )
    _check_minimum(context, what)
    return context


def check_client_context(context: object, what: str) -> ssl.SSLContext:
    """A context handed to ``connect(tls=...)``, refused unless it verifies the
    service's certificate and host name and speaks TLS 1.2 at least."""
    context = _context(context, what)
    if context.verify_mode is not ssl.CERT_REQUIRED or not context.check_hostname:
        raise UsageError(
            f"{what}: the context does not verify the service's certificate and host name "
            f"(verify_mode={context.verify_mode.name}, check_hostname="
            f"{context.check_hostname}); a link always verifies: make it with "
            "actorbus.net.tls_client_context(ca_file) or ssl.create_default_context("
            "cafile=...), and name the certificate's host with tls_server_name= if it is "
            "not the dialled one"
        )
    _check_minimum(context, what)
    return context


def handshake_failure(exc: BaseException, initiator: bool) -> str:
    """What a failed TLS handshake (or a TLS alert right after it) means, and
    what to do, for a connection that dialled (``initiator``) or accepted."""
    peer = "the service" if initiator else "the client"
    if isinstance(exc, ssl.SSLCertVerificationError):
        whose = "the service's certificate" if initiator else "the client's certificate"
        where = "this connection's tlsCaFile" if initiator else "this service's tlsCaFile"
        code = exc.verify_code
        if code in (_HOSTNAME, _IP_ADDRESS):
            fix = (
                "dial the host name or address the certificate carries, or name it with "
                "tlsServerName (tls_server_name=)"
            )
        elif code in (_EXPIRED, _NOT_YET_VALID):
            fix = f"{peer} needs a certificate valid now (check its dates and both clocks)"
        elif code in _UNTRUSTED:
            fix = (
                f"it is not signed by a CA in {where}: give the CA that signs {peer}'s certificates"
            )
        else:
            fix = f"check {peer}'s certificate against {where}"
        return f"TLS failed: {whose} was refused ({exc.verify_message}); {fix}"
    reason = getattr(exc, "reason", None) or ""
    text = str(exc) or type(exc).__name__
    if reason in (
        "WRONG_VERSION_NUMBER",
        "RECORD_LAYER_FAILURE",
        "HTTP_REQUEST",
        "UNKNOWN_PROTOCOL",
    ):
        if initiator:
            return (
                f"TLS failed: the service does not speak TLS ({text}); dial it without TLS "
                "(no tlsCaFile / tls=), or give its service tlsCertFile and tlsKeyFile"
            )
        return (
            f"TLS failed: the client does not speak TLS ({text}); this service accepts TLS "
            "links only: give the connection tlsCaFile (tls=)"
        )
    if reason in ("PEER_DID_NOT_RETURN_A_CERTIFICATE", "TLSV13_ALERT_CERTIFICATE_REQUIRED"):
        if initiator:
            return (
                f"TLS failed: the service requires a client certificate ({text}); give this "
                "connection tlsCertFile and tlsKeyFile (tls_client_context(ca, cert, key))"
            )
        return (
            f"TLS failed: the client presented no certificate ({text}); this service requires "
            "one signed by a CA in its tlsCaFile: give the connection tlsCertFile and tlsKeyFile"
        )
    if reason.startswith(("SSLV3_ALERT_", "TLSV1_ALERT_", "TLSV13_ALERT_")):
        return (
            f"TLS failed: {peer} refused the handshake ({text}); its log says why (most often "
            "this node's certificate is not signed by a CA it trusts, or has expired)"
        )
    if isinstance(exc, ssl.SSLError):
        return f"TLS failed: {text}; check both ends' TLS settings"
    return (
        f"TLS failed: {peer} closed the connection during the TLS handshake ({text}); it may "
        "not speak TLS, refuse this host (an address filter) or this node's certificate "
        "(its log says why)"
    )


def _file(path: str | os.PathLike[str], kind: str, name: str) -> str:
    text = os.fspath(path)
    problem = tls_file_problem(text, kind)
    if problem is not None:
        raise ConfigError(f"{name}: {problem}", key=name)
    return text


def _pair(
    cert_file: str | os.PathLike[str], key_file: str | os.PathLike[str], names: tuple[str, str]
) -> tuple[str, str]:
    cert = _file(cert_file, "cert", names[0])
    key = _file(key_file, "key", names[1])
    problem = tls_pair_problem(cert, key)
    if problem is not None:
        raise ConfigError(f"{names[1]}: {problem}", key=names[1])
    return cert, key


def _context(context: object, what: str) -> ssl.SSLContext:
    if not isinstance(context, ssl.SSLContext):
        raise UsageError(
            f"{what}: expected an ssl.SSLContext (or None for a plain link), got a "
            f"{type(context).__name__}; build one with actorbus.net.tls_server_context / "
            "tls_client_context"
        )
    return context


def _check_minimum(context: ssl.SSLContext, what: str) -> None:
    low = context.minimum_version
    if low is ssl.TLSVersion.MINIMUM_SUPPORTED or low < TLS_MINIMUM:
        raise UsageError(
            f"{what}: the context accepts {low.name}; links need TLS 1.2 at least: set "
            "context.minimum_version = ssl.TLSVersion.TLSv1_2 (or build it with "
            "actorbus.net.tls_server_context / tls_client_context)"
        )
