"""ConsumerState: durable acked watermarks per origin (actorbus.qos._state)."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actorbus.errors import Error, UsageError
from actorbus.qos._state import MAGIC, STATE_FILE_NAME, ConsumerState

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _child(code: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_saves_survive_reopen_and_unknown_is_minus_one(tmp_path: Path) -> None:
    d = tmp_path / "state"
    with ConsumerState(d) as s:
        assert s.acked("n1/a/s") == -1
        s.save("n1/a/s", 5)
        s.save("n1/a/s", 9)
        s.save_many({"n2/b/s": 3, "n1/a/s": 11})
        assert s.acked("n1/a/s") == 11
        assert s.saves == 3
    with ConsumerState(d) as s:
        assert s.watermarks() == {"n1/a/s": 11, "n2/b/s": 3}
        assert s.acked("other") == -1


def test_save_many_is_one_record_and_unchanged_values_write_nothing(tmp_path: Path) -> None:
    with ConsumerState(tmp_path / "st") as s:
        f = tmp_path / "st" / STATE_FILE_NAME
        size0 = f.stat().st_size
        s.save_many({"a": 1, "b": 2, "c": 3})
        size1 = f.stat().st_size
        # one record: 8 header bytes + three entries of 2 + 1 + 8 bytes
        assert size1 - size0 == 8 + 3 * 11
        s.save_many({"a": 1, "b": 2})
        s.save("c", 3)
        assert f.stat().st_size == size1
        assert s.saves == 1
        s.save_many({"a": 1, "b": 7})  # only b is written
        assert f.stat().st_size == size1 + 8 + 11


def test_directory_is_created_mode_700(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        with ConsumerState(tmp_path / "deep" / "state"):
            pass
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "deep" / "state").stat().st_mode) == 0o700
    existing = tmp_path / "existing"
    existing.mkdir(mode=0o755)
    os.chmod(existing, 0o755)
    with ConsumerState(existing):
        pass
    assert stat.S_IMODE(existing.stat().st_mode) == 0o755


def test_second_state_in_this_process_is_refused_naming_the_pid(tmp_path: Path) -> None:
    with ConsumerState(tmp_path / "st"):
        with pytest.raises(UsageError) as info:
            ConsumerState(tmp_path / "st")
        assert f"pid {os.getpid()}" in str(info.value)
        assert "state_dir" in str(info.value)
    with ConsumerState(tmp_path / "st"):  # released on close
        pass


def test_second_state_in_another_process_is_refused_naming_its_pid(tmp_path: Path) -> None:
    d = tmp_path / "st"
    child = _child(
        "import sys\n"
        "from actorbus.qos._state import ConsumerState\n"
        f"s = ConsumerState({str(d)!r})\n"
        "print('ready', flush=True)\n"
        "sys.stdin.read()\n"
        "s.close()\n"
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        with pytest.raises(UsageError) as info:
            ConsumerState(d)
        assert f"pid {child.pid}" in str(info.value)
    finally:
        child.communicate("", timeout=30)
    assert child.returncode == 0
    with ConsumerState(d):  # the lock went with the process
        pass


def test_killed_process_keeps_every_save_that_returned(tmp_path: Path) -> None:
    d = tmp_path / "st"
    child = _child(
        "from actorbus.qos._state import ConsumerState\n"
        f"s = ConsumerState({str(d)!r}, compact_bytes=300)\n"
        "i = 0\n"
        "while True:\n"
        "    i += 1\n"
        "    s.save_many({'a': i, 'b': 2 * i})\n"
        "    print(i, flush=True)\n"
    )
    assert child.stdout is not None
    seen = 0
    try:
        while seen < 200:
            seen = int(child.stdout.readline())
    finally:
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=30)
    with ConsumerState(d) as s:
        a = s.acked("a")
        assert a >= seen
        assert s.acked("b") == 2 * a  # one record: both or neither


def test_compaction_keeps_the_state_and_bounds_the_file(tmp_path: Path) -> None:
    d = tmp_path / "st"
    with ConsumerState(d, compact_bytes=200) as s:
        for i in range(1000):
            s.save_many({"x": i, f"o{i % 7}": i})
        assert s.compactions > 10
        assert (d / STATE_FILE_NAME).stat().st_size <= 400
        want = s.watermarks()
    assert want["x"] == 999
    with ConsumerState(d) as s:
        assert s.watermarks() == want
    assert not (d / (STATE_FILE_NAME + ".tmp")).exists()


def test_leftover_temp_file_of_a_crashed_compaction_is_ignored(tmp_path: Path) -> None:
    d = tmp_path / "st"
    with ConsumerState(d) as s:
        s.save("a", 4)
    (d / (STATE_FILE_NAME + ".tmp")).write_bytes(MAGIC + b"\x01\x02")
    with ConsumerState(d) as s:
        assert s.watermarks() == {"a": 4}
    assert not (d / (STATE_FILE_NAME + ".tmp")).exists()


def test_a_flipped_byte_in_the_last_record_drops_it(tmp_path: Path) -> None:
    d = tmp_path / "st"
    with ConsumerState(d) as s:
        s.save("a", 1)
        s.save("a", 2)
    f = d / STATE_FILE_NAME
    data = bytearray(f.read_bytes())
    data[-1] ^= 0x40
    f.write_bytes(bytes(data))
    with ConsumerState(d) as s:
        assert s.acked("a") == 1
        s.save("a", 3)
    with ConsumerState(d) as s:
        assert s.acked("a") == 3


def test_good_crc_record_that_does_not_decode_is_an_error(tmp_path: Path) -> None:
    d = tmp_path / "st"
    with ConsumerState(d):
        pass
    payload = b"\x05\x00ab"  # an origin of 5 bytes with 2 present
    length = len(payload).to_bytes(4, "little")
    crc = zlib.crc32(payload, zlib.crc32(length)).to_bytes(4, "little")
    with (d / STATE_FILE_NAME).open("ab") as f:
        f.write(crc + length + payload)
    with pytest.raises(Error, match="good crc32 but an entry of 5 origin bytes"):
        ConsumerState(d)
    with pytest.raises(Error, match="good crc32"):  # the failed open released the lock
        ConsumerState(d)


def test_foreign_file_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "st"
    d.mkdir()
    (d / STATE_FILE_NAME).write_bytes(b"hello world, not a state file")
    with pytest.raises(Error, match="is not a consumer state file"):
        ConsumerState(d)


def test_bad_arguments_are_usage_errors(tmp_path: Path) -> None:
    with ConsumerState(tmp_path / "st") as s:
        with pytest.raises(UsageError, match="expected a str"):
            s.save(3, 1)  # type: ignore[arg-type]
        with pytest.raises(UsageError, match=r"integer seq in -1\.\."):
            s.save("a", -2)
        with pytest.raises(UsageError, match="integer seq"):
            s.save("a", True)
        with pytest.raises(UsageError, match="at most 65535"):
            s.save("x" * 70000, 1)
        assert s.watermarks() == {}
    with pytest.raises(UsageError, match="is closed"):
        s.save("a", 1)
    (tmp_path / "file").write_text("")
    with pytest.raises(UsageError, match="is a file"):
        ConsumerState(tmp_path / "file")


_origins = st.sampled_from(["n1/a/s", "n2/b/s", "é/ü", "x"])
_saves = st.lists(
    st.dictionaries(_origins, st.integers(-1, 2**63 - 1), min_size=1, max_size=3),
    max_size=25,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(saves=_saves, compact=st.sampled_from([1, 120, 1 << 16]), data=st.data())
def test_torn_tail_at_any_byte_recovers_a_prefix_state(
    saves: list[dict[str, int]], compact: int, data: st.DataObject
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "st"
        # states the file can hold a prefix of: since the last compaction
        history: list[dict[str, int]] = [{}]
        with ConsumerState(d, compact_bytes=compact) as s:
            for batch in saves:
                before = s.compactions
                s.save_many(batch)
                if s.compactions != before:
                    history = [s.watermarks()]
                elif history[-1] != s.watermarks():
                    history.append(s.watermarks())
        f = d / STATE_FILE_NAME
        size = f.stat().st_size
        cut = data.draw(st.integers(0, size), label="cut")
        os.truncate(f, cut)
        with ConsumerState(d) as s:
            got = s.watermarks()
            assert got == {} or got in history
            if cut == size:
                assert got == history[-1]
            s.save("after", 1)
        with ConsumerState(d) as s:
            assert s.watermarks() == {**got, "after": 1}


def test_the_application_state_is_saved_with_the_watermarks(tmp_path: Path) -> None:
    d = tmp_path / "st"
    with ConsumerState(d, compact_bytes=300) as s:
        assert s.app_state is None
        for i in range(200):
            s.save_many({"a": i, "b": 2 * i}, app_state=b"total=%d" % (3 * i))
        assert s.compactions > 5  # compaction keeps it too
        s.save("a", 500)  # a save without one keeps the last
        assert s.app_state == b"total=597"
    with ConsumerState(d) as s:
        assert (s.watermarks(), s.app_state) == ({"a": 500, "b": 398}, b"total=597")
        with pytest.raises(UsageError, match="at most 1048576"):
            s.save_many({}, app_state=b"x" * (1 << 20 | 1))
        with pytest.raises(UsageError, match="expected bytes, found str"):
            s.save_many({}, app_state="text")  # type: ignore[arg-type]
        with pytest.raises(UsageError, match="not empty"):
            s.save("", 1)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(count=st.integers(1, 60), compact=st.sampled_from([1, 150, 1 << 16]), data=st.data())
def test_a_torn_tail_never_parts_the_application_state_from_its_watermarks(
    count: int, compact: int, data: st.DataObject
) -> None:
    # each save's state names its watermark: whatever a crash leaves, they agree
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "st"
        with ConsumerState(d, compact_bytes=compact) as s:
            for i in range(count):
                s.save_many({"o": i}, app_state=b"%d" % i)
        f = d / STATE_FILE_NAME
        os.truncate(f, data.draw(st.integers(0, f.stat().st_size), label="cut"))
        with ConsumerState(d) as s:
            mark, state = s.acked("o"), s.app_state
            assert (mark, state) == (-1, None) or state == b"%d" % mark
