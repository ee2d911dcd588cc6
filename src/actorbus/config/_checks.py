"""What the settings types, the value parsers and the loader all check: node
ids, secret and TLS files, the dispatcher kinds.  Kept apart from
:mod:`actorbus.config.schema` so that the value parsers
(:mod:`actorbus.config._values`) and the settings types
(:mod:`actorbus.config.settings`) can use them without importing the schema that
is built from both."""

from __future__ import annotations

import enum
import os
import ssl
import stat

#: The longest node id in UTF-8 bytes: a node id crosses the wire in LOGON.
MAX_NODE_ID = 255


def node_id_problem(node_id: str) -> str | None:
    """Why the str ``node_id`` is not a valid node id (1..255 UTF-8 bytes of text),
    or None.  The link protocol, the properties loader and ``Bus`` all check it."""
    try:
        size = len(node_id.encode("utf-8"))
    except UnicodeEncodeError:
        return "it is not valid Unicode text"
    if not 0 < size <= MAX_NODE_ID:
        return f"it has {size} UTF-8 bytes, expected 1..{MAX_NODE_ID}"
    return None


#: Shortest secret accepted, in bytes.
MIN_SECRET = 16
#: How to make a good secret (in error messages and docs).
GENERATE = 'python -c "import secrets; print(secrets.token_hex(32))"'
_SECRET_WHITESPACE = b" \t\r\n\f\v"


def secret_file_problem(path: str, *, holds_one: bool = True) -> str | None:
    """Why the file at ``path`` cannot hold a secret, or None: it does not exist,
    is not a regular file, every user may read or change it, or (``holds_one``)
    its secret — the file's bytes without the whitespace around them — is empty
    or shorter than :data:`MIN_SECRET`.  Never says what the file holds."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return (
            f"the secret file {path!r} does not exist; create it with the secret "
            f"(generate one with {GENERATE}) and chmod 600 it"
        )
    except OSError as exc:
        return (
            f"the secret file {path!r} cannot be read ({exc.strerror or exc}); check the "
            "path and that this user may read it"
        )
    if not stat.S_ISREG(info.st_mode):
        return f"{path!r} is not a regular file; give the path of the file that holds the secret"
    if os.name == "posix" and info.st_mode & (stat.S_IROTH | stat.S_IWOTH):
        who = "read" if info.st_mode & stat.S_IROTH else "changed"
        return (
            f"the secret file {path!r} can be {who} by every user of this machine (mode "
            f"{stat.S_IMODE(info.st_mode):04o}); chmod 600 {path} (or 640 for the node's "
            "group), and replace the secret if others may have read it"
        )
    if not holds_one:
        return None
    try:
        with open(path, "rb") as file:
            key = file.read().strip(_SECRET_WHITESPACE)
    except OSError as exc:
        return (
            f"the secret file {path!r} cannot be read ({exc.strerror or exc}); check that "
            "this user may read it"
        )
    if not key:
        return f"the secret file {path!r} is empty; write the secret into it (generate one with {GENERATE})"
    if len(key) < MIN_SECRET:
        return (
            f"the secret in {path!r} has {len(key)} bytes, expected at least {MIN_SECRET}; a "
            f"short secret can be guessed from one recorded logon: generate one with {GENERATE}"
        )
    return None


#: What each kind of TLS file holds, for :func:`tls_file_problem` and its messages.
TLS_FILE_KINDS = {
    "cert": "the certificate (PEM) this end presents, followed by any intermediate CA certificates",
    "key": "the private key (PEM) of the certificate",
    "ca": "the CA certificates (PEM) that sign the peer's certificate",
}


def tls_file_problem(path: str, kind: str) -> str | None:
    """Why the file at ``path`` cannot serve as a TLS file of ``kind`` ("cert",
    "key" or "ca"; :data:`TLS_FILE_KINDS`), or None: it does not exist, is not
    a regular file or cannot be read; a certificate or CA file holds no PEM
    certificate; a key file holds no PEM private key or every user of the
    machine may read or change it (like a secret file)."""
    holds = TLS_FILE_KINDS[kind]
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return f"the TLS file {path!r} does not exist; give the path of the file holding {holds}"
    except OSError as exc:
        return (
            f"the TLS file {path!r} cannot be read ({exc.strerror or exc}); check the path "
            "and that this user may read it"
        )
    if not stat.S_ISREG(info.st_mode):
        return f"{path!r} is not a regular file; give the path of the file holding {holds}"
    if kind == "key" and os.name == "posix" and info.st_mode & (stat.S_IROTH | stat.S_IWOTH):
        who = "read" if info.st_mode & stat.S_IROTH else "changed"
        return (
            f"the private key file {path!r} can be {who} by every user of this machine (mode "
            f"{stat.S_IMODE(info.st_mode):04o}); chmod 600 {path} (or 640 for the node's "
            "group), and replace the key and its certificate if others may have read it"
        )
    try:
        with open(path, "rb") as file:
            text = file.read()
    except OSError as exc:
        return (
            f"the TLS file {path!r} cannot be read ({exc.strerror or exc}); check that this "
            "user may read it"
        )
    if kind == "key":
        if b"PRIVATE KEY-----" not in text:
            return (
                f"the file {path!r} holds no PEM private key (a '-----BEGIN ... PRIVATE "
                f"KEY-----' block); give the path of the file holding {holds}"
            )
        return None
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cafile=path)
    except (ssl.SSLError, ValueError) as exc:
        return (
            f"the file {path!r} holds no PEM certificate that loads ({exc}); give the path "
            f"of the file holding {holds}"
        )
    return None


def tls_pair_problem(cert: str, key: str) -> str | None:
    """Why the certificate file ``cert`` and the private key file ``key`` (each
    fit on its own, :func:`tls_file_problem`) do not load as one certificate
    chain — the key is not the certificate's, or is encrypted — or None."""
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key, password=_no_password)
    except (ssl.SSLError, ValueError, OSError) as exc:
        return (
            f"the private key in {key!r} does not load with the certificate in {cert!r} ({exc}); "
            "give the key the certificate was made for, unencrypted (chmod 600 protects it)"
        )
    return None


def _no_password() -> str:
    """An encrypted key file fails to load instead of asking on the terminal."""
    raise ValueError("the key is encrypted with a password")


DEFAULT_DISPATCHER = "default"


class DispatcherKind(enum.Enum):
    """How a dispatcher's threads wait for work (``runQueueType``)."""

    BLOCKING = "blocking"
    SPINNING = "spinning"
    SPIN_PARK = "spin+park"
    SPIN_YIELD = "spin+yield"
    ASYNCIO = "asyncio"

    @classmethod
    def parse(cls, text: str) -> DispatcherKind:
        """Case-insensitive lookup; raises ``ValueError`` listing the allowed kinds."""
        wanted = text.strip().lower()
        for kind in cls:
            if kind.value == wanted:
                return kind
        allowed = ", ".join(k.value for k in cls)
        raise ValueError(f"unknown dispatcher kind {text!r}; expected one of {allowed}")
