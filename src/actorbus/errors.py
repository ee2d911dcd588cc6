"""One exception tree for the whole package, rooted at :class:`Error`.

The tree is split by *who is at fault*, so callers can catch what they can act on:

* :class:`UsageError` — the calling code misused the API (wrong state, bad
  argument, bad declaration, bad configuration).  Fix the code or the file.
* :class:`PeerError` — something outside the process misbehaved (bytes from a
  peer, a link that dropped).  The node keeps running; the error is logged,
  counted and reported.
* :class:`CodecError` — bytes could not be turned into a message (or a message
  into bytes).  Raised by the codec for both local misuse (a message too large
  to send) and hostile input (garbage from the wire).

Every message says what happened, the value or state involved, and what to do.
The original exception, where there is one, is chained in ``__cause__``.

Every error of the core (bus, actors, config, links) is defined and exported
here.  The subsystems export their own finer classes, all under this tree:
:mod:`actorbus.fsm` (``TransitionNotAllowed``, ``EventArgumentError``, ...),
:mod:`actorbus.journal` (``JournalError`` and its subclasses) and
:mod:`actorbus.spark` (``SparkPipelineError`` and its subclasses).
"""

from __future__ import annotations

__all__ = [
    "CallbackError",
    "CodecError",
    "ConfigError",
    "DeclarationError",
    "Error",
    "FeedStateError",
    "FsmError",
    "LinkClosedError",
    "MessageTooLargeError",
    "NotRegisteredError",
    "PeerError",
    "ProtocolError",
    "RecordingError",
    "RegistrationError",
    "RequestError",
    "RequestTimeoutError",
    "RuntimeClosedError",
    "SmSyntaxError",
    "SubjectPatternError",
    "TimerError",
    "UnknownDispatcherError",
    "UsageError",
    "UsageWarning",
    "ValidationError",
]


class Error(Exception):
    """Root of every exception raised by actorbus."""


# --------------------------------------------------------------------------- misuse


class UsageError(Error):
    """The calling code used the API in a way it does not allow."""


class UsageWarning(UserWarning):
    """The calling code used the API in a way it allows but that is most likely a
    mistake (a ``*`` in a plain ``str`` subject, say).  Issued with
    :func:`warnings.warn`, so it shows even when actorbus's logging is off; the
    text says what to write instead, and how to keep the call when it was meant.
    """


class DeclarationError(UsageError, TypeError):
    """A message, field struct or request class is declared wrongly.

    Raised once, when the class statement runs, naming the class and field.
    """


class ValidationError(UsageError, TypeError):
    """A value given to a message constructor has the wrong type or is missing.

    The text names the class, the field, the expected and the found type.
    """


class RegistrationError(UsageError):
    """An actor was registered twice, or with an unknown dispatcher."""


class NotRegisteredError(RegistrationError):
    """The operation needs an actor registered with a runtime, and it is not."""


class UnknownDispatcherError(RegistrationError, LookupError):
    """A dispatcher name that the runtime's configuration does not define."""


class RuntimeClosedError(UsageError):
    """The runtime was closed; it accepts no more registrations or lifecycle calls."""


class TimerError(UsageError, ValueError):
    """A timer was asked for with an impossible delay or period."""


class FeedStateError(UsageError):
    """A feed was used in a state that does not allow the operation
    (publishing while DOWN, using a closed feed, ...)."""


class CallbackError(UsageError):
    """A feed callback was set outside its window, or is missing when needed."""


class RequestError(UsageError):
    """A request could not be made (no replier is up), a reply is not allowed, or
    (from :meth:`~actorbus.Actor.ask`) the replier answered with an ERROR reply."""


class RequestTimeoutError(RequestError, TimeoutError):
    """A request's timeout passed before its repliers finished
    (:meth:`~actorbus.Actor.ask`).  Also a :class:`TimeoutError`."""


class SubjectPatternError(UsageError):
    """A subject wildcard pattern breaks a rule of its dialect (or is not a str).

    The text names the pattern, the broken rule and the fix.
    """


class FsmError(UsageError):
    """A state machine definition or binding is wrong."""


class ConfigError(UsageError):
    """A configuration file is malformed or holds an invalid value.

    ``str(err)`` reads ``file:line: key=value: expected ..., found ...``.
    The parts are also available as attributes.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        key: str | None = None,
    ) -> None:
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(f"{where}{message}")
        self.path = path
        self.line = line
        self.key = key
        self.detail = message


class RecordingError(UsageError):
    """An actor's recording cannot be written or replayed: the file is damaged,
    truncated, of another version or not a recording (the message names the
    byte), or it names an actor class or message type that cannot be imported."""


class SmSyntaxError(FsmError):
    """A `.sm` (SMC) state machine file is malformed.

    ``str(err)`` reads ``file:line:column: what was found; what was expected``.
    """

    def __init__(self, message: str, *, path: str, line: int, column: int) -> None:
        super().__init__(f"{path}:{line}:{column}: {message}")
        self.path = path
        self.line = line
        self.column = column
        self.detail = message


# --------------------------------------------------------------------- codec / wire


class CodecError(Error):
    """Bytes could not be decoded into a message, or a message could not be encoded."""


class MessageTooLargeError(CodecError):
    """An encoded message is larger than the configured maximum size."""


# ---------------------------------------------------------------------- peer / net


class PeerError(Error):
    """A remote peer or the network misbehaved; the node itself is fine."""


class ProtocolError(PeerError):
    """A peer broke the link protocol (bad frame, bad handshake, oversized frame)."""


class LinkClosedError(PeerError):
    """The operation needs a link that is closed."""
