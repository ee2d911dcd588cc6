"""The top-level public API: exactly these names, all importable; the library's
logger is disabled at import."""

from __future__ import annotations

import subprocess
import sys

import actorbus

EXPECTED = {
    "SYSTEM_SUBJECT",
    "AccessRefused",
    "Actor",
    "ActorRuntime",
    "Bus",
    "BusConfig",
    "CallbackError",
    "Codec",
    "CodecError",
    "Completion",
    "ConfigError",
    "ConnectionAccepted",
    "DeclarationError",
    "DispatcherConfig",
    "DispatcherKind",
    "Error",
    "FeedState",
    "FeedStateError",
    "Field",
    "FsmError",
    "Inbox",
    "IncomingRequest",
    "LinkLoggedOff",
    "LinkLoggedOn",
    "MessageKey",
    "MessageTooLargeError",
    "Notification",
    "PeerError",
    "Permissions",
    "ProtocolError",
    "PublishFeed",
    "QueueGroup",
    "SubjectPatternError",
    "Wildcard",
    "RegistrationError",
    "Reply",
    "ReplyFeed",
    "ReplyStatus",
    "Request",
    "RequestError",
    "RequestFeed",
    "RequestHandle",
    "RequestTimeoutError",
    "Scope",
    "Sender",
    "ServiceStarted",
    "SocketAddress",
    "StopSignals",
    "SubscribeFeed",
    "TimerHandle",
    "Topic",
    "UsageError",
    "ValidationError",
    "current_actor",
    "enable_logging",
    "wait_for_stop",
}


def test_exports_are_exactly_the_public_names() -> None:
    assert set(actorbus.__all__) == EXPECTED
    assert len(actorbus.__all__) == len(EXPECTED)
    for name in actorbus.__all__:
        assert getattr(actorbus, name) is not None


def test_every_error_is_an_actorbus_error() -> None:
    for name in actorbus.__all__:
        obj = getattr(actorbus, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, actorbus.Error), name


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
