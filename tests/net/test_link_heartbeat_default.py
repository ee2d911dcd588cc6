"""Heartbeats are on by default: a peer process frozen with SIGSTOP (its socket
open, its kernel still acknowledging TCP, nothing read or written) is declared
down within the default heartbeat timeout, with no heartbeat configured on
either node."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from nodes.messages import Counter
from nodes.support import NodeProcess, SystemLog, buses, client_props, started

from actorbus import FeedState
from actorbus.config import ConnectionSettings, LinkSettings, ServiceSettings
from actorbus.testing import Recorder

#: the default detection time: idle for heartbeat_delay, then heartbeat_reply_delay
DETECTION = LinkSettings().heartbeat_delay + LinkSettings().heartbeat_reply_delay
#: how late the timer may fire on a loaded 2-core host
SLACK = 5.0


def test_the_defaults_detect_a_vanished_peer_within_15_s() -> None:
    defaults = LinkSettings()
    assert defaults.heartbeat_delay == 5.0
    assert defaults.heartbeat_reply_delay == 10.0
    assert DETECTION == 15.0


def test_a_frozen_peer_process_is_declared_down_within_the_default_timeout(
    tmp_path: Path,
) -> None:
    with buses("hub") as (hub,):
        log = SystemLog(hub)
        port = hub.listen(0).port  # default ServiceSettings: no heartbeat configured
        # the node dials with a default connection (client_props sets no heartbeat)
        props = client_props(port)
        assert "heartbeat" not in props.lower()
        with NodeProcess(tmp_path, "frozen", "replier", "/f", props) as node:
            node.start()
            assert SystemLog.next(log.logged_on).peer_node == "frozen"
            assert node.proc is not None
            pid = node.proc.pid
            os.kill(pid, signal.SIGSTOP)
            stopped = time.monotonic()
            try:
                off = SystemLog.next(log.logged_off, timeout=DETECTION + SLACK)
                took = time.monotonic() - stopped
            finally:
                os.kill(pid, signal.SIGCONT)
            print(f"frozen peer declared down {took:.2f} s after SIGSTOP: {off.reason}")
            assert off.peer_node == "frozen"
            assert off.reason.startswith("heartbeat timeout: nothing received for "), off.reason
            # the frozen node's last byte came at most heartbeat_delay before the stop
            assert took <= DETECTION + SLACK, took
            # the hub asked (a HEARTBEAT) before it gave up
            assert hub.net.services[0].counters.links.heartbeats_out >= 1


def test_a_busy_link_sends_no_heartbeats_the_idle_direction_does() -> None:
    """Every frame received restarts the idle timer: the side receiving a
    stream never sends a HEARTBEAT; the side sending it (which receives
    nothing back) probes every heartbeat delay.  Delays of 250 ms here (a gap
    in the stream that long, on a loaded host, would be a heartbeat rightly
    sent), so two seconds of stream span eight of them."""
    timers = {"heartbeat_delay": 0.25, "heartbeat_reply_delay": 5.0}
    with buses("sub", "pub") as (sub_bus, pub_bus):
        sub, pub = Recorder("sub"), Recorder("pub")
        started(sub_bus, sub)
        started(pub_bus, pub)
        sub.subscribe(Counter, "/busy")
        feed = pub.publisher(Counter, "/busy", up=True)
        service = sub_bus.listen(0, settings=ServiceSettings(**timers))
        link = pub_bus.connect("127.0.0.1", service.port, settings=ConnectionSettings(**timers))
        link.wait_logged_on(5)
        sub.log.wait_for(lambda ev: sub.states() == [FeedState.UP])
        pub.log.wait_for(lambda ev: pub.states("publish_status") == [FeedState.UP])
        (accepted,) = service.links
        receiving, sending = accepted.counters, link.counters
        pace = threading.Event()  # (never set: waits pace the stream)
        for n in range(200):  # one notification every 10 ms for two seconds
            feed.publish(Counter("/busy", n=n))
            pace.wait(0.01)
        sub.log.wait_count("message", 200)
        assert accepted.counters.heartbeats_out == receiving.heartbeats_out
        assert link.counters.heartbeats_out - sending.heartbeats_out >= 3
