"""Safe by default on one host: with no secret configured, a node proves (and
its services check) this user's secret, a file made on first use with mode
600.  Processes of one user link with no configuration; a process presenting
another secret (another user's) is refused; the file's key never appears in
any output.  Each test points ``ACTORBUS_USER_SECRET_FILE`` at a directory of
its own, so no test shares or touches a real user's file (nor the suite's)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from nodes.support import NodeProcess, RawPeer, VictimProcess, buses, client_props, wait_for

from actorbus import Bus, ConfigError
from actorbus.config import ConnectionSettings, ServiceSettings
from actorbus.errors import LinkClosedError
from actorbus.net.protocol import LogonRejected

ENV = "ACTORBUS_USER_SECRET_FILE"


@pytest.fixture
def user_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's own user secret file (not made yet)."""
    path = tmp_path / "home" / ".config" / "actorbus" / "secret"
    monkeypatch.setenv(ENV, str(path))
    return path


def test_two_processes_of_one_user_link_with_no_secret_configured(
    tmp_path: Path, user_file: Path, log_lines: list[str]
) -> None:
    assert not user_file.exists()
    with VictimProcess(tmp_path / "victim.log") as victim:
        # the victim made the file on first use: mode 600, in a directory of mode 700
        assert stat.S_IMODE(user_file.stat().st_mode) == 0o600
        assert stat.S_IMODE(user_file.parent.stat().st_mode) == 0o700
        key = user_file.read_text().strip()
        assert len(key) == 64 and int(key, 16) >= 0  # 32 random bytes, as hex
        # another process of the same user, configured with no secret, links
        props = client_props(victim.port)
        assert "secret" not in props.lower() and "auth" not in props.lower()
        with NodeProcess(tmp_path, "same-user", "replier", "/u", props) as node:
            node.start()  # READY: its link logged on
            # and so does a bus in this process (the file read, not made again)
            with buses("here") as (here,):
                assert here.connect("127.0.0.1", victim.port).wait_logged_on(5) == "victim"
            assert node.stop() == 0
        counters = victim.stop()
        node_log = node.log.read_text(errors="replace")
    assert counters["auth_failures"] == 0
    assert counters["accepted"] == 2
    assert user_file.read_text().strip() == key  # made once
    # the key never shows: not in either process's log or output, nor here
    victim_log = (tmp_path / "victim.log").read_text(errors="replace")
    assert "logged on with node same-user" in victim_log
    for output in (victim_log, node_log, "".join(victim.printed), "\n".join(log_lines)):
        assert key not in output


def test_a_process_presenting_another_secret_is_refused(tmp_path: Path, user_file: Path) -> None:
    other_user = tmp_path / "other" / ".config" / "actorbus" / "secret"
    with VictimProcess(tmp_path / "victim.log") as victim:
        # a process of another user (another secret file) dials with no secret configured
        props = client_props(victim.port)
        with (
            NodeProcess(
                tmp_path, "intruder", "replier", "/u", props, env={ENV: str(other_user)}
            ) as node,
            pytest.raises(AssertionError, match="exited before READY"),
        ):
            node.start()
        # and a raw peer proving some other key
        with RawPeer.connect(victim.port, "forger", secret=b"f" * 64) as raw:
            raw.proto.logon()
            raw.send()
            assert raw.expect(LogonRejected).reason == "authentication failed"
        counters = victim.stop()
    assert counters["auth_failures"] >= 2
    assert counters["open_links"] == 0
    assert other_user.exists() and other_user.read_text() != user_file.read_text()
    assert "authentication failed" in node.tail()


def test_the_key_is_checked_never_shown_when_the_file_is_open_to_others(
    user_file: Path,
) -> None:
    user_file.parent.mkdir(parents=True)
    key = "0123456789abcdef" * 4
    user_file.write_text(key + "\n")
    user_file.chmod(0o640)  # (a file every user may read is refused as any secret file is)
    with buses("n") as (n,):
        with pytest.raises(ConfigError) as refused:
            n.listen(0)
        text = str(refused.value)
        assert "may be used by other users (mode 0640)" in text
        assert f"chmod 600 {user_file}" in text
        assert key not in text
        with pytest.raises(ConfigError, match="this user's secret") as dialled:
            n.connect("127.0.0.1", 9)
        assert key not in str(dialled.value)
        assert n.net.services == ()


def test_auth_none_proves_no_secret_and_links_only_with_auth_none(user_file: Path) -> None:
    with buses("open", "plain", "default") as (open_, plain, default):
        service = open_.listen(0, settings=ServiceSettings(auth="none"))
        link = plain.connect("127.0.0.1", service.port, settings=ConnectionSettings(auth="none"))
        assert link.wait_logged_on(5) == "open"
        # auth=none on both ends reads no user secret at all
        assert not user_file.exists()
        # this user's secret on one side only: refused, as any two secrets that differ
        with pytest.raises(LinkClosedError, match="authentication failed"):
            default.connect("127.0.0.1", service.port).wait_logged_on(5)
        wait_for(lambda: service.counters.auth_failures == 1, "the refusal is counted")


def test_a_configured_secret_is_used_instead_of_the_users(user_file: Path) -> None:
    key = b"k" * 32
    with buses("a", "b", "c") as (a, b, c):
        service = a.listen(0, secret=key)
        assert b.connect("127.0.0.1", service.port, secret=key).wait_logged_on(5) == "a"
        with pytest.raises(LinkClosedError, match="authentication failed"):
            c.connect("127.0.0.1", service.port).wait_logged_on(5)  # this user's secret
        assert user_file.exists()  # made by c, which had no secret


def test_auth_none_on_a_configured_connection(tmp_path: Path, user_file: Path) -> None:
    with buses("open") as (open_,):
        service = open_.listen(0, settings=ServiceSettings(auth="none"))
        props = tmp_path / "plain.properties"
        props.write_text(
            "actorbus.connections = up\n"
            "actorbus.connection.up.host = 127.0.0.1\n"
            f"actorbus.connection.up.port = {service.port}\n"
            "actorbus.connection.up.auth = none\n"
        )
        with Bus.from_properties(props, node_id="plain") as plain:
            (link,) = plain.links
            assert link.settings.auth == "none"
            assert link.wait_logged_on(5) == "open"
    assert not user_file.exists()
