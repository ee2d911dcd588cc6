"""The multicast datagram fuzz target (fuzz/fuzz_multicast.py) under hypothesis:
arbitrary bytes, and valid datagrams of every kind with bytes overwritten,
inserted or cut off, with and without a secret.  (fuzz/run_ci.py runs it under
atheris for the CI budget.)"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

FUZZ = Path(__file__).resolve().parents[2] / "fuzz"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("net_fuzz_multicast", FUZZ / "fuzz_multicast.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


target = _load()

PROPERTY = settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _mutate(base: bytes, edits: list[tuple[int, int, int]]) -> bytes:
    data = bytearray(base)
    for kind, where, value in edits:
        if len(data) < 2:
            data.append(value)
            continue
        at = 1 + where % (len(data) - 1)  # byte 0 picks the key and the cuts: keep it
        if kind == 0:
            data[at] = value
        elif kind == 1:
            data.insert(at, value)
        else:
            del data[at:]
    return bytes(data)


@PROPERTY
@given(st.binary(max_size=1500))
def test_arbitrary_bytes(data: bytes) -> None:
    target.one_input(data)


@PROPERTY
@given(
    st.sampled_from(target.seeds()),
    st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 1 << 16), st.integers(0, 255)), max_size=6
    ),
)
def test_mutated_valid_datagrams(base: bytes, edits: list[tuple[int, int, int]]) -> None:
    target.one_input(_mutate(base, edits))


def test_the_seeds_decode_and_are_taken_by_the_channel() -> None:
    from actorbus.net.multicast import datagram as dg

    for data in target.seeds():
        key = target.KEY if data[0] & 1 else None
        if data[0] >> 1 == 0:
            dg.decode(data[1:], key)  # a valid datagram: no DatagramError
        target.one_input(data)
