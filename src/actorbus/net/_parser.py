"""Bytes in: ``receive_data`` and the parse loop of :class:`~actorbus.net.protocol.LinkProtocol`.

``receive_data`` feeds what arrived to the unpacker (never more than one
maximum frame plus its prefix buffered, :mod:`~actorbus.net._framing`) and
``_parse`` turns every complete frame into queued items.  ``_parse`` is the
receiving hot loop: in-order NOTIFY, NOTIFY_RUN, REQUEST, REQUEST_ACK and REPLY
frames on known keys, with every field well-formed, are checked and queued
right there (consecutive notifications on one key as one run of bodies); any
other frame goes to its handler (:mod:`~actorbus.net._frames`).  A broken rule
stops the parsing: what came before it stays queued, then the failure.
"""

from __future__ import annotations

from collections.abc import Callable

import msgpack

from ..errors import ProtocolError
from ._events import ConnectionClosed, ReplyReceived, RequestAcknowledged, RequestReceived
from ._frames import FrameChecks
from ._framing import (
    BAD_BODY,
    DECODE_ERRORS,
    OverLimit,
    Reject,
    bad_body,
    bad_length,
    new_unpacker,
)
from ._handshake import Step
from ._protocol_base import UNSTARTED, Failure, Run
from ._wire import REPLY_STATUSES, FrameType, WireKey, WireValue

__all__ = ["Parser"]

_NOTIFY = int(FrameType.NOTIFY)
_NOTIFY_RUN = int(FrameType.NOTIFY_RUN)
_REQUEST = int(FrameType.REQUEST)
_REQUEST_ACK = int(FrameType.REQUEST_ACK)
_REPLY = int(FrameType.REPLY)


