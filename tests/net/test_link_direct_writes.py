"""Requests and replies made on a thread other than the link's are written by that
thread itself when the link is idle (no hand-off to the I/O thread): what it
writes keeps its order with everything else the link sends, a write the socket
takes only in part is finished by the loop, and nothing is lost or doubled."""

from __future__ import annotations

import socket

from nodes.messages import Blob, Counter, Fetch
from nodes.support import buses, started, wait_for

from actorbus import FeedState, Reply, ReplyStatus, Request
from actorbus.testing import Recorder

UP = FeedState.UP


def content(size: int) -> bytes:
    return bytes([size % 251]) * size


def test_direct_writes_keep_order_and_finish_partial_writes() -> None:
    sizes = [900_000, 10, 1_000_000, 20, 700_000, 30, 40]
    with buses("A", "B") as (a, b):
        # B accepts A's link with a small receive buffer (inherited from the
        # listening socket), A sends with a small send buffer: a large reply
        # cannot leave in one write
        service = b.listen(0)
        service._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8_192)
        link = a.connect("127.0.0.1", service.port)
        link.wait_logged_on(5)
        wait_for(lambda: any(x.is_logged_on for x in service.links), "B logs on")
        rep, req, sub = Recorder("rep"), Recorder("req"), Recorder("sub")
        started(a, rep)
        started(b, req, sub)
        after = rep.publisher(Counter, "/after", up=True)
        rep.replier(Fetch, "/f")  # logs each request; this thread answers them
        s = sub.subscribe(Counter, "/after")
        f = req.requestor(Fetch, "/f")
        req.log.wait_for(lambda ev: ("feed_status", f.key, UP) in ev)
        sub.log.wait_for(lambda ev: ("feed_status", s.key, UP) in ev)
        rep.log.wait_for(lambda ev: ("publish_status", after.key, UP) in ev)
        [accepted] = service.links
        a_conn, b_conn = link._connection, accepted._connection
        assert b_conn is not None and a_conn is not None
        assert a_conn.transport is not None
        sock = a_conn.transport.get_extra_info("socket")
        link.selector.run(sock.setsockopt, socket.SOL_SOCKET, socket.SO_SNDBUF, 8_192)
        # each side's first request or reply goes through the loop, which then
        # opens the descriptor direct writes use (one descriptor per connection
        # until a link carries requests)
        assert a_conn.wfd < 0 and b_conn.wfd < 0
        f.request(Fetch("/f", size=1))
        [warm] = [e[1] for e in rep.log.wait_count("request", 1) if e[0] == "request"]
        warm.reply(Blob("/f", data=content(1)))
        req.log.wait_count("reply", 1)
        wait_for(lambda: a_conn.wfd >= 0 and b_conn.wfd >= 0, "both descriptors are open")
        req.log.clear()
        rep.log.clear()
        for size in sizes:  # from this thread, neither the link's nor an actor's
            f.request(Fetch("/f", size=size))
        taken = [e[1] for e in rep.log.wait_count("request", len(sizes)) if e[0] == "request"]
        # the acknowledgements are out (A holds them up to 1 ms for a reply)
        wait_for(lambda: not a_conn.pending and not a_conn.scheduled, "A is idle")
        # B stops reading, so the small buffers fill and cannot take a large reply
        # at once (were B reading on the other CPU, one write could take it all)
        assert b_conn.transport is not None
        accepted.selector.run(b_conn.transport.pause_reading)
        # A's link is idle: the first reply is written by this thread and left
        # partial; then each reply, then a notification, from this thread
        for incoming in taken:
            size = incoming.request.size
            incoming.reply(Blob("/f", data=content(size)))
            after.publish(Counter("/after", n=size))
        wait_for(lambda: a_conn.direct_partial >= 1, "a direct write is left partial")
        accepted.selector.run(b_conn.transport.resume_reading)
        replies = [
            e for e in req.log.wait_count("reply", len(sizes), timeout=20) if e[0] == "reply"
        ]
        assert [len(r[2].data) for r in replies] == sizes
        assert all(r[2].data == content(len(r[2].data)) for r in replies)
        got = sub.log.wait_count("message", len(sizes), timeout=20)
        assert [e[1].n for e in got if e[0] == "message"] == sizes
        assert b_conn.direct_writes >= 1  # requests from this thread
        assert a_conn.direct_writes >= 1  # replies from this thread
        assert not a_conn.tail and not b_conn.tail
        assert a_conn.direct_partial >= 1  # the loop finished what the socket left
        assert accepted.counters.dropped == 0 and link.counters.dropped == 0


class Said(Reply, type_name="linktest.Said"):
    text: str


class Say(Request, type_name="linktest.Say", replies=(Said,)):
    text: str


def test_a_reply_that_cannot_be_encoded_is_an_error_reply_and_the_link_stays_up() -> None:
    """A reply msgpack cannot pack (a str with a lone surrogate) fails in the
    direct write's encoding: it is dropped and counted, the requestor gets an
    ERROR reply in its place, and the link goes on carrying the next one."""
    with buses("A", "B") as (a, b):
        service = b.listen(0)
        link = a.connect("127.0.0.1", service.port)
        link.wait_logged_on(5)
        rep, req = Recorder("rep"), Recorder("req")
        started(b, rep)
        started(a, req)
        # the replier answers "bad" with text msgpack cannot pack
        rep.auto_reply = lambda inc: Said(
            "/s", text="\ud800" if inc.request.text == "bad" else inc.request.text
        )
        rep.replier(Say, "/s")
        f = req.requestor(Say, "/s")
        req.log.wait_for(lambda ev: ("feed_status", f.key, UP) in ev)
        f.request(Say("/s", text="bad"))
        f.request(Say("/s", text="fine"))
        replies = [e for e in req.log.wait_count("reply", 2) if e[0] == "reply"]
        first, second = replies[0][2], replies[1][2]
        assert first.status is ReplyStatus.ERROR and "could not be sent" in first.reason
        assert second.status is ReplyStatus.OK_FINAL and second.text == "fine"
        wait_for(lambda: service.counters.links.dropped == 1, "the bad reply is counted")
        assert link.is_logged_on
