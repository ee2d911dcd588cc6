"""J.REP's vocabulary: message parts, management verbs, reserved subjects, the
error codes this gateway declares, and the envelope of one wire message.

A wire message is one WebSocket text frame holding a JSON **array** of message
objects (docs/jrep.md).  :func:`parse_frame` turns a frame into that list or
raises :class:`JrepFault` naming what is wrong; it never raises anything else,
whatever the frame holds.  :func:`error_object` builds the message every
refusal is reported with, on ``ClientBusErrors``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final, NoReturn

__all__ = [
    "CLIENT_BUS",
    "CLIENT_BUS_ERRORS",
    "RESERVED",
    "SERVER_BUS",
    "JrepFault",
    "dumps",
    "error_object",
    "parse_frame",
]

# ----------------------------------------------------------------- subjects
#: the client bus's management endpoint: what the gateway sends management to
CLIENT_BUS: Final = "ClientBus"
#: the server bus's management endpoint: what the client sends management to
SERVER_BUS: Final = "ServerBus"
#: where refusals are delivered to the client
CLIENT_BUS_ERRORS: Final = "ClientBusErrors"
#: subjects a client may never subscribe to, publish on or request on
RESERVED: Final = frozenset({CLIENT_BUS, SERVER_BUS, CLIENT_BUS_ERRORS})

# -------------------------------------------------------------------- parts
TO_SUBJECT: Final = "ToSubject"
COMMAND_TYPE: Final = "CommandType"
REPLY_TO: Final = "ReplyTo"
VALUE: Final = "Value"
PRIORITY: Final = "PriorityProcessing"
ERROR_MESSAGE: Final = "ErrorMessage"
THROWABLE: Final = "Throwable"
CAPABILITIES_FLAGS: Final = "CapabilitiesFlags"
SUBJECT: Final = "Subject"
SUBJECTS_LIST: Final = "SubjectsList"
REASON: Final = "Reason"
# extensions (docs/jrep.md, "Extensions")
TYPE: Final = "Type"
STATE: Final = "State"
ROLE: Final = "Role"
KEYS: Final = "Keys"
REMAINING: Final = "Remaining"
STATUS: Final = "Status"
SENDER: Final = "Sender"
ERROR_CODE: Final = "ErrorCode"
REPLY_PREFIX: Final = "ReplyPrefix"
SESSION_ID: Final = "SessionId"
NODE_ID: Final = "NodeId"
HEARTBEAT_DELAY: Final = "HeartbeatDelay"
IDLE_TIMEOUT: Final = "IdleTimeout"
#: the Role values of RemoteSubscribe / RemoteUnsubscribe
PUBLISHER: Final = "publisher"
SUBSCRIBER: Final = "subscriber"

# -------------------------------------------------------------------- verbs
CONNECT_TO_QUEUE: Final = "ConnectToQueue"
CAPABILITIES_NOTICE: Final = "CapabilitiesNotice"
FINISH_STATE_SYNC: Final = "FinishStateSync"
REMOTE_SUBSCRIBE: Final = "RemoteSubscribe"
REMOTE_UNSUBSCRIBE: Final = "RemoteUnsubscribe"
DISCONNECT: Final = "Disconnect"
SESSION_EXPIRED: Final = "SessionExpired"
HEARTBEAT: Final = "Heartbeat"
# extensions
FEED_STATE: Final = "FeedState"
CANCEL: Final = "Cancel"

#: the verbs a client may send to ServerBus
CLIENT_VERBS: Final = (
    CONNECT_TO_QUEUE,
    CAPABILITIES_NOTICE,
    FINISH_STATE_SYNC,
    REMOTE_SUBSCRIBE,
    REMOTE_UNSUBSCRIBE,
    CANCEL,
    HEARTBEAT,
    DISCONNECT,
)

#: the one capability this gateway offers
CAPABILITIES: Final = "WebSockets"
#: the flag a client bus (another node) adds to its CapabilitiesNotice: the
#: gateway then tells it about the bus's subscribers and feed-state changes of
#: every key (docs/jrep.md, "Federation")
FEDERATION: Final = "Federation"

# ------------------------------------------------------------- error codes
#: the frame is not JSON, or not an array of objects
MALFORMED: Final = "Malformed"
#: a part has the wrong JSON type, or a required part is missing
BAD_PART: Final = "BadPart"
#: a verb this gateway does not know, or CommandType on a data subject
UNKNOWN_COMMAND: Final = "UnknownCommand"
#: a subject reserved for management, or another session's private subject
RESERVED_SUBJECT: Final = "ReservedSubject"
#: no message class for the subject (no Type part, none configured) or an unknown type
UNKNOWN_TYPE: Final = "UnknownType"
#: Value does not make a valid message of the class
BAD_VALUE: Final = "BadValue"
#: the permissions refuse the action
REFUSED: Final = "Refused"
#: a per-session limit (subscriptions, outstanding requests) is reached
LIMIT: Final = "LimitReached"
#: a message before ConnectToQueue, or data before this side's FinishStateSync
NOT_ACTIVE: Final = "NotActive"
#: a binary frame (J.REP is text)
BINARY: Final = "BinaryFrame"
#: a reply or cancel names no outstanding request of this session
NO_REQUEST: Final = "NoSuchRequest"
#: a request nobody took (no replier) or a reply the bus refused
NO_REPLIER: Final = "NoReplier"


class JrepFault(Exception):
    """One refusal: ``code`` (above) and ``text``, which says what was wrong, the
    value and the fix.  Reported to the client on ClientBusErrors; never a
    traceback."""

    def __init__(self, code: str, text: str) -> None:
        super().__init__(text)
        self.code = code
        self.text = text


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


#: one decoder and encoders made once: ``json.loads`` / ``json.dumps`` with
#: arguments other than the defaults build new ones on every call, a cost of
#: the order of a small message's whole handling
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
_ENCODER = json.JSONEncoder(
    ensure_ascii=False, check_circular=False, allow_nan=False, separators=(",", ":")
)
_ENCODER_ASCII = json.JSONEncoder(
    ensure_ascii=True, check_circular=False, allow_nan=False, separators=(",", ":")
)


def _c_encoder() -> Callable[[Any, int], Any] | None:
    """``_ENCODER``'s C encoder made once (``JSONEncoder.encode`` makes one per
    call), or None where the C accelerator is missing.  What it encodes is
    built here, from messages: no cycles to check for."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    encoder: Callable[[Any, int], Any] = make(
        None, _ENCODER.default, json.encoder.encode_basestring, None, ":", ",", False, False, False
    )
    return encoder