class Parser(FrameChecks):
    """Bytes in (mixed into LinkProtocol)."""

    def receive_data(self, data: bytes | bytearray | memoryview, now: float) -> None:
        """Take bytes from the transport (``b""`` = EOF) and parse every complete frame.

        Never raises for what the peer sent: a broken rule is reported by
        ``next_event()``.  Bytes arriving after the link closed are ignored.
        Call ``next_event()`` / ``events()`` next, then ``data_to_send()``
        (the protocol answers heartbeats by itself).
        """
        if self._rx_done:
            return
        if type(data) is memoryview and data.format != "B":
            data = data.cast("B")
        size = len(data)
        if size == 0:
            self._end_of_stream()
            return
        self._last_rx = self._idle_since = now
        self._hb_sent_at = None
        self.counters.bytes_in += size
        if (
            size > 4
            and not self._buffered
            and self._frame_len < 0
            and self._read_len_from(data, 0)[0] == size - 4
        ):
            # Exactly one whole frame, nothing held from an earlier read (the
            # usual read of a request or a reply): read straight from ``data``
            # with one unpackb.  Reads of several frames go through the streaming
            # unpacker, which is cheaper per frame once fed.
            self._parse(data)
            return
        frames = self.counters.frames_in
        room = self._buffer_limit - self._buffered
        if size <= room:
            unpacker = self._unpacker
            if unpacker is UNSTARTED:  # (_stream, inline: this runs once per such read)
                unpacker = self._stream()
            unpacker.feed(data)
            self._buffered += size
            self._parse(None)
        else:
            # More than the buffer may hold: feed it in pieces, parsing in between,
            # so at most one max-size frame plus its prefix is ever buffered.
            view = memoryview(data)
            pos = 0
            while pos < size and not self._rx_done:
                piece = view[pos : pos + self._buffer_limit - self._buffered]
                self._stream().feed(piece)
                self._buffered += len(piece)
                pos += len(piece)
                self._parse(None)
        # A frame not whole yet must be whole within frame_timeout of its first
        # bytes: a new one started in this read if a frame ended in it.
        if self._buffered or self._frame_len >= 0:
            if self._partial_since is None or self.counters.frames_in != frames:
                self._partial_since = now
        else:
            self._partial_since = None

    def _stream(self) -> msgpack.Unpacker:
        """The streaming unpacker, made at its first use: a connection whose
        reads are each one whole frame (every logon) never holds one."""
        unpacker = self._unpacker
        if unpacker is UNSTARTED:
            unpacker = self._unpacker = new_unpacker(self._buffer_limit, self._ext_hook)
        return unpacker

    def _parse(self, data: bytes | bytearray | memoryview | None) -> None:
        """Turn every complete frame into events (the hot loop): of ``data``, a
        read that starts on a frame boundary, or (``data`` None) of the bytes the
        unpacker holds.  A frame is its length prefix and exactly one msgpack
        value of that length, read either way."""
        events = self._events
        in_keys = self._in_keys
        rx_open = self._rx_open
        rx_seq = self._rx_seq
        frames = 0
        slow = 0  # frames handled by _dispatch (which counts their messages)
        extra = 0  # messages beyond the first in NOTIFY_RUN frames of the fast path
        # (every frame a fast path takes is a data frame: counted in messages_in)
        # Notifications go onto the newest queued run while they are on its key.
        run_key: WireKey | None = None
        run_append: Callable[[WireValue], None] | None = None
        # Requests, replies and acknowledgements go to the shell's sinks
        # (deliver_data_to) while nothing is queued before them.
        sink_request, sink_reply, sink_ack = self._sinks
        rejection: Reject | None = None
        max_frame = self._max_in
        if data is None:
            unpacker = self._unpacker
            read_bytes = unpacker.read_bytes
            unpack = unpacker.unpack
            tell = unpacker.tell
            read_len = self._read_len
            buffered = self._buffered
            need = self._frame_len
            at = tell()  # stream offset where the unread bytes start
        else:
            stop = len(data)
            at = 0  # offset in data of the next frame
            need = -1
        try:
            while True:
                if data is not None:
                    if stop - at < 4:
                        break
                    need = self._read_len_from(data, at)[0]
                    if not 0 < need <= max_frame:
                        raise bad_length(need, max_frame, rx_open)
                    end = at + 4 + need
                    if end > stop:
                        break
                    # not exactly one msgpack value: a decoding error, or
                    # ExtraData (a ValueError) for bytes left after it
                    try:
                        frame = self._unpackb(data[at + 4 : end])
                    except DECODE_ERRORS as exc:
                        raise Reject(bad_body(need), BAD_BODY) from exc
                    at = end
                else:
                    if need < 0:
                        if buffered < 4:
                            break
                        need = read_len(read_bytes(4))[0]
                        buffered -= 4
                        at += 4
                        if not 0 < need <= max_frame:
                            raise bad_length(need, max_frame, rx_open)
                    if buffered < need:
                        break
                    # A body that is not exactly one msgpack value either fails to
                    # decode or decodes past the frame end into bytes already
                    # buffered; which one depends on how the bytes were split, so
                    # both are the same error.
                    try:
                        frame = unpack()
                    except DECODE_ERRORS as exc:
                        raise Reject(bad_body(need), BAD_BODY) from exc
                    end = tell()
                    if end - at != need:
                        raise Reject(bad_body(need), BAD_BODY)
                    at = end
                    buffered -= need
                    need = -1
                frames += 1
                # Fast paths: in-order NOTIFY, REQUEST, REQUEST_ACK and REPLY frames
                # on known keys with every field well-formed (the same checks the
                # handlers make, made once); anything else takes the handlers.
                if type(frame) is tuple and rx_open:
                    size = len(frame)
                    if size == 5:
                        frame_type, seq, kid, request_id, body = frame
                        if (
                            frame_type == _REQUEST
                            and type(frame_type) is int
                            and type(seq) is int
                            and type(kid) is int
                            and type(request_id) is int
                            and seq == rx_seq + 1
                            and request_id >= 0
                        ):
                            key = in_keys.get(kid)
                            if key is not None:
                                rx_seq = seq
                                if (
                                    events
                                    or sink_request is None
                                    or not sink_request(key, request_id, body)
                                ):
                                    events.append(RequestReceived(key, request_id, body))
                                    run_key = None
                                continue
                    elif size == 4:
                        frame_type, seq, kid, body = frame
                        if (
                            type(frame_type) is int
                            and type(seq) is int
                            and type(kid) is int
                            and seq == rx_seq + 1
                        ):
                            if frame_type == _NOTIFY:
                                key = in_keys.get(kid)
                                if key is not None:
                                    rx_seq = seq
                                    if key is not run_key:
                                        run_append = self._run_for(key)
                                        run_key = key
                                    run_append(body)  # type: ignore[misc]
                                    continue
                            elif frame_type == _NOTIFY_RUN and type(body) is tuple and body:
                                key = in_keys.get(kid)
                                if key is not None:
                                    count = len(body)
                                    rx_seq = seq + count - 1
                                    extra += count - 1
                                    if key is not run_key:
                                        run_append = self._run_for(key)
                                        run_key = key
                                    events[-1].extend(body)  # type: ignore[union-attr]
                                    continue
                            elif (
                                frame_type == _REQUEST_ACK
                                and kid >= 0
                                and type(body) is int
                                and body >= 0
                            ):
                                # [REQUEST_ACK, seq, request_id, repliers]
                                rx_seq = seq
                                if events or sink_ack is None or not sink_ack(kid, body):
                                    events.append(RequestAcknowledged(kid, body))
                                    run_key = None
                                continue
                    elif size in {6, 7}:
                        # [REPLY, seq, key_id, request_id, status, body, repliers?]
                        if size == 7:
                            frame_type, seq, kid, request_id, status, body, repliers = frame
                        else:
                            frame_type, seq, kid, request_id, status, body = frame
                            repliers = None
                        if (
                            frame_type == _REPLY
                            and type(frame_type) is int
                            and type(seq) is int
                            and type(kid) is int
                            and type(request_id) is int
                            and type(status) is int
                            and seq == rx_seq + 1
                            and request_id >= 0
                            and (repliers is None or (type(repliers) is int and repliers >= 0))
                        ):
                            key = in_keys.get(kid)
                            reply_status = REPLY_STATUSES.get(status)
                            if key is not None and reply_status is not None:
                                rx_seq = seq
                                if (
                                    events
                                    or sink_reply is None
                                    or not sink_reply(request_id, key, reply_status, body, repliers)
                                ):
                                    events.append(
                                        ReplyReceived(request_id, key, reply_status, body, repliers)
                                    )
                                    run_key = None
                                continue
                slow += 1
                self._rx_seq = rx_seq
                self._dispatch(frame)
                rx_seq = self._rx_seq
                if self._rx_done:
                    break
                run_key = None  # it may have queued anything: look again at the next one
                rx_open = self._rx_open
                max_frame = self._max_in  # (the logon may have been accepted)
        except Reject as exc:
            rejection = exc
        finally:
            # Also reached when is_known_type() raises: keep the parser consistent.
            if data is None:
                self._buffered = buffered
                self._frame_len = need
            elif at < stop and rejection is None and not self._rx_done:
                # a frame whose end has not arrived: the unpacker holds its start
                # (less than one maximum frame), as if it had read it itself
                if stop - at >= 4:  # its prefix is here: ``need`` is its length
                    self._stream().feed(data[at + 4 :])
                    self._buffered = stop - at - 4
                    self._frame_len = need
                else:
                    self._stream().feed(data[at:])
                    self._buffered = stop - at
            if rx_seq > self._rx_seq:  # noqa: PLR1730 (no builtin call per read)
                self._rx_seq = rx_seq
            counters = self.counters
            counters.frames_in += frames
            counters.messages_in += frames - slow + extra
        if rejection is not None:
            self._fail(rejection)

    def _run_for(self, key: WireKey) -> Callable[[WireValue], None]:
        """The ``append`` of the run notifications on ``key`` go onto now: the
        newest queued item if it is a run on ``key``, else a new run queued."""
        events = self._events
        if events:
            last = events[-1]
            if last.__class__ is Run and last.key is key:
                return last.append
        run = Run()
        run.key = key
        events.append(run)
        return run.append

    def _fail(self, rejection: Reject) -> None:
        error = ProtocolError(
            f"link {self.node_id!r} <- {self.peer_node_id or 'unknown peer'!r}: "
            f"{rejection.message}; the link is closed"
        )
        error.__cause__ = rejection.__cause__
        if isinstance(rejection, OverLimit):
            self.counters.over_limit += 1
        else:
            self.counters.corrupt_frames += 1
        self._rx_to(Step.CLOSED)
        self._drop_partial_frame()
        self._events.append(Failure(error, f"protocol error: {rejection.wire_reason}"))

    def _frame_timeout(self, waited: float) -> OverLimit:
        timeout = self.settings.frame_timeout
        if self._frame_len >= 0:
            what = f"{self._buffered} of the {self._frame_len} body bytes of a frame"
        else:
            what = f"{self._buffered} of the 4 bytes of a length prefix"
        return OverLimit(
            f"frame timeout: {what} arrived {waited:.3f} s ago and the rest did not, "
            f"over frame_timeout={timeout:g} s; the peer stalls in the middle of a "
            "frame (raise frame_timeout for very slow networks)",
            "frame timeout",
        )

    def _end_of_stream(self) -> None:
        if self._buffered or self._frame_len >= 0:
            if self._frame_len >= 0:
                detail = (
                    f"{self._buffered} of the {self._frame_len} body bytes of a frame had arrived"
                )
            else:
                detail = f"{self._buffered} of the 4 bytes of a length prefix had arrived"
            self._fail(
                Reject(f"the connection ended in the middle of a frame: {detail}", "truncated")
            )
            return
        self._rx_to(Step.CLOSED)
        self._events.append(ConnectionClosed())
