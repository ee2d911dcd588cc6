"""Fuzz target for the sans-IO link protocol: any bytes, whole or split at any
point, yield events or :class:`~actorbus.errors.ProtocolError` — nothing else —
and the same outcome however they are split.

Input layout: byte 0 picks the receiving end (see :func:`make_receiver`), byte 1
seeds how the rest is cut into reads, the rest is what the peer "sent".  Each
input is fed twice, whole and cut, and everything observable must agree:
events, where the error came, state, counters (except ``bytes_in``, which stops
counting at the failure) and the bytes the protocol queued in answer.

With atheris installed::

    .venv/bin/python fuzz/fuzz_protocol.py -max_total_time=600 corpus/

Without it, :func:`one_input` is the whole target: tests/net/
test_protocol_properties.py drives it with hypothesis.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _fuzzing import fuzz, instrumented

# Coverage instrumentation only when run as the fuzzer (not when a test imports
# us), and only of the package under test: msgpack's C core and the standard
# library would only slow start-up down.
with instrumented(__name__, include=["actorbus"]):
    from actorbus.config import LinkSettings
    from actorbus.errors import ProtocolError
    from actorbus.net import LinkProtocol, ProtocolState, Side
    from actorbus.net.protocol import FrameType, LogonRequested
    from actorbus.testing import MemoryPipe, encode_frame, proof_for_server

__all__ = [
    "CLIENT_NONCE",
    "MAX_FRAME",
    "MODES",
    "SERVER_NONCE",
    "Outcome",
    "fixed_nonce",
    "make_receiver",
    "one_input",
    "run",
    "split",
]

#: The smallest allowed, so that inputs reach the size limit easily.
MAX_FRAME = 1024
#: The receiving ends byte 0 chooses from.
MODES = ("fresh server", "client awaiting logon answer", "accepted server", "connected client")

SETTINGS = LinkSettings(max_frame_size=MAX_FRAME, logon_timeout=0)

#: The nonces of the authentication, fixed so that a run is reproducible (fed
#: whole or in reads, a receiver answers with the same bytes) and so that valid
#: streams for a receiver can be made ahead, proofs included.
CLIENT_NONCE = b"c" * 32
SERVER_NONCE = b"s" * 32

#: What the receiver observed: event reprs (and "ProtocolError" where one was
#: raised), final state, counters without bytes_in, bytes queued for the peer.
Outcome = tuple[tuple[str, ...], ProtocolState, tuple[tuple[str, int], ...], bytes]


def known_type(type_name: str) -> bool:
    """Type names starting with "X" are unknown, so those paths are fuzzed too."""
    return not type_name.startswith("X")


def fixed_nonce(proto: LinkProtocol, nonce: bytes) -> LinkProtocol:
    """``proto`` with its nonce replaced by ``nonce`` (before its handshake starts)."""
    proto._nonce = nonce
    return proto


def make_receiver(mode: int) -> LinkProtocol:
    """The protocol end that receives the fuzzed bytes, in the state ``MODES[mode]``
    (client "cli", server "srv", nonces CLIENT_NONCE and SERVER_NONCE, no secret)."""
    if mode == 0:
        server = LinkProtocol(Side.SERVER, "srv", 0.0, is_known_type=known_type, settings=SETTINGS)
        return fixed_nonce(server, SERVER_NONCE)
    if mode == 1:
        client = LinkProtocol(Side.CLIENT, "cli", 0.0, is_known_type=known_type, settings=SETTINGS)
        fixed_nonce(client, CLIENT_NONCE).logon()
        client.receive_data(encode_frame(int(FrameType.CHALLENGE), SERVER_NONCE), 0.0)
        client.data_to_send()  # LOGON, PROOF
        return client
    if mode == 2:
        server = LinkProtocol(Side.SERVER, "srv", 0.0, is_known_type=known_type, settings=SETTINGS)
        fixed_nonce(server, SERVER_NONCE)
        server.receive_data(proof_for_server(server, "cli", nonce=CLIENT_NONCE), 0.0)
        if not isinstance(server.next_event(), LogonRequested):
            raise AssertionError("a valid LOGON and PROOF did not produce LogonRequested")
        server.accept_logon()
        server.data_to_send()
        return server
    pipe = MemoryPipe(settings=SETTINGS, client_knows=known_type, server_knows=known_type)
    pipe.logon()
    pipe.client.data_to_send()
    return pipe.client


def split(payload: bytes, seed: int) -> list[bytes]:
    """Cut ``payload`` into non-empty reads at points chosen by ``seed``."""
    if len(payload) < 2:
        return [payload] if payload else []
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(payload)), min(len(payload) - 1, 1 + seed % 32)))
    bounds = [0, *cuts, len(payload)]
    return [payload[a:b] for a, b in itertools.pairwise(bounds)]


def run(receiver: LinkProtocol, reads: list[bytes]) -> Outcome:
    """Feed ``reads`` then EOF, taking events after each read as a shell would."""
    seen: list[str] = []
    limit = receiver.settings.max_frame_size + 4
    for data in [*reads, b""]:
        receiver.receive_data(data, 0.0)
        if receiver.bytes_buffered > limit:
            raise AssertionError(f"buffered {receiver.bytes_buffered} bytes > {limit}")
        try:
            seen.extend(repr(event) for event in receiver.events())
        except ProtocolError:
            seen.append("ProtocolError")
            if receiver.state is not ProtocolState.CLOSED or receiver.error is None:
                raise AssertionError("a ProtocolError left the link open") from None
    counters = tuple(
        (name, value)
        for name, value in dataclasses.asdict(receiver.counters).items()
        if name != "bytes_in"
    )
    return tuple(seen), receiver.state, counters, receiver.data_to_send()


def one_input(data: bytes) -> None:
    """The fuzz target: raises only when the protocol breaks its contract."""
    if len(data) < 2:
        return
    mode = data[0] % len(MODES)
    payload = data[2:]
    whole = run(make_receiver(mode), [payload] if payload else [])
    cut = run(make_receiver(mode), split(payload, data[1]))
    if whole != cut:
        raise AssertionError(
            f"mode {MODES[mode]!r}: fed whole -> {whole!r}\nfed in reads -> {cut!r}"
        )


def main() -> None:
    """Run under atheris (libFuzzer arguments in ``sys.argv``)."""
    fuzz(one_input)


if __name__ == "__main__":
    main()
