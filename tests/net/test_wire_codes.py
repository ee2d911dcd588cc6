"""Every code number on the wire, pinned to docs/protocol.md: a change here is a
protocol change (a new PROTOCOL_VERSION), never a side effect."""

from __future__ import annotations

import re
from pathlib import Path

from actorbus import FeedState, ReplyStatus, Scope
from actorbus.bus.routed import (
    KIND_BOUNCE,
    KIND_CANCEL,
    KIND_LAST_REPLY,
    KIND_NOTIFY,
    KIND_REPLY,
    KIND_REQUEST,
    KINDS,
)
from actorbus.bus.router import Role
from actorbus.net import PROTOCOL_VERSION
from actorbus.net._wire import (
    ALL_ROLES,
    DATA_FRAME_TYPES,
    DIALECT_CODES,
    DIALECTS,
    FEED_STATE_CODES,
    FEED_STATES,
    FIRST_SEQUENCED,
    INTEREST_ROLES,
    OFFER_ROLES,
    REMOTE_SCOPES,
    REPLY_STATUS_CODES,
    REPLY_STATUSES,
    ROLE_CODES,
    ROLES,
    SCOPE_CODES,
    SCOPES,
    WILDCARDS,
    FrameType,
)

PROTOCOL_MD = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"

FRAME_TYPES = {
    "LOGON": 1,
    "LOGON_ACCEPT": 2,
    "LOGON_REJECT": 3,
    "LOGON_COMPLETE": 4,
    "LOGOFF": 5,
    "HEARTBEAT": 6,
    "HEARTBEAT_REPLY": 7,
    "KEY_DEF": 8,
    "RECEIPT": 9,
    "CHALLENGE": 10,
    "PROOF": 11,
    "ADVERTISE": 16,
    "RETRACT": 17,
    "SUBSCRIBE": 18,
    "UNSUBSCRIBE": 19,
    "FEED_STATUS": 20,
    "NOTIFY": 21,
    "REQUEST": 22,
    "REQUEST_ACK": 23,
    "REPLY": 24,
    "CANCEL": 25,
    "NOTIFY_RUN": 26,
    "SUBSCRIBE_PATTERN": 27,
    "UNSUBSCRIBE_PATTERN": 28,
    "GROUP": 29,
    "GROUP_NOTIFY": 30,
    "SENDER": 31,
    "ROUTED": 32,
    "ROUTE": 33,
}
ROLE = {Role.PUBLISHER: 1, Role.SUBSCRIBER: 2, Role.REQUESTOR: 3, Role.REPLIER: 4}
SCOPE = {Scope.LOCAL_ONLY: 0, Scope.LOCAL_AND_REMOTE: 1, Scope.REMOTE_ONLY: 2}
FEED_STATE = {FeedState.DOWN: False, FeedState.UP: True}
REPLY_STATUS = {ReplyStatus.OK_FINAL: 0, ReplyStatus.OK_CONTINUING: 1, ReplyStatus.ERROR: 2}


def test_the_protocol_version() -> None:
    assert PROTOCOL_VERSION == 5
    assert f"**Protocol version: {PROTOCOL_VERSION}**" in PROTOCOL_MD.read_text()


def test_frame_types() -> None:
    assert {t.name: t.value for t in FrameType} == FRAME_TYPES
    assert FIRST_SEQUENCED == 16
    assert {t.name for t in DATA_FRAME_TYPES} == {
        "NOTIFY",
        "REQUEST",
        "REQUEST_ACK",
        "REPLY",
        "CANCEL",
        "NOTIFY_RUN",
        "GROUP_NOTIFY",
        "ROUTED",
    }


def test_frame_types_match_the_table_of_protocol_md() -> None:
    rows = re.findall(r"^\| (\d+) \| \*{0,2}`(\w+)`\*{0,2} \|", PROTOCOL_MD.read_text(), re.M)
    assert {name: int(number) for number, name in rows} == FRAME_TYPES


def test_roles() -> None:
    assert ROLE_CODES == ROLE
    assert set(ROLE_CODES) == set(Role)  # every bus role has a code
    assert {code: role for role, code in ROLE.items()} == ROLES == ALL_ROLES
    assert OFFER_ROLES == {1: Role.PUBLISHER, 4: Role.REPLIER}
    assert INTEREST_ROLES == {2: Role.SUBSCRIBER, 3: Role.REQUESTOR}
    line = "`PUBLISHER=1`, `SUBSCRIBER=2`, `REQUESTOR=3`, `REPLIER=4`"
    assert line in PROTOCOL_MD.read_text()


def test_scopes() -> None:
    assert SCOPE_CODES == SCOPE
    assert set(SCOPE_CODES) == set(Scope)
    assert {code: scope for scope, code in SCOPE.items()} == SCOPES
    assert REMOTE_SCOPES == {1: Scope.LOCAL_AND_REMOTE, 2: Scope.REMOTE_ONLY}
    text = PROTOCOL_MD.read_text()
    assert "`LOCAL_AND_REMOTE=1`, `REMOTE_ONLY=2` (`LOCAL_ONLY=0`" in text


def test_feed_states() -> None:
    assert FEED_STATE_CODES == FEED_STATE
    assert set(FEED_STATE_CODES) == set(FeedState)
    assert FEED_STATES[False] is FeedState.DOWN and FEED_STATES[True] is FeedState.UP
    assert "`up` / feed state: `true` = UP, `false` = DOWN" in PROTOCOL_MD.read_text()


def test_reply_statuses() -> None:
    assert REPLY_STATUS_CODES == REPLY_STATUS
    assert set(REPLY_STATUS_CODES) == set(ReplyStatus)
    assert {code: status for status, code in REPLY_STATUS.items()} == REPLY_STATUSES
    assert "`OK_FINAL=0`, `OK_CONTINUING=1`, `ERROR=2`" in PROTOCOL_MD.read_text()


def test_routed_kinds() -> None:
    kinds = (KIND_NOTIFY, KIND_REQUEST, KIND_REPLY, KIND_BOUNCE, KIND_CANCEL, KIND_LAST_REPLY)
    assert kinds == KINDS == (0, 1, 2, 3, 4, 5)
    line = "`NOTIFY=0`, `REQUEST=1`, `REPLY=2`, `BOUNCE=3`, `CANCEL=4`, `LAST_REPLY=5`"
    assert line in PROTOCOL_MD.read_text()


def test_pattern_dialects() -> None:
    assert DIALECT_CODES == {"levels": 0, "prefix": 1}
    assert {code: name for name, code in DIALECT_CODES.items()} == DIALECTS
    for code, build in WILDCARDS.items():
        assert build("/a/*" if DIALECTS[code] == "levels" else "a*").dialect == DIALECTS[code]
    assert "`levels=0`, `prefix=1`" in PROTOCOL_MD.read_text()
