"""A node's id: given to ``Bus``, or by ``nodeId`` in its configuration, or
generated; checked before anything starts; what peers see at logon."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from actorbus import Bus, BusConfig, UsageError
from actorbus.bus import SYSTEM_SUBJECT, LinkLoggedOn


def test_generated_when_not_given() -> None:
    with Bus() as a, Bus(BusConfig(node_id=None), node_id="") as b:
        for bus in (a, b):
            assert re.fullmatch(r".+-\d+-[0-9a-f]{8}", bus.node_id), bus.node_id
        assert a.node_id != b.node_id


def test_from_the_config_and_the_argument_wins(tmp_path: Path) -> None:
    props = tmp_path / "node.properties"
    props.write_text("actorbus.nodeId = pricing-1\n")
    with Bus.from_properties(props) as configured:
        assert configured.node_id == "pricing-1"
    with Bus.from_properties(props, node_id="pricing-2") as overridden:
        assert overridden.node_id == "pricing-2"


@pytest.mark.parametrize(
    ("where", "kwargs", "problem"),
    [
        ("Bus(node_id=...)", {"node_id": "n" * 256}, "it has 256 UTF-8 bytes, expected 1..255"),
        ("Bus(node_id=...)", {"node_id": 7}, "expected a str"),
        (
            "config.node_id",
            {"config": BusConfig(node_id="é" * 200)},
            "it has 400 UTF-8 bytes, expected 1..255",
        ),
    ],
)
def test_a_bad_id_is_refused_before_anything_starts(
    where: str, kwargs: dict[str, object], problem: str
) -> None:
    # (it used to be taken, and every link of the node then failed at logon)
    with pytest.raises(UsageError) as info:
        Bus(**kwargs)  # type: ignore[arg-type]
    message = str(info.value)
    assert message.startswith(where), message
    assert f": {problem}; use a short id unique to this node" in message


def test_the_peer_sees_the_configured_id_at_logon() -> None:
    with Bus(BusConfig(node_id="quotes")) as a, Bus(node_id="watcher") as b:
        logged_on = b.inbox(LinkLoggedOn, SYSTEM_SUBJECT)
        a.connect("127.0.0.1", b.listen(0, "127.0.0.1").port).wait_logged_on(10)
        on = logged_on.receive(10)
        assert on is not None and on.peer_node == "quotes"
