"""Three things a newcomer's first properties file runs into: relative paths,
a secret written inline, and a prefix typo."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest

from actorbus import ConfigError
from actorbus.config import ConfigWarning, load_config

SECRET = "hunter2hunter2hunter2-0123456789"


def write(path: Path, text: str, mode: int | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    if mode is not None:
        path.chmod(mode)
    return path


# ------------------------------------------------------------------ relative paths


def test_relative_paths_follow_the_properties_file_not_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = tmp_path / "etc" / "app"
    write(conf / "link.secret", SECRET, 0o600)
    write(conf / "peers.secret", f"node-a = {SECRET}\n", 0o600)
    write(conf / "feeds.permissions", "allow * * *\n")
    write(conf / "web.token", SECRET, 0o600)
    (conf / "static").mkdir()
    props = write(
        conf / "app.properties",
        "actorbus.services=feeds\nactorbus.service.feeds.port=0\n"
        "actorbus.service.feeds.secretFile=link.secret\n"
        "actorbus.service.feeds.peerSecretsFile=./peers.secret\n"
        "actorbus.service.feeds.permissionsFile=feeds.permissions\n"
        "actorbus.jrep.gateways=web\nactorbus.jrep.gateway.web.port=0\n"
        "actorbus.jrep.gateway.web.tokenFile=web.token\n"
        "actorbus.jrep.gateway.web.staticDir=static\n",
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    cfg = load_config(os.path.relpath(props))
    service, gateway = cfg.services[0].settings, cfg.gateways[0].settings
    assert service.secret_file == str(conf / "link.secret")
    assert service.peer_secrets_file == str(conf / "peers.secret")
    assert service.permissions_file == str(conf / "feeds.permissions")
    assert gateway.token_file == str(conf / "web.token")
    assert gateway.static_dir == str(conf / "static")


def test_a_missing_relative_file_names_the_path_written_and_the_one_searched(
    tmp_path: Path,
) -> None:
    props = write(
        tmp_path / "conf" / "app.properties",
        "actorbus.services=feeds\nactorbus.service.feeds.port=0\n"
        "actorbus.service.feeds.secretFile=secrets/link.secret\n",
    )
    with pytest.raises(ConfigError) as info:
        load_config(props)
    err = info.value
    assert (err.path, err.line, err.key) == (
        str(props),
        3,
        "actorbus.service.feeds.secretFile",
    )
    assert "'secrets/link.secret'" in str(err)
    assert str(tmp_path / "conf" / "secrets" / "link.secret") in str(err)
    assert "relative to the directory of the properties file" in str(err)


def test_an_absolute_path_is_used_as_written(tmp_path: Path) -> None:
    secret = write(tmp_path / "abs" / "link.secret", SECRET, 0o600)
    props = write(
        tmp_path / "conf" / "app.properties",
        f"actorbus.services=s\nactorbus.service.s.port=0\nactorbus.service.s.secretFile={secret}\n",
    )
    assert load_config(props).services[0].settings.secret_file == str(secret)


# ------------------------------------------------------------------ inline secrets


@pytest.mark.parametrize(
    "text",
    [
        f"actorbus.services=x\nactorbus.service.x.port=0\nactorbus.service.x.secret = {SECRET}\n",
        f"actorbus.service.secret={SECRET}\n",
        f"actorbus.jrep.gateways=g\nactorbus.jrep.gateway.g.port=0\nactorbus.jrep.gateway.g.token={SECRET}\n",
        f"actorbus.connections=c\nactorbus.connection.c.host=h\nactorbus.connection.c.port=1\n"
        f"actorbus.connection.c.password={SECRET} ; the password\n",
        f"={SECRET}\n",
    ],
)
def test_a_secret_written_inline_is_refused_without_showing_it(tmp_path: Path, text: str) -> None:
    props = write(tmp_path / "app.properties", text)
    with pytest.raises(ConfigError) as info:
        load_config(props)
    message = str(info.value)
    assert SECRET not in message and SECRET[:8] not in message, message
    if "secret" in text.split("=", maxsplit=1)[0] or ".secret" in text:
        assert "secretFile" in message  # says what to do instead


# ------------------------------------------------------------------ prefix typos


@pytest.mark.parametrize(
    ("key", "meant"),
    [
        ("actorbs.dispatcher.x.threadCount", "actorbus.dispatcher.x.threadCount"),
        ("actrobus.services", "actorbus.services"),
        ("eBsu.nodeId", "eBus.nodeId"),
        ("dispatcher.x.threadCount", "actorbus.dispatcher.x.threadCount"),
    ],
)
def test_a_prefix_typo_warns_with_the_line_and_the_fix(
    tmp_path: Path, key: str, meant: str
) -> None:
    props = write(tmp_path / "app.properties", f"# mine\n{key}=2\n")
    with pytest.warns(ConfigWarning) as caught:
        load_config(props)
    assert len(caught) == 1
    message = str(caught[0].message)
    assert message.startswith(f"{props}:2: {key}")
    assert f"did you mean {meant}" in message


def test_other_tools_keys_stay_silent(tmp_path: Path) -> None:
    props = write(tmp_path / "app.properties", "log4j.rootLogger=INFO\nserver.port=8080\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_config(props)


# ------------------------------------------------------ an FSM actor's machine file

DOOR_SM = """\
%start Door::Closed
%map Door
%%
Closed { open Opened {} }
Opened { close Closed {} }
%%
"""


def test_an_actors_machine_file_follows_the_properties_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = tmp_path / "etc"
    write(conf / "machines" / "door.sm", DOOR_SM)
    props = write(
        conf / "app.properties",
        "actorbus.actors = door\n"
        "actorbus.actor.door.class = actorbus.fsm.FsmActor\n"
        "actorbus.actor.door.machine = machines/door.sm\n",
    )
    monkeypatch.chdir(tmp_path)
    (actor,) = load_config(os.path.relpath(props)).actors
    assert actor.machine == str(conf / "machines" / "door.sm")
    assert dict(actor.options) == {}  # not an option: a path the loader resolved


def test_a_missing_machine_file_names_the_path_searched(tmp_path: Path) -> None:
    props = write(
        tmp_path / "conf" / "app.properties",
        "actorbus.actors = door\n"
        "actorbus.actor.door.class = actorbus.fsm.FsmActor\n"
        "actorbus.actor.door.machine = door.sm\n",
    )
    with pytest.raises(ConfigError) as info:
        load_config(props)
    err = info.value
    assert (err.line, err.key) == (3, "actorbus.actor.door.machine")
    assert str(tmp_path / "conf" / "door.sm") in str(err)
    assert "relative to the directory of the properties file" in str(err)


def test_an_actors_recording_follows_the_properties_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = tmp_path / "etc"
    (conf / "recordings").mkdir(parents=True)
    props = write(
        conf / "app.properties",
        "actorbus.actors = calc\n"
        "actorbus.actor.calc.class = demos.calculator.actors.Calculator\n"
        "actorbus.actor.calc.recordTo = recordings/calc.rec\n",
    )
    monkeypatch.chdir(tmp_path)
    (actor,) = load_config(os.path.relpath(props)).actors
    assert actor.record_to == str(conf / "recordings" / "calc.rec")
    assert dict(actor.options) == {}


def test_a_recording_in_a_missing_directory_is_refused(tmp_path: Path) -> None:
    props = write(
        tmp_path / "app.properties",
        "actorbus.actors = calc\n"
        "actorbus.actor.calc.class = demos.calculator.actors.Calculator\n"
        "actorbus.actor.calc.recordTo = nowhere/calc.rec\n",
    )
    with pytest.raises(ConfigError) as info:
        load_config(props)
    err = info.value
    assert (err.line, err.key) == (3, "actorbus.actor.calc.recordTo")
    assert f"the directory {tmp_path / 'nowhere'} does not exist" in str(err)


def test_actorbus_run_loads_the_machine_beside_its_properties_file(tmp_path: Path) -> None:
    """A real ``actorbus run`` started in another directory finds the machine."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    conf = tmp_path / "etc"
    write(conf / "door.sm", DOOR_SM)
    props = write(
        conf / "app.properties",
        "actorbus.actors = door\n"
        "actorbus.actor.door.class = actorbus.fsm.FsmActor\n"
        "actorbus.actor.door.machine = door.sm\n",
    )
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    proc = subprocess.run(
        [sys.executable, "-m", "actorbus", "run", str(props), "--duration", "0.2"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
