"""A session's inbound side: each J.REP message the client sends becomes a call
on the session's :class:`~actorbus.bus.party.RemoteParty`, or an error on
``ClientBusErrors`` naming what was wrong and the fix (docs/jrep.md has the
mapping).  Nothing a client sends raises out of :meth:`ClientSide.received`.

Per received wire message (one JSON array): the messages with a non-zero
``PriorityProcessing`` are handled first, then the others, each group in the
order sent; the party's deliveries are held for the whole array
(``hold_deliveries``), so the actors it makes runnable are woken once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..._log import logger, shown
from ...bus.message import Message, MessageKey, Notification, Reply, Request, lookup_type
from ...bus.party import Role
from ...bus.permissions import Action
from ...bus.subjects import is_private
from . import _parts as p
from ._parts import JrepFault, check_object, parse_frame, part
from ._session_base import SessionBase
from ._values import decoder_of, message_from_json

__all__ = ["ClientSide"]


class ClientSide(SessionBase):
    """What the client sends, handled (loop thread)."""

    def received(self, frame: str | bytes) -> int:
        """Handle one wire message; returns how many J.REP messages it held."""
        try:
            items = parse_frame(frame)
        except JrepFault as fault:
            self.fault(fault)
            return 1
        if len(items) > self.settings.max_batch:
            self.fault(
                JrepFault(
                    p.LIMIT,
                    f"the array holds {len(items)} messages, more than this gateway takes in "
                    f"one wire message ({self.settings.max_batch}); send them in several",
                )
            )
            return len(items)
        self.messages_in += len(items)
        party = self.party
        assert party is not None
        if any(type(item) is dict and p.PRIORITY in item for item in items):
            ordered: Any = sorted(enumerate(items), key=_priority_last)
        else:
            ordered = enumerate(items)
        held = party.hold_deliveries()
        # A run: the notifications that follow one the generic path published,
        # with the same ToSubject and Type and no other part than Value.  What
        # that path checked (session state, subject, type, permission) holds for
        # them too: only their Values are converted, and they are delivered
        # together (RemoteParty.notify_run).
        run: list[Message] = []
        run_key: MessageKey | None = None
        run_subject = run_type = None
        decode: Any = None
        try:
            for index, item in ordered:
                if (
                    run_key is not None
                    and type(item) is dict
                    and len(item) == 3
                    and item.get(p.TO_SUBJECT) == run_subject
                    and item.get(p.TYPE) == run_type
                    and p.VALUE in item
                ):
                    try:
                        run.append(decode(run_subject, item[p.VALUE]))
                    except JrepFault as fault:
                        self.fault(fault, item)
                    except Exception as exc:  # as below: never the node, nor the session
                        self._failed(exc, item)
                    continue
                if run:
                    self._deliver_run(run_key, run)
                    run = []
                run_key = None
                try:
                    run_key = self._handle(check_object(item, index))
                except JrepFault as fault:
                    self.fault(fault, item if isinstance(item, dict) else None)
                except Exception as exc:  # a bug here must not end the node, nor the session
                    self._failed(exc, item)
                if run_key is not None:
                    run_subject, run_type = run_key.subject, item.get(p.TYPE)
                    if isinstance(run_type, str):  # (a run's items name their Type)
                        decode = decoder_of(run_key.message_class)
                    else:
                        run_key = None
            if run:
                self._deliver_run(run_key, run)
        finally:
            if held:
                party.release_deliveries()
        return len(items)

    def _failed(self, exc: Exception, item: object) -> None:
        """Handling ``item`` raised ``exc`` (a bug): logged on the node, the
        client told, the message dropped."""
        logger.opt(exception=exc).error("jrep session {}: handling a message failed", self.name)
        self.fault(
            JrepFault(
                "Internal",
                f"the gateway failed handling this message ({type(exc).__name__}); "
                "it was dropped and logged on the node",
            ),
            item if isinstance(item, dict) else None,
        )

    def _deliver_run(self, key: MessageKey | None, messages: list[Message]) -> None:
        """Deliver a run's notifications (on ``key``, in the order sent)."""
        party = self.party
        assert key is not None
        assert party is not None
        party.notify_run(messages, key)
        groups = self.groups.get(key)
        if groups:
            for message in messages:
                for group, members in groups.items():
                    if members > 0:
                        party.group_notify(group, message, key)

    # ------------------------------------------------------------ dispatch

    def _handle(self, message: dict[str, Any]) -> MessageKey | None:
        """Handle one message; the key it was published on when it was a
        notification published (None for anything else)."""
        subject: str = message[p.TO_SUBJECT]
        command = part(message, p.COMMAND_TYPE, str, "a string naming a verb")
        part(message, p.PRIORITY, (int, float), "a number (0, or non-zero for priority)")
        if subject == p.SERVER_BUS:
            self._command(command, message)
            return None
        if not self.connected:
            raise JrepFault(
                p.NOT_ACTIVE,
                "no ConnectToQueue yet; the first message of a session is "
                '{"ToSubject": "ServerBus", "CommandType": "ConnectToQueue"}',
            )
        if subject in p.RESERVED:
            raise JrepFault(
                p.RESERVED_SUBJECT,
                f"{subject} is reserved for the gateway's messages to the client; send "
                "management to ServerBus and data to your own subjects",
            )
        if command is not None:
            raise JrepFault(
                p.UNKNOWN_COMMAND,
                f"CommandType {shown(command)!r} on the data subject {shown(subject)!r}; verbs go "
                "to ServerBus, data carries no CommandType (put it in a field of Value)",
            )
        if not self.client_synced:
            raise JrepFault(
                p.NOT_ACTIVE,
                "the federation is not active yet: send your RemoteSubscribe messages, then "
                '{"ToSubject": "ServerBus", "CommandType": "FinishStateSync"}, then data',
            )
        if subject in self.incoming:
            self._reply(subject, message)
            return None
        if subject.startswith(self.reply_prefix + "/"):
            raise JrepFault(
                p.NO_REQUEST,
                f"{shown(subject)!r} is the ReplyTo of no request waiting for your reply (it "
                "was answered, cancelled or timed out); reply only to outstanding requests",
            )
        self._check_subject(subject, "send to")
        cls = self._message_class(message, subject)
        if issubclass(cls, Request):
            self._request(cls, subject, message)
        elif issubclass(cls, Notification):
            return self._publish(cls, subject, message)
        else:
            raise JrepFault(
                p.UNKNOWN_TYPE,
                f"{cls.__type_name__} is a reply; a reply goes to the ReplyTo subject of a "
                "request delivered to you",
            )
        return None

    def _command(self, command: str | None, message: dict[str, Any]) -> None:
        if command == p.CONNECT_TO_QUEUE:
            if self.connected:
                raise JrepFault(p.BAD_PART, "ConnectToQueue again; a session connects once")
            self.connected = True
            self.put(("sync",), data=False)
            return
        if command == p.HEARTBEAT:
            return  # activity: the reader noted it
        if command == p.DISCONNECT:
            reason = part(message, p.REASON, str, "a string") or "the client disconnected"
            self.close_session(1000, f"Disconnect: {reason}"[:120])
            return
        if not self.connected:
            raise JrepFault(
                p.NOT_ACTIVE,
                f"{shown(command)} before ConnectToQueue; the first message of a session is "
                '{"ToSubject": "ServerBus", "CommandType": "ConnectToQueue"}',
            )
        if command == p.CAPABILITIES_NOTICE:
            flags = part(message, p.CAPABILITIES_FLAGS, str, "a comma-delimited string") or ""
            self.federated = p.FEDERATION in (f.strip() for f in flags.split(","))
        elif command == p.FINISH_STATE_SYNC:
            self.client_synced = True
        elif command == p.REMOTE_SUBSCRIBE:
            for subject in _subjects(message):
                self._subscribe(subject, message)
        elif command == p.REMOTE_UNSUBSCRIBE:
            for subject in _subjects(message):
                self._unsubscribe(subject, message)
        elif command == p.CANCEL:
            self._cancel(message)
        else:
            raise JrepFault(
                p.UNKNOWN_COMMAND,
                f"unknown CommandType {shown(command)!r} for ServerBus; expected one of "
                f"{', '.join(p.CLIENT_VERBS)}",
            )

    # ------------------------------------------------------------ subjects, types

    def _check_subject(self, subject: str, doing: str) -> None:
        """A subject this session may use: not reserved, and if private, not
        another session's."""
        if subject in p.RESERVED:
            raise JrepFault(
                p.RESERVED_SUBJECT,
                f"{subject} is reserved for management; a client may not {doing} it",
            )
        if is_private(subject):
            owner = self.gateway.owner_of(subject)
            if owner is not None and owner is not self:
                raise JrepFault(
                    p.RESERVED_SUBJECT,
                    f"{shown(subject)!r} is another session's private subject; a client may "
                    f"not {doing} it (use the subjects under your own ReplyPrefix)",
                )

    def _message_class(self, message: dict[str, Any], subject: str) -> type[Message]:
        name = part(message, p.TYPE, str, "a string naming a registered message type")
        if name is None:
            cls = self.gateway.types.get(subject)
            if cls is None:
                raise JrepFault(
                    p.UNKNOWN_TYPE,
                    f"no message type for subject {shown(subject)!r}: add a Type part naming a "
                    'registered type (e.g. "Type": "shop.CatalogUpdate"), or configure the '
                    "subject in the gateway's types",
                )
            return cls
        found = lookup_type(name)
        if found is None or not issubclass(found, Message) or found is Message:
            raise JrepFault(
                p.UNKNOWN_TYPE,
                f"Type {shown(name)!r} is no message type registered on this node; give the "
                "full type name of a Notification, Request or Reply class the node imports",
            )
        return found

    def _allowed(self, action: Action, key: MessageKey) -> None:
        """Refuse what the party refuses, with the reason (the rule is the
        seam's: :meth:`RemoteParty.refusal`, which counts and reports it)."""
        party = self.party
        assert party is not None
        why = party.refusal(action, key)
        if why is not None:
            raise JrepFault(
                p.REFUSED,
                f"may not {action.value} {key}: {why}; the gateway's permissions decide "
                f"(peer name {self.gateway.name!r})",
            )

    def _room(self, what: str) -> None:
        if self.keys_used >= self.settings.max_subscriptions:
            raise JrepFault(
                p.LIMIT,
                f"cannot {what}: this session uses {self.keys_used} keys, the most a session "
                f"may (max_subscriptions); unsubscribe from some first",
            )

    # ------------------------------------------------------------ verbs

    def _subscribe(self, subject: str, message: dict[str, Any]) -> None:
        self._check_subject(subject, "subscribe to")
        cls = self._message_class(message, subject)
        key = MessageKey(cls, subject)
        party = self.party
        assert party is not None
        if part(message, p.ROLE, str, '"publisher" or none') == p.PUBLISHER:
            self._advertise(cls, key, part(message, p.STATE, str, '"UP" or "DOWN"') != "DOWN")
            return
        if issubclass(cls, Request):
            if key not in self.serving:
                self._allowed(Action.REPLY, key)
                self._room(f"reply on {key}")
                self.serving.add(key)
                party.advertise(key, Role.REPLIER, True)
            return
        if not issubclass(cls, Notification):
            raise JrepFault(
                p.UNKNOWN_TYPE,
                f"{cls.__type_name__} is a reply; subscribe with a Notification type (to "
                "receive it) or a Request type (to answer it)",
            )
        if key not in self.subscribed:
            self._allowed(Action.SUBSCRIBE, key)
            self._room(f"subscribe to {key}")
            self.subscribed.add(key)
            party.subscribe(key)
        self.put(("state", key), data=False)

    def _advertise(self, cls: type[Message], key: MessageKey, up: bool) -> None:
        """A client bus's publishers of ``key`` (RemoteSubscribe with Role
        "publisher", a federation extension): UP or DOWN on the bus before any
        data, so the bus's subscribers see their state and the client is told
        when they match (RemoteSubscribe with Role "subscriber")."""
        party = self.party
        assert party is not None
        if not issubclass(cls, Notification):
            raise JrepFault(p.UNKNOWN_TYPE, f"{cls.__type_name__} is no Notification type")
        if key in self.published:
            party.feed_status(key, Role.PUBLISHER, up)
            return
        self._allowed(Action.PUBLISH, key)
        self._room(f"publish on {key}")
        self.published.add(key)
        party.advertise(key, Role.PUBLISHER, up)

    def _unsubscribe(self, subject: str, message: dict[str, Any]) -> None:
        cls = self._message_class(message, subject)
        key = MessageKey(cls, subject)
        party = self.party
        assert party is not None
        if part(message, p.ROLE, str, '"publisher" or none') == p.PUBLISHER:
            if key in self.published:
                self.published.discard(key)
                party.retract(key, Role.PUBLISHER)
            return
        if key in self.serving:
            self.serving.discard(key)
            party.retract(key, Role.REPLIER)
        elif key in self.subscribed:
            self.subscribed.discard(key)
            party.unsubscribe(key)

    def _publish(self, cls: type[Message], subject: str, message: dict[str, Any]) -> MessageKey:
        key = MessageKey(cls, subject)
        party = self.party
        assert party is not None
        if key not in self.published:
            self._allowed(Action.PUBLISH, key)
            self._room(f"publish on {key}")
        notification = message_from_json(cls, subject, message.get(p.VALUE))
        if key not in self.published:
            self.published.add(key)
            party.advertise(key, Role.PUBLISHER, True)
        party.notify(notification, key)
        for group, members in self.groups.get(key, {}).items():
            if members > 0:
                party.group_notify(group, notification, key)
        return key

    def _request(self, cls: type[Message], subject: str, message: dict[str, Any]) -> None:
        reply_to = part(message, p.REPLY_TO, str, "a string under your ReplyPrefix")
        prefix = self.reply_prefix + "/"
        if reply_to is None or not reply_to.startswith(prefix):
            if reply_to is not None:
                self._check_subject(reply_to, "take replies on")
            raise JrepFault(
                p.BAD_PART,
                f"a request needs ReplyTo: a subject under this session's ReplyPrefix "
                f"({prefix}...), e.g. {prefix}1; found {shown(reply_to)!r}",
            )
        if reply_to in self.by_reply_to:
            raise JrepFault(
                p.BAD_PART,
                f"ReplyTo {shown(reply_to)!r} is in use by an outstanding request; give each "
                "request its own",
            )
        if len(self.requests) >= self.settings.max_requests:
            raise JrepFault(
                p.LIMIT,
                f"{len(self.requests)} requests are outstanding, the most a session may "
                "(max_requests); wait for their replies or cancel some",
            )
        key = MessageKey(cls, subject)
        self._allowed(Action.REQUEST, key)
        request = message_from_json(cls, subject, message.get(p.VALUE))
        request_id = self.request_id()
        self.requests[request_id] = [reply_to, None]
        self.by_reply_to[reply_to] = request_id
        party = self.party
        assert party is not None
        party.request(request_id, request)

    def _reply(self, subject: str, message: dict[str, Any]) -> None:
        request_id, request_cls, request_subject = self.incoming[subject]
        name = part(message, p.TYPE, str, "a string naming a Reply type")
        error = part(message, p.ERROR_MESSAGE, str, "a string")
        part(message, p.THROWABLE, dict, "an object")
        if name is None:
            allowed = [c for c in request_cls.__replies__ if c is not Reply]
            single = len(allowed) == 1 and error is None
            cls: type[Message] = allowed[0] if single else Reply
        else:
            found = lookup_type(name)
            if found is None or not (isinstance(found, type) and issubclass(found, Reply)):
                raise JrepFault(p.UNKNOWN_TYPE, f"Type {shown(name)!r} is no registered Reply type")
            if found is not Reply and not request_cls.allows_reply(found):  # type: ignore[attr-defined]
                raise JrepFault(
                    p.UNKNOWN_TYPE,
                    f"{request_cls.__type_name__} does not allow a {found.__type_name__} reply; "
                    f"allowed: {', '.join(sorted(c.__type_name__ for c in request_cls.__replies__))}",
                )
            cls = found
        value = message.get(p.VALUE)
        if error is not None:
            value = dict(value) if isinstance(value, dict) else {}
            value.update(status="ERROR", reason=error)
        reply = message_from_json(cls, request_subject, value)
        assert isinstance(reply, Reply)
        if reply.status.is_final:
            del self.incoming[subject]
            self.incoming_ids.pop(request_id, None)
        party = self.party
        assert party is not None
        party.reply(request_id, reply)

    def _cancel(self, message: dict[str, Any]) -> None:
        reply_to = part(message, p.SUBJECT, str, "a string: the ReplyTo of your request")
        request_id = self.by_reply_to.pop(reply_to, None) if reply_to is not None else None
        if request_id is None:
            raise JrepFault(
                p.NO_REQUEST,
                f"Cancel names {shown(reply_to)!r}, the ReplyTo of no outstanding request of "
                "this session; give the Subject part the ReplyTo you sent the request with",
            )
        del self.requests[request_id]
        party = self.party
        assert party is not None
        party.cancel(request_id)

    if TYPE_CHECKING:
        # Defined by the session (_session.py), which this class is a part of.

        def close_session(self, code: int, reason: str) -> None:
            """Close the session once what is queued was sent."""


def _priority_last(indexed: tuple[int, Any]) -> tuple[int, int]:
    item = indexed[1]
    priority = item.get(p.PRIORITY) if isinstance(item, dict) else None
    urgent = isinstance(priority, (int, float)) and not isinstance(priority, bool) and priority != 0
    return (0 if urgent else 1, indexed[0])


def _subjects(message: dict[str, Any]) -> list[str]:
    """The Subject or SubjectsList of a RemoteSubscribe / RemoteUnsubscribe."""
    one = part(message, p.SUBJECT, str, "a string")
    many = part(message, p.SUBJECTS_LIST, list, "an array of strings")
    if many is not None and not all(isinstance(s, str) for s in many):
        raise JrepFault(p.BAD_PART, "SubjectsList holds a non-string; expected an array of strings")
    subjects = ([one] if one is not None else []) + (many or [])
    if not subjects:
        raise JrepFault(
            p.BAD_PART,
            f"{message.get(p.COMMAND_TYPE)} names no subject; give Subject (a string) or "
            "SubjectsList (an array of strings)",
        )
    return subjects
