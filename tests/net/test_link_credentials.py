"""Where link secrets come from and where they never go: secret files (checked
at load with file:line:key, read when the service or connection opens), the
listen()/connect() arguments, per-node secrets, the rule that a service beyond
loopback needs a secret (or auth=none, said once), and no secret in any log
line, repr or error message."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from loguru import logger
from nodes.support import buses, wait_for

from actorbus import Bus, ConfigError
from actorbus.config import ConnectionSettings, ServiceSettings, dump_config, load_config
from actorbus.errors import LinkClosedError
from actorbus.net._credentials import USER_SECRET_ENV, Credentials, Secret, user_secret_path

KEY = "3f1c9a7be2d54c80a6f1e9b27d3c5a18"  # (a test key: 32 bytes of text)
WRONG = "wrong-wrong-wrong-wrong-wrong-00"


def secret_file(tmp_path: Path, text: str, mode: int = 0o600, name: str = "link.secret") -> Path:
    path = tmp_path / name
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.fixture
def logs() -> Iterator[list[str]]:
    """Every actorbus log record, DEBUG and up, with its extra fields."""
    lines: list[str] = []
    logger.enable("actorbus")
    sink = logger.add(lambda m: lines.append(f"{m.record['message']} {m.record['extra']}"))
    try:
        yield lines
    finally:
        logger.remove(sink)
        logger.disable("actorbus")


# ---------------------------------------------------------------- secret files


@pytest.mark.parametrize(
    ("text", "mode", "problem"),
    [
        (None, 0o600, "does not exist; create it with the secret"),
        ("", 0o600, "is empty; write the secret into it"),
        ("  \n", 0o600, "is empty"),
        ("tiny!", 0o600, "has 5 bytes, expected at least 16"),
        (KEY, 0o644, "can be read by every user of this machine (mode 0644); chmod 600"),
        (KEY, 0o602, "can be changed by every user of this machine (mode 0602)"),
    ],
)
def test_an_unfit_secret_file_is_refused_at_load_with_file_line_and_key(
    tmp_path: Path, text: str | None, mode: int, problem: str
) -> None:
    path = tmp_path / "link.secret"
    if text is not None:
        secret_file(tmp_path, text, mode)
    props = tmp_path / "app.properties"
    props.write_text(
        "actorbus.services = feeds\n"
        "actorbus.service.feeds.port = 0\n"
        f"actorbus.service.feeds.secretFile = {path}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_config(props)
    assert info.value.line == 3
    assert info.value.key == "actorbus.service.feeds.secretFile"
    assert str(info.value).startswith(f"{props}:3: actorbus.service.feeds.secretFile=")
    assert problem in str(info.value)
    if text and text.strip():
        assert text.strip() not in str(info.value)


def test_a_secret_file_is_read_when_the_service_opens(tmp_path: Path) -> None:
    path = secret_file(tmp_path, KEY + "\n")  # the trailing newline is not part of it
    props = tmp_path / "n.properties"
    props.write_text(
        "actorbus.services = feeds\n"
        "actorbus.service.feeds.port = 0\n"
        "actorbus.service.feeds.host = 0.0.0.0\n"
        f"actorbus.service.feeds.secretFile = {path}\n"
    )
    n = Bus.from_properties(props, node_id="n")
    try:
        (service,) = n.net.services
        with buses("c", "stranger") as (c, stranger):
            good = c.connect("127.0.0.1", service.port, secret=KEY.encode())
            assert good.wait_logged_on(5) == "n"
            bad = stranger.connect("127.0.0.1", service.port, secret=WRONG.encode())
            with pytest.raises(LinkClosedError, match="authentication failed; this link's secret"):
                bad.wait_logged_on(5)
        assert service.counters.auth_failures == 1
    finally:
        n.close()


def test_a_connection_reads_its_secret_file(tmp_path: Path) -> None:
    path = secret_file(tmp_path, KEY)
    with buses("n") as (n,):
        service = n.listen(0, secret=KEY.encode())
        props = tmp_path / "c.properties"
        props.write_text(
            "actorbus.connections = up\n"
            "actorbus.connection.up.host = 127.0.0.1\n"
            f"actorbus.connection.up.port = {service.port}\n"
            f"actorbus.connection.up.secretFile = {path}\n"
        )
        c = Bus.from_properties(props, node_id="c")
        try:
            (link,) = c.links
            assert link.wait_logged_on(5) == "n"
        finally:
            c.close()


def test_the_api_checks_secrets_too(tmp_path: Path) -> None:
    with buses("n") as (n,):
        with pytest.raises(ConfigError, match=r"listen\(secret=...\): the secret has 5 bytes"):
            n.listen(0, secret=b"short")
        with pytest.raises(
            ConfigError,
            match=r"listen\(settings=ServiceSettings\(secret_file=...\)\): the secret file",
        ):
            n.listen(0, settings=ServiceSettings(secret_file=tmp_path / "missing"))
        readable = secret_file(tmp_path, KEY, 0o644)
        with pytest.raises(ConfigError, match="can be read by every user") as info:
            n.connect("127.0.0.1", 1, settings=ConnectionSettings(secret_file=readable))
        assert KEY not in str(info.value)
        with pytest.raises(ConfigError, match="secret= and secret_file= both given"):
            n.listen(
                0,
                secret=KEY.encode(),
                settings=ServiceSettings(secret_file=secret_file(tmp_path, KEY, name="k2")),
            )
        with pytest.raises(ConfigError, match="expected bytes"):
            n.listen(0, secret=KEY)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="auth='none' with a secret"):
            n.listen(0, secret=KEY.encode(), settings=ServiceSettings(auth="none"))


# ------------------------------------------------------------ beyond loopback


def test_a_service_beyond_loopback_needs_a_secret_or_auth_none(tmp_path: Path) -> None:
    with buses("n") as (n,):
        with pytest.raises(ConfigError, match="pass secret= .* or auth='none'") as info:
            n.listen(0, "0.0.0.0")
        assert "reachable from other machines, without a secret" in str(info.value)
        assert n.net.services == ()
        n.listen(0, "127.0.0.1")  # loopback: no secret needed
        n.listen(0, "localhost")
    props = tmp_path / "open.properties"
    props.write_text("actorbus.services = feeds\nactorbus.service.feeds.port = 0\n")
    with pytest.raises(ConfigError) as refused:
        Bus.from_properties(props, node_id="n")
    assert refused.value.key == "actorbus.service.feeds.secretFile"
    assert str(refused.value).startswith(f"{props}: service 'feeds' would listen on 0.0.0.0:0")
    assert "set actorbus.service.feeds.secretFile to a file" in str(refused.value)
    assert "or actorbus.service.feeds.auth=none" in str(refused.value)


def test_auth_none_accepts_unauthenticated_links_with_one_warning(
    tmp_path: Path, logs: list[str]
) -> None:
    props = tmp_path / "open.properties"
    props.write_text(
        "actorbus.services = feeds\n"
        "actorbus.service.feeds.port = 0\n"
        "actorbus.service.feeds.auth = NONE\n"
    )
    n = Bus.from_properties(props, node_id="n")
    try:
        (service,) = n.net.services
        warnings = [line for line in logs if "without a secret" in line]
        assert len(warnings) == 1
        assert "actorbus.service.feeds.auth=none" in warnings[0]
        with buses("c") as (c,):
            # auth=none on both ends: neither proves a secret
            link = c.connect("127.0.0.1", service.port, settings=ConnectionSettings(auth="none"))
            assert link.wait_logged_on(5) == "n"
        # a connection left at auth=auto proves this user's secret: refused there
        with buses("d") as (d,), pytest.raises(LinkClosedError, match="authentication failed"):
            d.connect("127.0.0.1", service.port).wait_logged_on(5)
    finally:
        n.close()


# ---------------------------------------------------------- a secret per node


def test_nodes_with_secrets_of_their_own(tmp_path: Path) -> None:
    own = {"a": b"a-secret-of-node-a-0123456789", "b": b"b-secret-of-node-b-0123456789"}
    table = secret_file(
        tmp_path,
        "# node-id = secret\na = a-secret-of-node-a-0123456789\n"
        "b = b-secret-of-node-b-0123456789\n",
        name="peers",
    )
    with buses("n", "a", "b", "c") as (n, a, b, c):
        service = n.listen(
            0, secret=KEY.encode(), settings=ServiceSettings(peer_secrets_file=table)
        )
        assert a.connect("127.0.0.1", service.port, secret=own["a"]).wait_logged_on(5) == "n"
        # b proving a's secret, or the shared one, is refused: b must prove its own
        for key in (own["a"], KEY.encode()):
            link = b.connect("127.0.0.1", service.port, secret=key)
            with pytest.raises(LinkClosedError, match="authentication failed"):
                link.wait_logged_on(5)
        assert b.connect("127.0.0.1", service.port, secret=own["b"]).wait_logged_on(5) == "n"
        # a node without a secret of its own proves the shared one
        assert c.connect("127.0.0.1", service.port, secret=KEY.encode()).wait_logged_on(5) == "n"
        wait_for(lambda: service.counters.auth_failures == 2, "both refusals counted")
        only_listed = n.listen(0, secret={"a": own["a"]})
        link = c.connect("127.0.0.1", only_listed.port, secret=KEY.encode())
        with pytest.raises(LinkClosedError, match="authentication failed"):
            link.wait_logged_on(5)


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        ("a = short\n", 1, "the secret of node 'a' has 5 bytes"),
        ("# none\n", None, "holds no 'node-id = secret' line"),
        ("ok = 0123456789abcdef0123\n=0123456789abcdef0123\n", 2, "does not parse"),
    ],
)
def test_an_unfit_peer_secrets_file(
    tmp_path: Path, text: str, line: int | None, problem: str
) -> None:
    table = secret_file(tmp_path, text, name="peers")
    with buses("n") as (n,), pytest.raises(ConfigError, match=problem) as info:
        n.listen(0, settings=ServiceSettings(peer_secrets_file=table))
    assert info.value.line == line
    assert "0123456789abcdef" not in str(info.value)


# ---------------------------------------------------------- never shown


def test_secrets_appear_in_no_log_line_repr_or_error(tmp_path: Path, logs: list[str]) -> None:
    path = secret_file(tmp_path, KEY)
    props = tmp_path / "n.properties"
    props.write_text(
        "actorbus.services = feeds\n"
        "actorbus.service.feeds.port = 0\n"
        "actorbus.service.feeds.host = 0.0.0.0\n"
        f"actorbus.service.feeds.secretFile = {path}\n"
        "actorbus.connections = self\n"
        "actorbus.connection.self.host = 127.0.0.1\n"
        "actorbus.connection.self.port = 1\n"
        f"actorbus.connection.self.secretFile = {path}\n"
    )
    config = load_config(props)
    shown = [repr(config), str(config), dump_config(config)]
    n = Bus(config, node_id="n")
    try:
        (service,) = n.net.services
        with buses("c", "d") as (c, d):
            good = c.connect("127.0.0.1", service.port, secret=KEY.encode())
            good.wait_logged_on(5)
            bad = d.connect("127.0.0.1", service.port, secret=WRONG.encode())
            with pytest.raises(LinkClosedError) as refused:
                bad.wait_logged_on(5)
            wait_for(lambda: service.counters.auth_failures == 1, "the refusal is counted")
            (accepted,) = [link for link in service.links if link.is_logged_on]
            shown += [str(refused.value), repr(bad), repr(good), repr(accepted)]
            shown += [repr(service), repr(service.credentials), repr(good.credentials)]
            shown += [repr(accepted.credentials), repr(service.settings), repr(n.net.stats())]
            connection = accepted._connection
            assert connection is not None and connection.proto is not None
            shown += [repr(connection.proto), repr(connection.proto.settings)]
    finally:
        n.close()
    shown += [repr(Secret(KEY.encode())), str(Secret(KEY.encode())), repr(Credentials())]
    assert any("authentication failed" in line for line in logs)
    for secret in (KEY, WRONG):
        for text in (*shown, *logs):
            assert secret not in text
            assert secret.encode().hex() not in text
    assert repr(Secret(b"x" * 16)) == "Secret(<hidden>)"
    with pytest.raises(TypeError, match="not pickled"):
        Secret(b"x" * 16).__reduce__()


def test_the_file_mode_check_is_posix_only_and_reads_nothing_else(tmp_path: Path) -> None:
    if os.name != "posix":  # pragma: no cover
        pytest.skip("file modes are POSIX")
    directory = tmp_path / "dir"
    directory.mkdir()
    with buses("n") as (n,), pytest.raises(ConfigError, match="is not a regular file"):
        n.listen(0, settings=ServiceSettings(secret_file=directory))


# ------------------------------------------------------- this user's secret


def test_where_this_users_secret_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(USER_SECRET_ENV, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    assert user_secret_path() == str(tmp_path / "home" / ".config" / "actorbus" / "secret")
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/config")  # ignored, as XDG says
    assert user_secret_path() == str(tmp_path / "home" / ".config" / "actorbus" / "secret")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert user_secret_path() == str(tmp_path / "xdg" / "actorbus" / "secret")
    monkeypatch.setenv(USER_SECRET_ENV, str(tmp_path / "mine"))
    assert user_secret_path() == str(tmp_path / "mine")


_MAKE_IT = """
import hashlib, os, sys
from actorbus import Bus
with Bus(node_id=f"racer-{os.getpid()}") as bus:
    bus.listen(0)  # no secret configured: this user's secret, made now if missing
with open(os.environ["ACTORBUS_USER_SECRET_FILE"], "rb") as file:
    print(hashlib.sha256(file.read()).hexdigest())
"""


def test_processes_making_this_users_secret_at_once_agree_on_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "config" / "actorbus" / "secret"
    monkeypatch.setenv("ACTORBUS_USER_SECRET_FILE", str(path))
    racers = [
        subprocess.Popen([sys.executable, "-c", _MAKE_IT], stdout=subprocess.PIPE, text=True)
        for _ in range(6)
    ]
    digests = set()
    for racer in racers:
        out, _ = racer.communicate(timeout=60)
        assert racer.returncode == 0
        digests.add(out.strip())
    assert len(digests) == 1  # one key, whichever process made it
    assert sorted(p.name for p in path.parent.iterdir()) == ["secret"]  # no temporary left
    assert oct(path.stat().st_mode & 0o777) == "0o600"
