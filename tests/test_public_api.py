"""The public API: exactly these names in every public module, all importable,
no private ones; the names that moved away from the top level still import with
a DeprecationWarning naming the new import; every error is exported; the
library's logger is disabled at import.

A public module is one whose dotted name has no ``_``-prefixed part.  Adding a
name to (or removing one from) a public ``__all__`` means updating ``PINNED``
here and, for a removal or rename, docs/CHANGELOG.md ("Migrating")."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
from types import ModuleType

import pytest

import actorbus

#: The top level, in the groups of its docstring.
TOP_LEVEL = {
    "actors": ["Actor", "ActorRuntime", "Completion", "TimerHandle", "current_actor"],
    "messages": [
        "Field",
        "MessageKey",
        "Notification",
        "Reply",
        "ReplyStatus",
        "Request",
        "Wildcard",
    ],
    "feeds": [
        "FeedState",
        "IncomingRequest",
        "PublishFeed",
        "ReplyFeed",
        "RequestFeed",
        "RequestHandle",
        "Scope",
        "SubscribeFeed",
    ],
    "bus": ["Bus", "BusConfig", "StopSignals", "enable_logging", "wait_for_stop"],
    "errors": [
        "CodecError",
        "ConfigError",
        "Error",
        "FeedStateError",
        "LinkClosedError",
        "PeerError",
        "RequestError",
        "RequestTimeoutError",
        "UsageError",
    ],
}

#: ``sorted(__all__)`` of every public module.
PINNED: dict[str, list[str]] = {
    "actorbus": [
        "Actor",
        "ActorRuntime",
        "Bus",
        "BusConfig",
        "CodecError",
        "Completion",
        "ConfigError",
        "Error",
        "FeedState",
        "FeedStateError",
        "Field",
        "IncomingRequest",
        "LinkClosedError",
        "MessageKey",
        "Notification",
        "PeerError",
        "PublishFeed",
        "Reply",
        "ReplyFeed",
        "ReplyStatus",
        "Request",
        "RequestError",
        "RequestFeed",
        "RequestHandle",
        "RequestTimeoutError",
        "Scope",
        "StopSignals",
        "SubscribeFeed",
        "TimerHandle",
        "UsageError",
        "Wildcard",
        "current_actor",
        "enable_logging",
        "wait_for_stop",
    ],
    "actorbus.actors": [
        "Actor",
        "ActorContext",
        "ActorRuntime",
        "Completion",
        "Dispatcher",
        "DispatcherStats",
        "FailedTask",
        "Mailbox",
        "MailboxStats",
        "NotRegisteredError",
        "RuntimeClosedError",
        "TimerError",
        "TimerHandle",
        "TimerQueue",
        "TimerService",
        "UnknownDispatcherError",
        "current_actor",
        "make_dispatcher",
    ],
    "actorbus.actors.actor": ["Actor", "ActorContext"],
    "actorbus.actors.asyncio_dispatcher": ["AsyncioDispatcher"],
    "actorbus.actors.machine_view": ["DIAGRAM_FORMATS", "MachineView", "TransitionRecord"],
    "actorbus.actors.dispatcher": [
        "AsyncioDispatcher",
        "BlockingDispatcher",
        "Dispatcher",
        "DispatcherStats",
        "MailboxStats",
        "SpinParkDispatcher",
        "SpinYieldDispatcher",
        "SpinningDispatcher",
        "hold_wakes",
        "make_dispatcher",
        "release_wakes",
    ],
    "actorbus.actors.errors": [
        "NotRegisteredError",
        "RuntimeClosedError",
        "TimerError",
        "UnknownDispatcherError",
    ],
    "actorbus.actors.failure": ["FailedTask", "callback_label", "describe_task", "report_failure"],
    "actorbus.actors.mailbox": [
        "Mailbox",
        "MailboxState",
        "TaskWatcher",
        "WatchedTask",
        "unpack_task",
    ],
    "actorbus.actors.recording": [
        "ActorRecorder",
        "FORMAT_VERSION",
        "MAGIC",
        "RecordingError",
        "RecordingFile",
        "RecordingHeader",
        "class_path",
        "describe",
        "read_recording",
    ],
    "actorbus.actors.runtime": ["ActorRuntime", "Completion"],
    "actorbus.actors.timers": ["TimerHandle", "TimerQueue", "TimerService"],
    "actorbus.bus": [
        "AccessRefused",
        "Codec",
        "CodecError",
        "ConnectionAccepted",
        "DEFAULT_MAX_SIZE",
        "DeclarationError",
        "FeedState",
        "Field",
        "ForwardingChanged",
        "Inbox",
        "IncomingRequest",
        "LinkLoggedOff",
        "LinkLoggedOn",
        "Message",
        "MessageKey",
        "MessageTooLargeError",
        "Notification",
        "Permissions",
        "PublishFeed",
        "QueueGroup",
        "Reply",
        "ReplyFeed",
        "ReplyStatus",
        "Request",
        "RequestFeed",
        "RequestHandle",
        "SYSTEM_SUBJECT",
        "Scope",
        "Sender",
        "ServiceStarted",
        "SocketAddress",
        "SubscribeFeed",
        "Topic",
        "Undeliverable",
        "ValidationError",
        "Wildcard",
        "decode",
        "encode",
        "lookup_type",
        "registered_types",
    ],
    "actorbus.bus.address": ["SocketAddress"],
    "actorbus.bus.codec": [
        "Codec",
        "DEFAULT_MAX_SIZE",
        "compile",
        "decode",
        "encode",
        "ext_hook",
        "from_wire",
        "pack_default",
        "to_wire",
    ],
    "actorbus.bus.history": ["FeedChange", "FeedHistory", "LATENCY_BUCKETS", "RequestLatencies"],
    "actorbus.bus.discovery": [
        "DiscoverTopics",
        "ROLES",
        "ROWS_PER_REPLY",
        "Topic",
        "TopicRow",
        "TopicsFound",
        "answer",
        "local_topics",
        "merge",
    ],
    "actorbus.bus.feeds": [
        "Feed",
        "IncomingRequest",
        "OutputWatch",
        "PublishFeed",
        "ReplyFeed",
        "RequestFeed",
        "RequestHandle",
        "Stamped",
        "SubscribeFeed",
        "WatchedPublishFeed",
        "WatchedRequestFeed",
    ],
    "actorbus.bus.inbox": ["Inbox"],
    "actorbus.bus.message": [
        "Field",
        "FieldSpec",
        "Message",
        "MessageKey",
        "Notification",
        "Reply",
        "ReplyStatus",
        "Request",
        "lookup_type",
        "registered_types",
    ],
    "actorbus.bus.owner": ["FeedOwner", "refuse_blocking_deadlock"],
    "actorbus.bus.party": ["PartyTransport", "PatternWatch", "RemoteParty", "Role"],
    "actorbus.bus.permissions": ["Action", "PeerPermissions", "Permissions", "Rule"],
    "actorbus.bus.queues": ["BALANCES", "QueueGroup", "QueueTotals"],
    "actorbus.bus.requests": [
        "IncomingRequest",
        "ReplyFeed",
        "RequestFeed",
        "RequestHandle",
        "WatchedRequestFeed",
    ],
    "actorbus.bus.routed": [
        "KINDS",
        "KIND_BOUNCE",
        "KIND_CANCEL",
        "KIND_LAST_REPLY",
        "KIND_NOTIFY",
        "KIND_REPLY",
        "KIND_REQUEST",
        "MAX_ROUTE",
        "RoutedFrame",
        "SourceRoutes",
        "bodies_of",
        "check_route",
        "joins",
        "with_bodies",
    ],
    "actorbus.bus.router": ["PartyTransport", "RemoteParty", "Role", "Router"],
    "actorbus.bus.routing": [
        "AckWaits",
        "forward_fanout",
        "forward_publisher_up",
        "group_members",
        "horizon",
        "local_aggregate",
        "party_aggregate",
        "sync_remote",
        "tell_group",
        "tell_new_party",
    ],
    "actorbus.bus.spanning": ["ACTIVE", "FORWARDS", "Spanning", "TreeView"],
    "actorbus.bus.scope": ["CAT_FORWARD", "CAT_REMOTE", "FeedState", "MATCH", "Scope"],
    "actorbus.bus.sender": ["Sender"],
    "actorbus.bus.subjects": [
        "Wildcard",
        "WildcardIndex",
        "is_private",
        "new_private_subject",
        "warn_if_star_in_exact_subject",
    ],
    "actorbus.bus.system": [
        "AccessRefused",
        "ConnectionAccepted",
        "ForwardingChanged",
        "LinkLoggedOff",
        "LinkLoggedOn",
        "MulticastLoss",
        "MulticastNagging",
        "SYSTEM_MESSAGES",
        "SYSTEM_SUBJECT",
        "ServiceStarted",
        "Undeliverable",
    ],
    "actorbus.cli": ["main"],
    "actorbus.config": [
        "ActorConfig",
        "BusConfig",
        "ConfigWarning",
        "ConnectionConfig",
        "ConnectionSettings",
        "DEFAULT_DISPATCHER",
        "DispatcherConfig",
        "DispatcherKind",
        "ENV_VAR",
        "GatewayConfig",
        "GatewaySettings",
        "JrepClientConfig",
        "JrepClientSettings",
        "LinkSettings",
        "MulticastConfig",
        "MulticastSettings",
        "PREFIXES",
        "Property",
        "SelectorConfig",
        "ServiceConfig",
        "ServiceSettings",
        "config_from_env",
        "config_from_properties",
        "dump_config",
        "format_property",
        "load_config",
        "parse_properties",
        "read_properties",
    ],
    "actorbus.config.loader": [
        "ConfigWarning",
        "ENV_VAR",
        "PREFIXES",
        "config_from_env",
        "config_from_properties",
        "dump_config",
        "load_config",
    ],
    "actorbus.config.properties": [
        "Property",
        "format_property",
        "parse_properties",
        "read_properties",
    ],
    "actorbus.config.schema": [
        "ActorConfig",
        "BusConfig",
        "ConnectionConfig",
        "DEFAULT_DISPATCHER",
        "DispatcherConfig",
        "DispatcherKind",
        "GENERATE",
        "GatewayConfig",
        "JrepClientConfig",
        "MAX_NODE_ID",
        "MIN_SECRET",
        "MulticastConfig",
        "SelectorConfig",
        "ServiceConfig",
        "TLS_FILE_KINDS",
        "node_id_problem",
        "secret_file_problem",
        "tls_file_problem",
        "tls_pair_problem",
    ],
    "actorbus.config.settings": [
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
    ],
    "actorbus.errors": [
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
    ],
    "actorbus.fsm": [
        "CallbackRef",
        "CompiledMachine",
        "Declaration",
        "DefaultState",
        "DiagramFormat",
        "EventArgumentError",
        "FsmActor",
        "FsmEngine",
        "GraphvizNotFoundError",
        "Machine",
        "MachineSpec",
        "ReferenceMachine",
        "SmMachine",
        "StateSpec",
        "TransitionNotAllowed",
        "TransitionSpec",
        "UnsupportedMachineError",
        "compile_machine",
        "load_sm",
        "machine_spec",
        "parse_sm",
        "reference_machine",
        "render",
        "write_diagram",
    ],
    "actorbus.fsm.actor": ["BUS_CALLBACKS", "FsmActor", "FsmModel"],
    "actorbus.fsm.declare": ["DefaultState", "Machine"],
    "actorbus.fsm.diagram": ["DiagramFormat", "render", "render_dot", "write_diagram"],
    "actorbus.fsm.engine": [
        "CompiledMachine",
        "FsmEngine",
        "MAX_STEP_EVENTS",
        "compile_machine",
        "runaway_step",
    ],
    "actorbus.fsm.reference": ["ReferenceMachine", "reference_machine"],
    "actorbus.fsm.smc": ["SmMachine", "load_sm", "parse_sm"],
    "actorbus.fsm.spec": [
        "CallbackRef",
        "Declaration",
        "MachineSpec",
        "StateSpec",
        "TransitionSpec",
        "declared_spec",
    ],
    "actorbus.journal": [
        "Columns",
        "JournalCorruptError",
        "JournalError",
        "JournalLockedError",
        "JournalReader",
        "JournalUsageError",
        "JournalWriter",
        "Record",
        "RecordsDeletedError",
        "RecoveryReport",
        "Retention",
        "SegmentInfo",
        "SyncPolicy",
        "WriterStats",
    ],
    "actorbus.net": [
        "DEFAULT_MAX_FRAME_SIZE",
        "IOThreadStats",
        "Link",
        "LinkProtocol",
        "LinkSettings",
        "LinkStats",
        "LinkStatus",
        "PROTOCOL_VERSION",
        "ProtocolSettings",
        "ProtocolState",
        "Service",
        "ServiceStats",
        "Side",
        "WireCounters",
        "tls_client_context",
        "tls_server_context",
    ],
    "actorbus.net.jrep": [
        "Gateway",
        "GatewaySettings",
        "GatewayStats",
        "JrepClient",
        "JrepClientStats",
    ],
    "actorbus.net.jrep.client": ["JrepClient", "JrepClientStats"],
    "actorbus.net.jrep.gateway": ["AUTH_MODES", "Gateway"],
    "actorbus.net.link": ["Link", "LinkSettings", "LinkStats", "LinkStatus"],
    "actorbus.net.multicast": ["ChannelProtocol", "new_stream"],
    "actorbus.net.multicast.channel": ["ChannelProtocol", "REPLAY_WINDOW", "new_stream"],
    "actorbus.net.multicast.datagram": [
        "ANNOUNCE",
        "Announce",
        "BYE",
        "Bye",
        "DATA",
        "Data",
        "DatagramError",
        "Decoded",
        "HEADER_SIZE",
        "HEARTBEAT",
        "Heartbeat",
        "LOST",
        "Lost",
        "MAC_SIZE",
        "MAX_NAK_LENGTH",
        "MAX_NAK_RANGES",
        "MAX_SEGMENTS",
        "NAK",
        "Nak",
        "REASONS",
        "VERSION",
        "announce_overhead",
        "channel_key",
        "data_overhead",
        "decode",
        "encode_announce",
        "encode_bye",
        "encode_data",
        "encode_heartbeat",
        "encode_lost",
        "encode_nak",
    ],
    "actorbus.net.multicast.publisher": ["MAX_REPAIR", "PublisherProtocol"],
    "actorbus.net.multicast.receiver": [
        "Announced",
        "Delivered",
        "Gone",
        "Joined",
        "LostRange",
        "MAX_REQUEST",
        "Nagging",
        "NaggingMonitor",
        "ReceiverEvent",
        "ReceiverProtocol",
    ],
    "actorbus.net.multicast.runs": [
        "Encoder",
        "RUN",
        "RUN_HEAD",
        "STATE",
        "pack_notifications",
        "run_record",
    ],
    "actorbus.net.multicast.transport": ["MulticastChannel"],
    "actorbus.net.node": ["DEFAULT_SELECTOR", "NodeNet"],
    "actorbus.net.protocol": [
        "Advertised",
        "AuthenticationFailed",
        "CancelReceived",
        "ConnectionClosed",
        "DATA_FRAME_TYPES",
        "DEFAULT_MAX_FRAME_SIZE",
        "Event",
        "FeedStatusReceived",
        "FrameType",
        "HeartbeatTimeout",
        "LinkProtocol",
        "LogoffReceived",
        "LogonAccepted",
        "LogonComplete",
        "LogonRejected",
        "LogonRequested",
        "LogonTimeout",
        "NotificationReceived",
        "PROTOCOL_VERSION",
        "ProtocolSettings",
        "ProtocolState",
        "RUN_MAX",
        "ReceiptReceived",
        "ReplyReceived",
        "RequestAcknowledged",
        "RequestReceived",
        "Retracted",
        "SequenceGap",
        "Side",
        "Subscribed",
        "Unsubscribed",
        "WireCounters",
        "WireKey",
        "WireValue",
    ],
    "actorbus.net.service": ["AUTH_MODES", "Service", "ServiceStats"],
    "actorbus.inspection": [
        "ActorInfo",
        "DispatcherInfo",
        "ForwardingInfo",
        "InspectNode",
        "LinkInfo",
        "NodeInspected",
        "NodeSnapshot",
        "RequestCount",
        "answer",
        "snapshot",
    ],
    "actorbus.node": ["Bus"],
    "actorbus.replay": ["FakeClock", "ReplayResult", "ReplayStep", "replay"],
    "actorbus.qos": [
        "DeadLetter",
        "Delivery",
        "DeliveryFailed",
        "DeliveryFuture",
        "DeliveryInfo",
        "DeliveryReport",
        "MemoryLog",
        "OutboxFull",
        "Position",
        "PublisherLog",
        "Qos",
        "QosPublisher",
        "QosPublisherCounters",
        "QosRefused",
        "QosStatus",
        "QosSubscriber",
        "QosSubscriberCounters",
        "qos_publisher",
        "qos_subscribe",
    ],
    "actorbus.streams": [
        "ActorExecutor",
        "BufferFullError",
        "BufferStats",
        "EMPTY",
        "EventKind",
        "EventSource",
        "Executor",
        "InlineExecutor",
        "Pressure",
        "PressureWatch",
        "PushEvent",
        "PushStream",
        "PushbackPolicy",
        "QueuePolicy",
        "StreamFuture",
        "SubscriptionSource",
        "subscribe",
        "watch_pressure",
    ],
    "actorbus.spark": [
        "ActorbusDataSource",
        "BATCH_ID_FIELD",
        "FORMAT",
        "Recorder",
        "SinkDeliveryError",
        "SparkOptionError",
        "SparkPipelineError",
        "SparkUnavailableError",
        "SparkWorkerPythonError",
        "message_schema",
        "register",
    ],
    "actorbus.spark.recorder": ["Recorder"],
    "actorbus.spark.schema": [
        "BatchDecoder",
        "DECIMAL_PRECISION",
        "DECIMAL_SCALE",
        "arrow_schema",
        "field_spark_type",
        "message_schema",
    ],
    "actorbus.spark.sink": ["BATCH_ID_FIELD", "BusStreamWriter", "RowEncoder", "SinkCommit"],
    "actorbus.spark.source": [
        "ActorbusDataSource",
        "JournalBatchReader",
        "JournalRange",
        "JournalStreamReader",
        "plan_ranges",
    ],
    "actorbus.testing": [
        "EventLog",
        "InProcessLink",
        "MemoryPipe",
        "Recorder",
        "accept_for_client",
        "all_types_known",
        "authenticate",
        "capture_logs",
        "encode_frame",
        "proof_for_server",
        "wait_until",
    ],
    "actorbus.testing_chaos": ["ChaosCounts", "ChaosProxy", "ChaosSchedule"],
}


def _module_names() -> list[str]:
    names = ["actorbus"]
    for info in pkgutil.walk_packages(actorbus.__path__, "actorbus."):
        if not info.name.endswith(".__main__"):
            names.append(info.name)
    return names


def _is_public(name: str) -> bool:
    return not any(part.startswith("_") for part in name.split("."))


def _public_modules() -> list[str]:
    return [name for name in _module_names() if _is_public(name)]


def test_the_top_level_is_small_and_grouped() -> None:
    grouped = [name for names in TOP_LEVEL.values() for name in names]
    assert len(grouped) <= 35
    assert sorted(actorbus.__all__) == sorted(grouped)
    for group, names in TOP_LEVEL.items():
        assert names, group
        assert all(
            f":{'func' if n[0].islower() else 'class'}:`{n}`" in (actorbus.__doc__ or "")
            for n in names
        ), group


def test_every_public_module_is_pinned() -> None:
    assert sorted(_public_modules()) == sorted(PINNED)


@pytest.mark.parametrize("name", sorted(PINNED))
def test_exports_are_exactly_the_pinned_names(name: str) -> None:
    module: ModuleType = importlib.import_module(name)
    exported = list(module.__all__)
    assert len(exported) == len(set(exported)), f"{name}.__all__ lists a name twice"
    assert sorted(exported) == PINNED[name]
    for attr in exported:
        assert not attr.startswith("_"), f"{name}.__all__ lists the private name {attr}"
        assert getattr(module, attr, None) is not None, f"{name}.{attr} does not exist"


@pytest.mark.parametrize("name", sorted(actorbus._MOVED))
def test_a_moved_name_still_imports_from_the_top_level_with_a_warning(name: str) -> None:
    new_home = actorbus._MOVED[name]
    assert name not in actorbus.__all__
    assert name in importlib.import_module(new_home).__all__
    with pytest.warns(DeprecationWarning, match=f"from {new_home} import {name}"):
        value = getattr(actorbus, name)
    assert value is getattr(importlib.import_module(new_home), name)


def test_an_unknown_top_level_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'NoSuchName'"):
        actorbus.NoSuchName  # noqa: B018


def test_every_error_is_an_actorbus_error() -> None:
    for name in actorbus.__all__:
        obj = getattr(actorbus, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, actorbus.Error), name


def test_every_actorbus_error_is_exported_by_a_public_module() -> None:
    exported: set[type] = set()
    for name in _public_modules():
        module = importlib.import_module(name)
        exported.update(o for a in module.__all__ if isinstance(o := getattr(module, a), type))
    errors = importlib.import_module("actorbus.errors")
    core = {getattr(errors, attr) for attr in errors.__all__}
    for name in _module_names():
        for obj in vars(importlib.import_module(name)).values():
            if isinstance(obj, type) and issubclass(obj, actorbus.Error) and obj.__module__ == name:
                assert obj in exported, f"{name}.{obj.__name__} is raised but not exported"
                subsystem = name.split(".")[1] in ("fsm", "journal", "qos", "spark", "streams")
                assert obj in core or subsystem, (
                    f"{name}.{obj.__name__}: define it in actorbus.errors"
                )


def test_library_logging_is_disabled_at_import() -> None:
    code = (
        "import sys\n"
        "from loguru import logger\n"
        "logger.remove(); logger.add(sys.stdout, level='TRACE')\n"
        "import actorbus\n"
        "from actorbus._log import logger as lib\n"
        "def emit(text):\n"
        "    # loguru filters by the calling module's name: log as a library module\n"
        "    exec('lib.warning(text)', {'__name__': 'actorbus.somewhere', 'lib': lib, 'text': text})\n"
        "emit('should not appear')\n"
        "actorbus.enable_logging('WARNING')\n"
        "emit('visible now')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "should not appear" not in out.stdout + out.stderr
    assert "visible now" in out.stderr