_C_ENCODER = _c_encoder()


def loads(text: str) -> Any:
    """JSON ``text`` as Python values (NaN and Infinity refused): ValueError
    (``json.JSONDecodeError``) or RecursionError when it is not JSON."""
    try:
        value, end = _DECODER.raw_decode(text)
    except ValueError:
        return _DECODER.decode(text)  # (leading white space; else the error)
    if end != len(text):
        return _DECODER.decode(text)  # (trailing white space; else the error)
    return value


def parse_frame(text: str | bytes) -> list[dict[str, Any]]:
    """The message objects of one frame (possibly none); JrepFault if the frame
    is not a JSON array of objects.  Each object still needs its parts checked
    (:func:`part`)."""
    if not isinstance(text, str):
        raise JrepFault(
            BINARY,
            f"received a binary frame of {len(text)} bytes; J.REP messages are text frames "
            "holding a JSON array: send them as text",
        )
    try:
        value = loads(text)
    except (ValueError, RecursionError) as exc:
        detail = str(exc) if isinstance(exc, ValueError) else "nested too deeply"
        raise JrepFault(
            MALFORMED,
            f"the frame is not valid JSON ({detail[:200]}); send a JSON array of message "
            'objects, e.g. [{"ToSubject": "ServerBus", "CommandType": "Heartbeat"}]',
        ) from None
    if not isinstance(value, list):
        raise JrepFault(
            MALFORMED,
            f"the frame holds a JSON {_json_type(value)}; every J.REP wire message is a JSON "
            "array of message objects (wrap a single message in [...])",
        )
    return value


def check_object(item: object, index: int) -> dict[str, Any]:
    """``item`` (the ``index``-th of a frame) as a message object with a string
    ToSubject; JrepFault if it is not one."""
    if not isinstance(item, dict):
        raise JrepFault(
            MALFORMED,
            f"item {index} of the array is a JSON {_json_type(item)}; each item is a message "
            "object with at least a ToSubject string",
        )
    subject = item.get(TO_SUBJECT)
    if not isinstance(subject, str):
        found = "missing" if subject is None else f"a JSON {_json_type(subject)}"
        raise JrepFault(
            BAD_PART,
            f"item {index}: ToSubject is {found}; every message names its subject as a "
            'string, e.g. "ToSubject": "/prices"',
        )
    return item


def part(message: dict[str, Any], name: str, kind: type | tuple[type, ...], what: str) -> Any:
    """Part ``name`` of ``message`` (None when absent); JrepFault when present with
    another JSON type (``what`` names the expected one, e.g. "a string")."""
    value = message.get(name)
    if value is None:
        return None
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        ok = False
    else:
        ok = isinstance(value, kind)
    if not ok:
        raise JrepFault(
            BAD_PART,
            f"{name} is a JSON {_json_type(value)} ({shown_json(value)}); expected {what}",
        )
    return value


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def shown_json(value: object, limit: int = 60) -> str:
    """``value`` as bounded JSON text for an error message."""
    try:
        text = json.dumps(value, ensure_ascii=True)
    except (ValueError, TypeError, RecursionError):
        text = f"<{_json_type(value)}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def error_object(fault: JrepFault, about: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ClientBusErrors message reporting ``fault``; ``about`` is the message
    it refuses (its ToSubject, CommandType and ReplyTo are echoed when they are
    strings, so the client can tell which one it was)."""
    error: dict[str, Any] = {
        TO_SUBJECT: CLIENT_BUS_ERRORS,
        ERROR_CODE: fault.code,
        ERROR_MESSAGE: fault.text,
    }
    if about is not None:
        for name, echo in (
            (TO_SUBJECT, SUBJECT),
            (COMMAND_TYPE, COMMAND_TYPE),
            (REPLY_TO, REPLY_TO),
        ):
            value = about.get(name)
            if isinstance(value, str):
                error[echo] = value[:200]
    return error


def dumps(messages: list[dict[str, Any]]) -> str:
    """One wire message: the JSON array of ``messages`` (no NaN: the values are
    made JSON-safe before, docs/jrep.md)."""
    try:
        if _C_ENCODER is not None:
            text = "".join(_C_ENCODER(messages, 0))
        else:
            text = _ENCODER.encode(messages)
        text.encode()  # a lone surrogate in some string cannot travel as UTF-8
    except UnicodeEncodeError:
        text = _ENCODER_ASCII.encode(messages)
    return text
