"""A property over arbitrary JSON: whatever a client sends — any JSON value as a
frame, any object as a message, any value in any part — the gateway answers with
a valid effect or an error on ClientBusErrors, never an exception, and the session
stays up (a round trip after each frame still works)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jrep_support import Client, serving

from actorbus.net.jrep import GatewaySettings

PARTS = [
    "ToSubject",
    "CommandType",
    "ReplyTo",
    "Value",
    "PriorityProcessing",
    "ErrorMessage",
    "Throwable",
    "Type",
    "Subject",
    "SubjectsList",
    "CapabilitiesFlags",
    "Reason",
]
SUBJECTS = ["ServerBus", "ClientBus", "ClientBusErrors", "/p", "/add", ".private", ""]
VERBS = [
    "ConnectToQueue",
    "CapabilitiesNotice",
    "FinishStateSync",
    "RemoteSubscribe",
    "RemoteUnsubscribe",
    "Cancel",
    "Heartbeat",
    "SessionExpired",
    "Nope",
]
TYPES = ["jreptest.Price", "jreptest.Add", "jreptest.Sum", "actorbus.Reply", "no.Such"]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)

part_values = st.one_of(
    json_values,
    st.sampled_from(SUBJECTS + VERBS + TYPES),
    st.fixed_dictionaries(
        {},
        optional={
            "value": st.one_of(st.text(max_size=8), st.integers(), st.floats(allow_nan=False)),
            "volume": json_values,
            "a": json_values,
            "b": json_values,
            "total": json_values,
            "status": st.sampled_from(["OK_FINAL", "OK_CONTINUING", "ERROR", "x"]),
        },
    ),
)

messages = st.dictionaries(st.sampled_from(PARTS), part_values, max_size=6)
frames = st.one_of(
    st.lists(st.one_of(messages, json_values), max_size=5).map(json.dumps),
    json_values.map(json.dumps),
    st.text(max_size=30),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(frames, min_size=1, max_size=4))
def test_any_json_gets_an_effect_or_an_error_and_the_session_stays_up(
    sent: list[str],
) -> None:
    with serving(GatewaySettings(message_rate=0)) as (_bus, gateway), Client(gateway) as c:
        c.join()
        for frame in sent:
            c.raw(frame)
            c.sync()  # answered, in order, and still up
        errors: list[dict[str, Any]] = [
            m for m in c.seen if m.get("ToSubject") == "ClientBusErrors"
        ]
        for error in errors:
            assert isinstance(error["ErrorCode"], str) and error["ErrorCode"] != "Internal", error
            assert isinstance(error["ErrorMessage"], str) and error["ErrorMessage"]
        assert gateway.counters.open_sessions == 1
