"""One immutable settings type per kind of link, each setting written once.

Theory of operation
-------------------
A setting is one field of a frozen dataclass, declared with :func:`setting`:
its default, its properties key (the camelCase of the attribute:
``max_patterns`` <-> ``maxPatterns``), its unit, what it means, and how the
text of a properties file becomes its value all sit on that field's
``metadata``.  Everything else reads the field:

* the type itself validates every field when it is made (``__post_init__``),
  with an error naming the attribute, its properties key, the value and what
  is allowed;
* the properties loader (:mod:`actorbus.config._tables`) builds its table of
  keys from the metadata instead of repeating them;
* :func:`dump_config` writes the fields back with their keys;
* the network layer takes the settings object as it is (``Bus.listen(settings=)``,
  ``Bus.connect(settings=)``, ``serve_jrep``, ``connect_jrep``), and the link
  protocol reads :class:`LinkSettings` itself;
* :func:`markdown_table` writes the table docs/configuration.md shows.

**Units.**  Times are seconds in Python (floats) and milliseconds in a
properties file (integers), as they always were there: the loader divides by
1000 and :func:`dump_config` multiplies back, and the field says so
(``unit="seconds"``, key in milliseconds).

The types: :class:`LinkSettings` (the limits and timers of one link, shared by
services and connections), :class:`ServiceSettings` and
:class:`ConnectionSettings` (a :class:`LinkSettings` plus what only a service
or only a dialled link has — flat, so the Python attributes mirror the flat
``service.NAME.KEY`` keys and a service's settings *are* the settings of the
links it accepts), :class:`GatewaySettings` (a J.REP gateway) and
:class:`JrepClientSettings` (a J.REP client bus) and
:class:`MulticastSettings` (a reliable multicast channel; declared in
:mod:`actorbus.config._multicast_settings`, re-exported here).
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from actorbus.config._fields import (
    SettingInfo,
    Settings,
    bool_check,
    choice,
    file_value,
    host_check,
    int_row,
    key_of,
    name_check,
    number_check,
    parsed_check,
    path_setting,
    setting,
    settings_fields,
    strings_check,
)
from actorbus.config._multicast_settings import MulticastSettings
from actorbus.config._values import (
    _address_filter,
    _auth,
    _boolean,
    _byte_order,
    _directory,
    _host,
    _origins,
    _permissions_file,
    _reference,
    _secret_file,
    _tls_file,
    _url_path,
)
from actorbus.errors import UsageError

__all__ = [
    "ConnectionSettings",
    "GatewaySettings",
    "JrepClientSettings",
    "LinkSettings",
    "MulticastSettings",
    "ServiceSettings",
    "SettingInfo",
    "default_of",
    "file_value",
    "from_old_keywords",
    "key_of",
    "markdown_table",
    "setting",
    "settings_fields",
]

_S = TypeVar("_S")


# ================================================================= one link


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkSettings(Settings):
    """The limits and timers of one link: both ends read them, the link
    protocol included.  A service's settings apply to every link it accepts.
    Times are seconds (0 switches a timer off); both nodes should use the same
    ``byte_order`` and ``max_frame_size``."""

    input_buffer_size: int = setting(
        65_536, low=0, unit="bytes", doc="bytes read from the socket at a time"
    )
    output_buffer_size: int = setting(
        65_536,
        low=0,
        unit="bytes",
        doc="bytes the transport may hold unsent before it asks the link to pause",
    )
    byte_order: Literal["big", "little"] = setting(
        "big",
        check=choice("big", "little"),
        unit="word",
        row=_byte_order,
        doc="byte order of the 4-byte frame length prefix (`BIG_ENDIAN`, `LITTLE_ENDIAN` "
        "are read too)",
    )
    message_queue_size: int = setting(
        0,
        low=0,
        unit="messages, 0 = unlimited",
        doc="most data messages waiting for a socket that cannot keep up; past it the link "
        "closes (0 = unlimited); past half of it the publishers sending to the peer are told "
        "the link is congested, as for `messageQueueHighWater`",
    )
    heartbeat_delay: float = setting(
        5.0,
        ms=True,
        zero="off",
        unit="seconds",
        doc="send a heartbeat after this long with nothing received (0 = off); a peer that "
        "vanished is declared down at most `heartbeatDelay + heartbeatReplyDelay` after "
        "its last byte (15 s by default)",
    )
    heartbeat_reply_delay: float = setting(
        10.0,
        ms=True,
        unit="seconds",
        doc="close the link when nothing arrives this long after a heartbeat (0 = the same "
        "as `heartbeatDelay`)",
    )
    input_backlog: int = setting(
        10_000,
        low=0,
        unit="messages, 0 = never pause",
        doc="stop reading the link while a mailbox or inbox it feeds holds more (resume "
        "below half; 0 = never pause)",
    )
    logon_timeout: float = setting(
        zero="never",
        default=10.0,
        ms=True,
        unit="seconds",
        doc="the whole logon (authentication, receipts, both `LOGON_COMPLETE`s) must "
        "finish within it (0 = never)",
    )
    frame_timeout: float = setting(
        zero="never",
        default=30.0,
        ms=True,
        unit="seconds",
        doc="a frame whose first bytes arrived must be whole within it (0 = never)",
    )
    max_frame_size: int = setting(
        1_049_600,
        low=1_024,
        high=0xFFFF_FFFB,
        unit="bytes",
        doc="largest frame sent or accepted (1 MiB + 1 KiB by default; before the logon "
        "frames are at most 4096 bytes whatever it says)",
    )
    max_keys: int = setting(
        16_384, low=1, unit="keys", doc="keys (type and subject) the peer may define on one link"
    )
    max_subject_length: int = setting(
        1_024,
        low=1,
        unit="characters",
        doc="longest type name, subject or wildcard pattern the peer may send",
    )
    max_feeds: int = setting(
        16_384,
        low=1,
        unit="advertisements and subscriptions",
        doc="advertisements and subscriptions the peer may hold at once",
    )
    max_patterns: int = setting(
        1_024,
        low=1,
        unit="wildcard subscriptions",
        doc="wildcard subscriptions the peer may hold at once",
    )
    max_groups: int = setting(
        1_024,
        low=1,
        unit="queue groups",
        doc="queue groups (key and group name) the peer may hold at once",
    )
    message_queue_bytes: int = setting(
        64 * 1_048_576,
        low=0,
        unit="bytes, 0 = unlimited",
        doc="most bytes waiting for a socket that cannot keep up (every frame counted), "
        "then the link closes as for `messageQueueSize` (64 MiB by default; 0 = unlimited)",
    )
    message_queue_high_water: int = setting(
        -1,
        low=-1,
        unit="bytes, -1 = half of messageQueueBytes, 0 = never",
        doc="past this many bytes waiting (or half of `messageQueueSize` messages, whichever "
        "comes first) the publishers sending to the peer are told the link is congested, and "
        "told again once both are below half of their marks (-1 = half of "
        "`messageQueueBytes`, 32 MiB when that is 0; 0 = never tell)",
    )
    forward: bool = setting(
        False,
        check=bool_check,
        unit="boolean",
        row=_boolean,
        doc="forward feeds between this link and the node's other forwarding links/gateway clients",
    )
    max_hops: int = setting(
        8,
        low=1,
        high=255,
        unit="hops",
        doc="links a forwarded notification (or a source-routed message) may have crossed "
        "when it arrives on this link; past it, it is dropped and counted (`hop_limited`; a "
        "routed message bounces)",
    )

    def __post_init__(self) -> None:
        Settings.__post_init__(self)
        high = self.message_queue_high_water
        if self.message_queue_bytes and high > self.message_queue_bytes:
            raise UsageError(
                f"{type(self).__name__}(message_queue_high_water={high}) is over "
                f"message_queue_bytes={self.message_queue_bytes}: publishers would never be "
                "told before the link resets; lower it or leave it at -1 (the properties "
                "keys messageQueueHighWater and messageQueueBytes)"
            )

    @property
    def high_water(self) -> int:
        """The output queue's high-water mark in bytes (0: publishers never told)."""
        high = self.message_queue_high_water
        if high >= 0:
            return high
        return (self.message_queue_bytes or _UNLIMITED_HIGH_WATER * 2) // 2

    @property
    def high_water_messages(self) -> int:
        """The output queue's high-water mark in data messages: half of
        ``message_queue_size`` (0: no count limit, or publishers never told).
        One congestion rule for both limits: publishers are told when what
        waits passes either mark, whichever comes first, so they hear of it
        before either limit resets the link."""
        if not self.message_queue_size or self.message_queue_high_water == 0:
            return 0
        return max(1, self.message_queue_size // 2)


#: The high-water mark when ``message_queue_bytes`` is 0 (unlimited): 32 MiB.
_UNLIMITED_HIGH_WATER = 32 * 1_048_576

_SECRET_DOC = "a file holding the secret every peer proves at logon (the path, never the secret)"


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceSettings(LinkSettings):
    """A listening service: the :class:`LinkSettings` of every link it accepts,
    plus who may connect and how they prove it.  ``Bus.listen(settings=...)``."""

    address_filter: tuple[str, ...] = setting(
        (),
        check=strings_check,
        unit="comma list",
        row=_address_filter,
        doc="only these hosts (`h`) or endpoints (`h:port`; IPv6 as `::1` or `[::1]:80`) "
        "may connect; empty: everyone",
    )
    service_selector: str | None = setting(
        None,
        check=name_check,
        unit="selector name",
        row=lambda name: _reference(name, "selector"),
        doc="the selector (I/O thread) that accepts; listed in `net.selectors`",
    )
    connection_selector: str | None = setting(
        None,
        check=name_check,
        unit="selector name",
        row=lambda name: _reference(name, "selector"),
        doc="the selector the accepted links run on (default: `serviceSelector`'s)",
    )
    max_connections: int = setting(
        512, low=1, unit="connections", doc="connections open at once; more are closed at once"
    )
    max_connections_per_host: int = setting(
        128,
        low=1,
        unit="connections",
        doc="connections not yet logged on open at once from one source address (a logged-on "
        "link no longer counts)",
    )
    accept_backlog: int = setting(
        1_024,
        low=1,
        unit="connections",
        doc="connections the kernel may hold waiting to be accepted",
    )
    secret_file: str | os.PathLike[str] | None = path_setting(
        row=_secret_file,
        doc=_SECRET_DOC + "; not readable by every user",
    )
    peer_secrets_file: str | os.PathLike[str] | None = path_setting(
        row=lambda name: _secret_file(name, holds_one=False),
        doc="a file of `node-id = secret` lines: the nodes that prove a secret of their own",
    )
    auth: Literal["auto", "none"] = setting(
        "auto",
        check=choice("auto", "none"),
        unit="word",
        row=_auth,
        doc="`auto`: without a secret configured, the links prove this user's secret "
        "(docs/security.md) and the service may listen on loopback only; `none`: links "
        "without a secret accepted on any address (one warning)",
    )
    permissions_file: str | os.PathLike[str] | None = path_setting(
        row=_permissions_file,
        doc="a file of allow/deny rules: what each peer may publish, subscribe to, request "
        "and reply on (none: everything)",
    )
    tls_cert_file: str | os.PathLike[str] | None = path_setting(
        row=lambda name: _tls_file(name, "cert"),
        doc="TLS: the service's certificate (PEM, its chain after it); needs `tlsKeyFile`",
    )
    tls_key_file: str | os.PathLike[str] | None = path_setting(
        row=lambda name: _tls_file(name, "key"),
        doc="TLS: its private key, unencrypted, not readable by every user",
    )
    tls_ca_file: str | os.PathLike[str] | None = path_setting(
        row=lambda name: _tls_file(name, "ca"),
        doc="TLS: the CA certificates that sign the clients' certificates (mutual TLS)",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectionSettings(LinkSettings):
    """A dialled link: its :class:`LinkSettings`, plus how it dials and what it
    proves.  ``Bus.connect(settings=...)``."""

    bind_host: str | None = setting(
        None,
        check=host_check,
        unit="host",
        row=_host,
        doc="the local address to dial from (none: any)",
    )
    bind_port: int = setting(0, low=0, high=65535, unit="port", doc="the local port (0: any)")
    selector: str | None = setting(
        None,
        check=name_check,
        unit="selector name",
        row=lambda name: _reference(name, "selector"),
        doc="the selector (I/O thread) the link runs on; listed in `net.selectors`",
    )
    reconnect: bool = setting(
        False,
        check=bool_check,
        unit="boolean",
        row=_boolean,
        doc="dial again after a lost or refused link",
    )
    reconnect_delay: float = setting(
        5.0,
        ms=True,
        unit="seconds",
        aliases=("reconnectTime",),
        doc="wait before dialling again, doubling per failed attempt up to 10x (30 s at most "
        "unless longer)",
    )
    connect_timeout: float = setting(
        10.0,
        ms=True,
        unit="seconds",
        doc="give up a dial the peer does not answer (0: when the operating system does)",
    )
    secret_file: str | os.PathLike[str] | None = path_setting(
        row=_secret_file,
        doc="a file holding the secret this link proves at logon (the path, never the secret)",
    )
    auth: Literal["auto", "none"] = setting(
        "auto",
        check=choice("auto", "none"),
        unit="word",
        row=_auth,
        doc="`auto`: without a secret configured, the link proves this user's secret "
        "(docs/security.md); `none`: it proves none (for a service whose `auth` is `none`)",
    )
    permissions_file: str | os.PathLike[str] | None = path_setting(
        row=_permissions_file,
        doc="a file of allow/deny rules: what the node this link dials may do here",
    )
    tls_ca_file: str | os.PathLike[str] | None = path_setting(
        row=lambda name: _tls_file(name, "ca"),
        doc="TLS: the CA certificates that sign the service's certificate; set: the link "
        "speaks TLS and verifies the service's certificate and host name",
    )
    tls_cert_file: str | os.PathLike[str] | None = path_setting(
        row=lambda name: _tls_file(name, "cert"),
        doc="TLS: this node's client certificate (mutual TLS); needs `tlsKeyFile`",
    )
    tls_key_file: str | os.PathLike[str] | None = path_setting(
        row=lambda name: _tls_file(name, "key"),
        doc="TLS: its private key, unencrypted, not readable by every user",
    )
    tls_server_name: str | None = setting(
        None,
        check=host_check,
        unit="host",
        row=_host,
        doc="the name the service's certificate must carry (none: the connection's host)",
    )


# ================================================================= J.REP


@dataclass(frozen=True, slots=True, kw_only=True)
class GatewaySettings(Settings):
    """A J.REP gateway and the limits and timers of each of its sessions
    (``Bus.serve_jrep(settings=...)``; docs/jrep.md)."""

    path: str = setting(
        "/jrep",
        check=lambda v: parsed_check(_url_path("path"), v),
        unit="URL path",
        row=_url_path,
        doc="the URL path of the J.REP WebSocket endpoint (not `/actorbus.js`)",
    )
    allowed_origins: tuple[str, ...] = setting(
        (),
        check=strings_check,
        unit="comma list",
        row=_origins,
        doc="`Origin` values a WebSocket handshake may carry (`*`: any); empty: the "
        "gateway's own origin only",
    )
    token_file: str | os.PathLike[str] | None = path_setting(
        row=_secret_file,
        doc="a file holding the token every client gives, not readable by every user",
    )
    auth: Literal["auto", "none"] = setting(
        "auto",
        check=choice("auto", "none"),
        unit="word",
        row=_auth,
        doc="`auto`: a token is required beyond loopback; `none`: clients without a token "
        "accepted on any address (one warning)",
    )
    permissions_file: str | os.PathLike[str] | None = path_setting(
        row=_permissions_file,
        doc="a file of allow/deny rules; the clients are the peer named like the gateway",
    )
    static_dir: str | os.PathLike[str] | None = path_setting(
        row=_directory,
        doc="a directory whose files are served over HTTP on the same port",
    )
    selector: str | None = setting(
        None,
        check=name_check,
        unit="selector name",
        row=lambda name: _reference(name, "selector"),
        doc="the selector (I/O thread) the gateway runs on (none: the default one)",
    )
    inspect_page: bool = setting(
        False,
        check=bool_check,
        unit="boolean",
        row=_boolean,
        doc="serve `/inspect`, a live page of the node's actors, dispatchers, feeds and links "
        "(and `/inspect.json`, what it shows), with the gateway's token",
    )
    metrics: bool = setting(
        False,
        check=bool_check,
        unit="boolean",
        row=_boolean,
        doc="serve `/metrics`, the node's counters in Prometheus' text format, with the "
        "gateway's token (needs `prometheus_client`: the `metrics` extra)",
    )
    max_message_size: int = setting(
        1 << 20, low=1, unit="bytes", doc="a larger WebSocket message closes the session (1009)"
    )
    max_batch: int = setting(
        1_000, low=1, unit="messages per wire message", doc="J.REP messages in one wire array"
    )
    max_subscriptions: int = setting(
        1_000,
        low=0,
        unit="keys per session",
        doc="keys a session subscribes to, publishes on or replies on",
    )
    max_requests: int = setting(
        1_000, low=0, unit="requests per session", doc="requests outstanding each way per session"
    )
    message_rate: float = setting(
        1_000.0,
        check=lambda v: number_check(v, "messages per second"),
        row=int_row(0, None, "messages per second, 0 = no limit"),
        unit="messages per second, 0 = no limit",
        doc="J.REP messages a session may send on average (0 = no limit); over it, reading "
        "the session pauses",
    )
    message_burst: int = setting(
        0,
        low=0,
        unit="messages, 0 = one second's worth",
        doc="messages at once above the rate (0: one second's worth)",
    )
    message_queue_size: int = setting(
        10_000,
        low=1,
        unit="messages",
        doc="queued for one client before its session is closed (1008)",
    )
    handshake_timeout: float = setting(
        10.0,
        ms=True,
        low=0.001,
        unit="seconds",
        doc="the WebSocket handshake, then ConnectToQueue, must come within it",
    )
    idle_timeout: float = setting(
        60.0,
        ms=True,
        low=0.001,
        unit="seconds",
        doc="a session that sends nothing for this long expires",
    )
    heartbeat_delay: float = setting(
        20.0,
        ms=True,
        zero="off",
        unit="seconds",
        doc="a Heartbeat after this long without sending (0 = off)",
    )

    @property
    def burst(self) -> float:
        """The rate limiter's bucket size."""
        return float(self.message_burst or max(1.0, self.message_rate))


@dataclass(frozen=True, slots=True, kw_only=True)
class JrepClientSettings(Settings):
    """A client bus of another node's J.REP gateway (``Bus.connect_jrep(url,
    settings=...)``; docs/jrep.md, "Federation")."""

    token_file: str | os.PathLike[str] | None = path_setting(
        row=_secret_file,
        doc="a file holding the gateway's token, not readable by every user",
    )
    reconnect: bool = setting(
        True,
        check=bool_check,
        unit="boolean",
        row=_boolean,
        doc="dial again after a lost or refused session",
    )
    reconnect_delay: float = setting(
        5.0, ms=True, unit="seconds", doc="doubles per failed attempt up to 10x"
    )
    connect_timeout: float = setting(
        10.0,
        ms=True,
        unit="seconds",
        doc="give up a dial after it (0: as long as the system waits)",
    )
    heartbeat: float = setting(
        20.0,
        ms=True,
        zero="off",
        unit="seconds",
        doc="WebSocket pings and, when idle, J.REP Heartbeats; a ping unanswered this long "
        "ends the session, so a vanished gateway is noticed within twice it (0 = off)",
    )
    permissions_file: str | os.PathLike[str] | None = path_setting(
        row=_permissions_file,
        doc="a file of allow/deny rules; the remote node is the peer named like the client",
    )
    selector: str | None = setting(
        None,
        check=name_check,
        unit="selector name",
        row=lambda name: _reference(name, "selector"),
        doc="the selector (I/O thread) the client runs on (none: the default one)",
    )


# ================================================================= docs


def markdown_table(cls: type) -> str:
    """The markdown table of settings type ``cls`` (key | attribute | default |
    unit | meaning) that docs/configuration.md shows between
    ``<!-- settings-table:NAME -->`` and ``<!-- /settings-table -->``
    (``make settings-tables`` rewrites them).  A service's or connection's
    table leaves out the :class:`LinkSettings` fields, which have a table of
    their own."""
    inherited = set()
    if cls is not LinkSettings and issubclass(cls, LinkSettings):
        inherited = {f.name for f in dataclasses.fields(LinkSettings)}
    lines = [
        "| key | attribute | default | unit | meaning |",
        "|---|---|---|---|---|",
    ]
    for f, info in settings_fields(cls):
        if f.name in inherited:
            continue
        key = f"`{info.key}`" + "".join(f" (alias `{a}`)" for a in info.aliases)
        shown = file_value(info, f.default)
        default = "none" if shown is None else ("empty" if shown == "" else f"`{shown}`")
        if info.ms:
            default += f" ({f.default:g} s)"
        unit = f"{info.unit} (file: milliseconds)" if info.ms else info.unit
        lines.append(f"| {key} | `{f.name}` | {default} | {unit} | {info.doc} |")
    return "\n".join(lines) + "\n"


# ================================================================= old keywords


def default_of(cls: type, attribute: str) -> Any:
    """The default of setting ``attribute`` of settings type ``cls`` (for the
    constants other modules name, so that the default stays written once)."""
    return next(f.default for f, _ in settings_fields(cls) if f.name == attribute)


def from_old_keywords(
    call: str, cls: type[_S], settings: LinkSettings | _S | None, old: dict[str, Any]
) -> _S:
    """``settings`` (None: the defaults; a plain :class:`LinkSettings` for a
    service or connection: widened to ``cls``) with the keyword arguments
    ``call`` took before settings objects, ``old``, applied — each with a
    :class:`DeprecationWarning` naming the new spelling.  An argument that is
    no setting of ``cls`` is a :class:`TypeError`, as for any call."""
    if settings is None:
        base: Any = cls()
    elif isinstance(settings, cls):
        base = settings
    elif type(settings) is LinkSettings and issubclass(cls, LinkSettings):
        base = cls(**{f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)})
    else:
        raise UsageError(
            f"{call}(settings={type(settings).__name__}(...)): expected a {cls.__name__} "
            f"(or None for the defaults), e.g. settings={cls.__name__}(...)"
        )
    if not old:
        return base  # type: ignore[no-any-return]
    names = {f.name for f, _ in settings_fields(cls)}
    unknown = sorted(set(old) - names)
    if unknown:
        raise TypeError(f"{call}() got an unexpected keyword argument {unknown[0]!r}")
    where = "LinkSettings" if issubclass(cls, LinkSettings) else cls.__name__
    link = {f.name for f in dataclasses.fields(LinkSettings)}
    for name, value in old.items():
        owner = where if name in link else cls.__name__
        warnings.warn(
            f"{call}({name}=...) is deprecated; pass settings={owner}({name}={value!r}) "
            f"(or dataclasses.replace(settings, {name}=...)); the keyword goes in the next release",
            DeprecationWarning,
            stacklevel=3,
        )
    return dataclasses.replace(base, **old)  # type: ignore[no-any-return]
