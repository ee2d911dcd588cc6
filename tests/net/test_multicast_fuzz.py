"""The multicast datagram fuzz target (fuzz/fuzz_multicast.py) under hypothesis:
arbitrary bytes, and valid datagrams of every kind with bytes overwritten,
inserted or cut off, with and without a secret.  (fuzz/run_ci.py runs it under
atheris for the CI budget.)"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz_targets import load, mutated

target = load("fuzz_multicast", "net_fuzz_multicast")

PROPERTY = settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@PROPERTY
@given(st.binary(max_size=1500))
def test_arbitrary_bytes(data: bytes) -> None:
    target.one_input(data)


@PROPERTY
@given(mutated(target.seeds(), keep=1))  # byte 0 picks the key and the cuts: kept
def test_mutated_valid_datagrams(data: bytes) -> None:
    target.one_input(data)


def test_the_seeds_decode_and_are_taken_by_the_channel() -> None:
    from actorbus.net.multicast import datagram as dg

    for data in target.seeds():
        key = target.KEY if data[0] & 1 else None
        if data[0] >> 1 == 0:
            dg.decode(data[1:], key)  # a valid datagram: no DatagramError
        target.one_input(data)
