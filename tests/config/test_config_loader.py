"""Properties file -> BusConfig: every key, every rule, every error message."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType

import pytest
from loguru import logger

import actorbus.config
from actorbus import BusConfig, ConfigError
from actorbus.config import (
    DEFAULT_DISPATCHER,
    ActorConfig,
    ConnectionConfig,
    ConnectionSettings,
    DispatcherConfig,
    DispatcherKind,
    SelectorConfig,
    ServiceConfig,
    ServiceSettings,
    config_from_env,
    config_from_properties,
    dump_config,
    load_config,
    parse_properties,
)


class Pinned:
    """An importable class for ``classes`` and ``actor.NAME.class`` keys."""


class AlsoPinned:
    pass


def make_actor() -> Pinned:
    return Pinned()


HERE = __name__  # the dotted name this test module is importable under


@pytest.fixture
def warnings_log() -> Iterator[list[str]]:
    """Messages the library logs at WARNING or above while the test runs."""
    records: list[str] = []
    logger.enable("actorbus")
    sink = logger.add(lambda m: records.append(m.record["message"]), level="WARNING")
    try:
        yield records
    finally:
        logger.remove(sink)
        logger.disable("actorbus")


def write(tmp_path: Path, text: str, name: str = "app.properties") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def load(tmp_path: Path, text: str) -> BusConfig:
    return load_config(write(tmp_path, text))


def fails(tmp_path: Path, text: str, line: int, key: str) -> str:
    """Load ``text``; assert it fails at ``line`` on ``key``; return the detail."""
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    err = info.value
    assert (err.path, err.line, err.key) == (str(path), line, key), str(err)
    assert str(err).startswith(f"{path}:{line}: {key}")
    return err.detail


def dispatcher(cfg: BusConfig, name: str) -> DispatcherConfig:
    [found] = [d for d in cfg.dispatchers if d.name == name]
    return found


# ------------------------------------------------------------------------ defaults


def test_a_file_without_our_keys_gives_the_default_config(tmp_path: Path) -> None:
    path = write(tmp_path, "# nothing for us\nlog.level=debug\nspark=not ours\n")
    cfg = load_config(path)
    assert cfg == BusConfig(source=str(path))
    assert cfg.default_dispatcher == DispatcherConfig(name=DEFAULT_DISPATCHER, is_default=True)


def test_an_empty_file_gives_the_default_config(tmp_path: Path) -> None:
    assert dataclasses.replace(load(tmp_path, ""), source=None) == BusConfig()


def test_load_config_accepts_str_and_records_the_source(tmp_path: Path) -> None:
    path = write(tmp_path, "actorbus.dispatchers=a\n")
    assert load_config(str(path)).source == str(path)


def test_config_from_properties_labels_with_the_given_path() -> None:
    props = parse_properties("actorbus.dispatchers=a,,b\n")
    with pytest.raises(ConfigError) as info:
        config_from_properties(props, "mem.properties")
    assert str(info.value).startswith("mem.properties:1: actorbus.dispatchers='a,,b': ")


# --------------------------------------------------------------------- dispatchers


def test_a_full_dispatcher(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        f"""
actorbus.dispatchers = md, slow
actorbus.dispatcher.md.runQueueType = SPIN+Park
actorbus.dispatcher.md.threadCount = 3
actorbus.dispatcher.md.spinLimit = 1000
actorbus.dispatcher.md.parkTime = 500
actorbus.dispatcher.md.priority = 10
actorbus.dispatcher.md.quantum = 250000
actorbus.dispatcher.md.isDefault = true
actorbus.dispatcher.md.classes = {HERE}.Pinned, \\
                                 collections.OrderedDict
""",
    )
    assert cfg.dispatchers == (
        DispatcherConfig(
            name="md",
            kind=DispatcherKind.SPIN_PARK,
            thread_count=3,
            spin_limit=1000,
            park_time_ns=500,
            priority=10,
            quantum_ns=250_000,
            is_default=True,
            classes=(f"{HERE}.Pinned", "collections.OrderedDict"),
        ),
        DispatcherConfig(name="slow"),
    )
    assert cfg.default_dispatcher.name == "md"


@pytest.mark.parametrize(
    ("written", "kind"),
    [
        ("blocking", DispatcherKind.BLOCKING),
        ("SPINNING", DispatcherKind.SPINNING),
        ("spin+park", DispatcherKind.SPIN_PARK),
        ("Spin+Yield", DispatcherKind.SPIN_YIELD),
        ("asyncio", DispatcherKind.ASYNCIO),
    ],
)
def test_every_run_queue_type(tmp_path: Path, written: str, kind: DispatcherKind) -> None:
    cfg = load(tmp_path, f"actorbus.dispatchers=d\nactorbus.dispatcher.d.runQueueType={written}\n")
    assert dispatcher(cfg, "d").kind is kind


def test_unknown_run_queue_type(tmp_path: Path) -> None:
    detail = fails(
        tmp_path,
        "actorbus.dispatchers=d\nactorbus.dispatcher.d.runQueueType=fast\n",
        2,
        "actorbus.dispatcher.d.runQueueType",
    )
    assert detail == (
        "actorbus.dispatcher.d.runQueueType='fast': expected one of blocking, spinning, "
        "spin+park, spin+yield, asyncio (any case)"
    )


def test_number_threads_is_an_alias_of_thread_count(tmp_path: Path) -> None:
    cfg = load(tmp_path, "eBus.dispatchers=d\neBus.dispatcher.d.numberThreads=4\n")
    assert dispatcher(cfg, "d").thread_count == 4


def test_the_style_guide_example_message(tmp_path: Path) -> None:
    path = write(tmp_path, "actorbus.dispatchers=md\nactorbus.dispatcher.md.threadCount=four\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == (
        f"{path}:2: actorbus.dispatcher.md.threadCount='four': expected an integer >= 1"
    )


@pytest.mark.parametrize(
    ("setting", "value", "expected"),
    [
        ("threadCount", "0", "expected an integer >= 1"),
        ("threadCount", "2.5", "expected an integer >= 1"),
        ("threadCount", "", "expected an integer >= 1"),
        ("threadCount", "1_000", "expected an integer >= 1"),
        ("numberThreads", "-1", "expected an integer >= 1"),
        ("spinLimit", "-1", "expected an integer >= 0 (spins)"),
        ("parkTime", "1ms", "expected an integer >= 0 (nanoseconds)"),
        ("priority", "0", "expected an integer 1..10"),
        ("priority", "11", "expected an integer 1..10"),
        ("quantum", "0", "expected an integer >= 1 (nanoseconds)"),
        (
            "isDefault",
            "maybe",
            "expected true or false (yes/no and 1/0 are accepted too, in any case)",
        ),
    ],
)
def test_dispatcher_value_errors(tmp_path: Path, setting: str, value: str, expected: str) -> None:
    key = f"actorbus.dispatcher.d.{setting}"
    text = f"actorbus.dispatchers=d\n# the bad one\n{key}={value}\n"
    assert fails(tmp_path, text, 3, key) == f"{key}={value!r}: {expected}"


@pytest.mark.parametrize(
    ("written", "meant"),
    [("true", True), ("TRUE", True), ("Yes", True), ("1", True)]
    + [("false", False), ("False", False), ("NO", False), ("0", False)],
)
def test_booleans(tmp_path: Path, written: str, meant: bool) -> None:
    cfg = load(tmp_path, f"actorbus.dispatchers=d\nactorbus.dispatcher.d.isDefault={written}\n")
    assert dispatcher(cfg, "d").is_default is True  # the only one is the default either way
    cfg = load(
        tmp_path,
        f"actorbus.connections=c\nactorbus.connection.c.host=h\nactorbus.connection.c.port=1\n"
        f"actorbus.connection.c.reconnect={written}\n",
    )
    assert cfg.connections[0].settings.reconnect is meant


def test_no_dispatcher_marked_default_makes_the_first_the_default(tmp_path: Path) -> None:
    cfg = load(tmp_path, "actorbus.dispatchers=b,a\nactorbus.dispatcher.a.threadCount=2\n")
    assert [(d.name, d.is_default) for d in cfg.dispatchers] == [("b", True), ("a", False)]


def test_a_listed_dispatcher_without_keys_gets_defaults(tmp_path: Path) -> None:
    cfg = load(tmp_path, "actorbus.dispatchers=only\n")
    assert cfg.dispatchers == (DispatcherConfig(name="only", is_default=True),)


def test_two_default_dispatchers(tmp_path: Path) -> None:
    text = (
        "actorbus.dispatchers=a,b\n"
        "actorbus.dispatcher.a.isDefault=true\n"
        "actorbus.dispatcher.b.isDefault=yes\n"
    )
    detail = fails(tmp_path, text, 3, "actorbus.dispatcher.b.isDefault")
    assert detail == (
        "actorbus.dispatcher.b.isDefault='yes': dispatcher 'a' is already the default "
        "(line 2); expected isDefault=true on one dispatcher only"
    )


def test_an_empty_dispatcher_list(tmp_path: Path) -> None:
    detail = fails(tmp_path, "actorbus.dispatchers=\n", 1, "actorbus.dispatchers")
    assert (
        detail == "actorbus.dispatchers='': expected a comma list of one or more dispatcher names"
    )


# -------------------------------------------------------------------------- classes


def test_classes_must_import(tmp_path: Path) -> None:
    key = "actorbus.dispatcher.d.classes"
    detail = fails(
        tmp_path,
        f"actorbus.dispatchers=d\n{key}=collections.OrderedDict, no_such_module_xyz.Klass\n",
        2,
        key,
    )
    assert detail.startswith(
        f"{key}='collections.OrderedDict, no_such_module_xyz.Klass': "
        "'no_such_module_xyz.Klass' does not import: there is no module named "
        "'no_such_module_xyz' in the directories Python searched ("
    )
    assert detail.endswith(
        "); put it in one of them, add its directory to PYTHONPATH, or install its package; "
        "expected a comma list of dotted paths of importable classes, e.g. app.actors.Pricer"
    )


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("collections.NoSuchThing", "'collections.NoSuchThing' does not import: "),
        ("os.path.join", "'os.path.join' names a function, not a class; "),
        ("OrderedDict", "'OrderedDict' is not a dotted path; expected module.Name"),
        ("collections..OrderedDict", "is not a dotted path"),
    ],
)
def test_classes_must_name_classes(tmp_path: Path, path: str, why: str) -> None:
    key = "actorbus.dispatcher.d.classes"
    detail = fails(tmp_path, f"actorbus.dispatchers=d\n{key}={path}\n", 2, key)
    assert why in detail


def test_a_module_whose_dependency_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "needs_dep_cfgtest.py").write_text("import no_such_dependency_xyz\nclass A: pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    key = "actorbus.dispatcher.d.classes"
    detail = fails(tmp_path, f"actorbus.dispatchers=d\n{key}=needs_dep_cfgtest.A\n", 2, key)
    assert (
        "'needs_dep_cfgtest.A' does not import: importing 'needs_dep_cfgtest' failed: "
        "No module named 'no_such_dependency_xyz'"
    ) in detail


def test_a_module_that_raises_on_import_keeps_its_error_and_gains_the_location(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "broken_cfgtest.py").write_text("raise RuntimeError('boom at import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    path = write(tmp_path, "actorbus.actors=a\nactorbus.actor.a.class=broken_cfgtest.A\n")
    with pytest.raises(RuntimeError, match="boom at import") as info:
        load_config(path)
    assert info.value.__notes__ == [f"while loading {path}:2: actorbus.actor.a.class"]
    assert "broken_cfgtest" not in sys.modules


def test_a_class_pinned_to_two_dispatchers(tmp_path: Path) -> None:
    text = (
        "actorbus.dispatchers=a,b\n"
        f"actorbus.dispatcher.a.classes={HERE}.Pinned\n"
        f"actorbus.dispatcher.b.classes={HERE}.AlsoPinned,{HERE}.Pinned\n"
    )
    detail = fails(tmp_path, text, 3, "actorbus.dispatcher.b.classes")
    assert detail.endswith(
        f": class '{HERE}.Pinned' is already pinned to dispatcher 'a' (line 2); "
        "expected each class on one dispatcher only"
    )


def test_a_class_listed_twice_on_one_dispatcher_is_kept_once(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        f"actorbus.dispatchers=a\nactorbus.dispatcher.a.classes={HERE}.Pinned,{HERE}.Pinned\n",
    )
    assert cfg.dispatchers[0].classes == (f"{HERE}.Pinned",)


# ------------------------------------------------------------------------ selectors


def test_selectors(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        "actorbus.net.selectors=io,fast\n"
        "actorbus.net.selector.fast.type=spinning\n"
        "actorbus.net.selector.fast.isDefault=true\n"
        "actorbus.net.selector.fast.priority=9\n"
        "actorbus.net.selector.fast.spinLimit=10\n"
        "actorbus.net.selector.fast.parkTime=20\n",
    )
    assert cfg.selectors == (
        SelectorConfig(name="io"),
        SelectorConfig(
            name="fast",
            kind=DispatcherKind.SPINNING,
            is_default=True,
            priority=9,
            spin_limit=10,
            park_time_ns=20,
        ),
    )


def test_no_selector_marked_default_makes_the_first_the_default(tmp_path: Path) -> None:
    cfg = load(tmp_path, "actorbus.net.selectors=a,b\n")
    assert [s.is_default for s in cfg.selectors] == [True, False]


def test_two_default_selectors(tmp_path: Path) -> None:
    text = (
        "actorbus.net.selectors=a,b\n"
        "actorbus.net.selector.a.isDefault=1\n"
        "actorbus.net.selector.b.isDefault=1\n"
    )
    detail = fails(tmp_path, text, 3, "actorbus.net.selector.b.isDefault")
    assert "selector 'a' is already the default (line 2)" in detail


def test_unknown_selector_type(tmp_path: Path) -> None:
    key = "actorbus.net.selector.a.type"
    detail = fails(tmp_path, f"actorbus.net.selectors=a\n{key}=epoll\n", 2, key)
    assert detail.endswith(
        "expected one of blocking, spinning, spin+park, spin+yield, asyncio (any case)"
    )


@pytest.mark.parametrize(
    ("line", "detail"),
    [
        (
            "actorbus.net.selector.net.type=spin-park",
            "expected one of blocking, spinning, spin+park, spin+yield, asyncio (any case)",
        ),
        ("actorbus.net.selector.net.spinLimit=-1", "expected an integer >= 0 (spins)"),
        ("actorbus.net.selector.net.parkTime=1ms", "expected an integer >= 0 (nanoseconds)"),
    ],
)
def test_bad_selector_polling_values(tmp_path: Path, line: str, detail: str) -> None:
    key = line.split("=", maxsplit=1)[0]
    assert fails(tmp_path, f"actorbus.net.selectors=net\n{line}\n", 2, key).endswith(detail)


def test_selectors_sharing_a_loop_must_poll_it_the_same_way(tmp_path: Path) -> None:
    path = tmp_path / "node.properties"
    path.write_text(
        "actorbus.dispatchers=io\n"
        "actorbus.dispatcher.io.runQueueType=asyncio\n"
        "actorbus.net.selectors=a,b\n"
        "actorbus.net.selector.a.dispatcher=io\n"
        "actorbus.net.selector.a.type=spinning\n"
        "actorbus.net.selector.b.dispatcher=io\n"
        "actorbus.net.selector.b.type=spin+park\n"
    )
    with pytest.raises(ConfigError) as info:
        load_config(path)
    err = info.value
    assert (err.line, err.key) == (7, "actorbus.net.selector.b.type")
    assert "selectors 'a' (line 4) and 'b' share the event loop of dispatcher 'io'" in err.detail
    assert "a: spinning; b: spin+park (spinLimit=2500000, parkTime=1000 ns)" in err.detail
    assert "expected the same type, spinLimit and parkTime" in err.detail
    # the same kind with another limit: the spinLimit line is cited
    path.write_text(
        "actorbus.dispatchers=io\n"
        "actorbus.dispatcher.io.runQueueType=asyncio\n"
        "actorbus.net.selectors=a,b\n"
        "actorbus.net.selector.a.dispatcher=io\n"
        "actorbus.net.selector.a.type=spin+yield\n"
        "actorbus.net.selector.a.spinLimit=10\n"
        "actorbus.net.selector.b.dispatcher=io\n"
        "actorbus.net.selector.b.type=spin+yield\n"
    )
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert (info.value.line, info.value.key) == (6, "actorbus.net.selector.a.spinLimit")
    # blocking and asyncio are one way of polling: they may share a loop
    path.write_text(
        "actorbus.dispatchers=io\n"
        "actorbus.dispatcher.io.runQueueType=asyncio\n"
        "actorbus.net.selectors=a,b\n"
        "actorbus.net.selector.a.dispatcher=io\n"
        "actorbus.net.selector.a.type=blocking\n"
        "actorbus.net.selector.b.dispatcher=io\n"
    )
    assert [s.polling for s in load_config(path).selectors] == ["blocking", "blocking"]


def test_selector_config_in_code_refuses_bad_values() -> None:
    with pytest.raises(ConfigError) as info:
        SelectorConfig("net", kind="spin+park")  # type: ignore[arg-type]
    assert info.value.key == "net.selector.net.type"
    assert str(info.value).startswith("selector 'net': type='spin+park': expected a DispatcherKind")
    assert "DispatcherKind.parse('spin+park')" in str(info.value)
    for kwargs, key in (
        ({"spin_limit": -1}, "spinLimit"),
        ({"park_time_ns": 0.5}, "parkTime"),
        ({"priority": 11}, "priority"),
    ):
        with pytest.raises(ConfigError) as info:
            SelectorConfig("net", **kwargs)
        assert info.value.key == f"net.selector.net.{key}"
        assert str(info.value).startswith(f"selector 'net': {key}=")
    with pytest.raises(ConfigError, match="non-empty name"):
        SelectorConfig("")


# ------------------------------------------------------------------------- services

SERVICE_FULL = """\
actorbus.net.selectors=io,accept
actorbus.services=api
actorbus.service.api.port=6000
actorbus.service.api.host=127.0.0.1
actorbus.service.api.addressFilter=10.0.0.1, 10.0.0.2:7000, [::1]:8000, ::1
actorbus.service.api.serviceSelector=accept
actorbus.service.api.connectionSelector=io
actorbus.service.api.inputBufferSize=1024
actorbus.service.api.outputBufferSize=0
actorbus.service.api.byteOrder=LITTLE_ENDIAN
actorbus.service.api.messageQueueSize=100
actorbus.service.api.heartbeatDelay=1000
actorbus.service.api.heartbeatReplyDelay=500
"""


def test_a_full_service(tmp_path: Path) -> None:
    cfg = load(tmp_path, SERVICE_FULL)
    assert cfg.services == (
        ServiceConfig(
            name="api",
            port=6000,
            host="127.0.0.1",
            settings=ServiceSettings(
                address_filter=("10.0.0.1", "10.0.0.2:7000", "[::1]:8000", "::1"),
                service_selector="accept",
                connection_selector="io",
                input_buffer_size=1024,
                output_buffer_size=0,
                byte_order="little",
                message_queue_size=100,
                heartbeat_delay=1.0,
                heartbeat_reply_delay=0.5,
            ),
        ),
    )


def test_service_port_0_means_any_free_port(tmp_path: Path) -> None:
    cfg = load(tmp_path, "actorbus.services=s\nactorbus.service.s.port=0\n")
    assert cfg.services[0].port == 0


def test_the_unnamed_service_form(tmp_path: Path) -> None:
    cfg = load(tmp_path, "eBus.service.port=12345\neBus.service.byteOrder=big_endian\n")
    assert cfg.services == (
        ServiceConfig(name="default", port=12345, settings=ServiceSettings(byte_order="big")),
    )


def test_the_unnamed_service_needs_a_port(tmp_path: Path) -> None:
    detail = fails(tmp_path, "# x\nactorbus.service.host=h\n", 2, "actorbus.service.port")
    assert detail == (
        "actorbus.service.port: missing; service 'default' (configured from line 2) needs it: "
        "expected an integer 0..65535"
    )


def test_the_unnamed_service_must_be_listed_when_services_is_set(tmp_path: Path) -> None:
    text = "actorbus.services=a\nactorbus.service.a.port=1\nactorbus.service.port=2\n"
    detail = fails(tmp_path, text, 3, "actorbus.service.port")
    assert detail == (
        "actorbus.service.port='2': service 'default' is not listed in actorbus.services "
        "(line 1: a); add it to that list"
    )


def test_a_named_service_needs_its_port(tmp_path: Path) -> None:
    detail = fails(
        tmp_path,
        "actorbus.services=api\nactorbus.service.api.host=h\n",
        1,
        "actorbus.service.api.port",
    )
    assert detail == (
        "actorbus.service.api.port: missing; service 'api' (listed in actorbus.services on this "
        "line) needs it: expected an integer 0..65535"
    )


def test_a_service_selector_must_exist(tmp_path: Path) -> None:
    text = SERVICE_FULL.replace("serviceSelector=accept", "serviceSelector=acept")
    detail = fails(tmp_path, text, 6, "actorbus.service.api.serviceSelector")
    assert detail == (
        "actorbus.service.api.serviceSelector='acept': expected the name of a configured "
        "selector; actorbus.net.selectors (line 1) lists: io, accept"
    )


def test_a_selector_reference_without_selectors(tmp_path: Path) -> None:
    text = (
        "actorbus.services=a\nactorbus.service.a.port=1\nactorbus.service.a.connectionSelector=io\n"
    )
    detail = fails(tmp_path, text, 3, "actorbus.service.a.connectionSelector")
    assert detail.endswith(
        "expected the name of a configured selector; actorbus.net.selectors is not set"
    )


@pytest.mark.parametrize(
    ("setting", "value", "expected"),
    [
        ("port", "-1", "expected an integer 0..65535"),
        ("port", "65536", "expected an integer 0..65535"),
        ("port", "http", "expected an integer 0..65535"),
        ("host", "two words", "expected a host name or IP address (not empty, no spaces)"),
        ("inputBufferSize", "-1", "expected an integer >= 0 (bytes)"),
        ("outputBufferSize", "big", "expected an integer >= 0 (bytes)"),
        ("messageQueueSize", "-5", "expected an integer >= 0 (messages, 0 = unlimited)"),
        ("heartbeatDelay", "1s", "expected an integer >= 0 (milliseconds, 0 = off)"),
        ("heartbeatReplyDelay", "-1", "expected an integer >= 0 (milliseconds)"),
        (
            "byteOrder",
            "middle",
            "expected big or little (BIG_ENDIAN and LITTLE_ENDIAN are accepted too)",
        ),
        (
            "serviceSelector",
            "a b",
            "'a b' is not a name; expected letters, digits, '_' and '-' only",
        ),
    ],
)
def test_service_value_errors(tmp_path: Path, setting: str, value: str, expected: str) -> None:
    key = f"actorbus.service.s.{setting}"
    text = f"actorbus.services=s\nactorbus.service.s.port=1\n{key}={value}\n"
    if setting == "port":
        text = f"actorbus.services=s\n\n{key}={value}\n"
    assert fails(tmp_path, text, 3, key) == f"{key}={value!r}: {expected}"


@pytest.mark.parametrize("item", ["host:0", "host:http", ":80", "[::1", "[::1]:99999", "a b"])
def test_address_filter_errors(tmp_path: Path, item: str) -> None:
    key = "actorbus.service.s.addressFilter"
    text = f"actorbus.services=s\nactorbus.service.s.port=1\n{key}=ok, {item}\n"
    detail = fails(tmp_path, text, 3, key)
    assert f"{item!r}" in detail
    assert detail.endswith(
        "expected a comma list of hosts ('h') or endpoints ('h:port', port 1..65535)"
    )


# ---------------------------------------------------------------------- connections


def test_a_full_connection(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        "actorbus.net.selectors=io\n"
        "actorbus.connections=up\n"
        "actorbus.connection.up.host=example.org\n"
        "actorbus.connection.up.port=6001\n"
        "actorbus.connection.up.bindPort=0\n"
        "actorbus.connection.up.selector=io\n"
        "actorbus.connection.up.inputBufferSize=1\n"
        "actorbus.connection.up.outputBufferSize=2\n"
        "actorbus.connection.up.byteOrder=Little\n"
        "actorbus.connection.up.messageQueueSize=3\n"
        "actorbus.connection.up.reconnect=true\n"
        "actorbus.connection.up.reconnectDelay=250\n"
        "actorbus.connection.up.connectTimeout=750\n"
        "actorbus.connection.up.heartbeatDelay=4\n"
        "actorbus.connection.up.heartbeatReplyDelay=5\n",
    )
    assert cfg.connections == (
        ConnectionConfig(
            name="up",
            host="example.org",
            port=6001,
            settings=ConnectionSettings(
                bind_port=0,
                selector="io",
                input_buffer_size=1,
                output_buffer_size=2,
                byte_order="little",
                message_queue_size=3,
                reconnect=True,
                reconnect_delay=0.25,
                connect_timeout=0.75,
                heartbeat_delay=0.004,
                heartbeat_reply_delay=0.005,
            ),
        ),
    )


def test_reconnect_time_is_an_alias_of_reconnect_delay(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        "eBus.connections=c\neBus.connection.c.host=h\neBus.connection.c.port=9\n"
        "eBus.connection.c.reconnectTime=42\n",
    )
    assert cfg.connections[0].settings.reconnect_delay == 0.042


@pytest.mark.parametrize(
    ("present", "missing", "expected"),
    [
        ("port=1", "host", "expected a host name or IP address (not empty, no spaces)"),
        ("host=h", "port", "expected an integer 1..65535"),
    ],
)
def test_a_connection_needs_host_and_port(
    tmp_path: Path, present: str, missing: str, expected: str
) -> None:
    key = f"actorbus.connection.up.{missing}"
    text = f"# links\nactorbus.connections=up\nactorbus.connection.up.{present}\n"
    detail = fails(tmp_path, text, 2, key)
    assert detail == (
        f"{key}: missing; connection 'up' (listed in actorbus.connections on this line) "
        f"needs it: {expected}"
    )


@pytest.mark.parametrize(
    ("setting", "value", "expected"),
    [
        ("bindPort", "-1", "expected an integer 0..65535"),
        ("bindPort", "65536", "expected an integer 0..65535"),
        ("port", "0", "expected an integer 1..65535"),
        ("host", "", "expected a host name or IP address (not empty, no spaces)"),
        ("reconnect", "often", "expected true or false"),
        ("reconnectDelay", "-1", "expected an integer >= 0 (milliseconds)"),
        ("reconnectTime", "soon", "expected an integer >= 0 (milliseconds)"),
        ("connectTimeout", "-5", "expected an integer >= 0 (milliseconds)"),
        ("selector", "io", "expected the name of a configured selector"),
    ],
)
def test_connection_value_errors(tmp_path: Path, setting: str, value: str, expected: str) -> None:
    key = f"actorbus.connection.c.{setting}"
    base = {"host": "actorbus.connection.c.host=h", "port": "actorbus.connection.c.port=1"}
    base.pop(setting, None)
    text = "\n".join(["actorbus.connections=c", *base.values(), f"{key}={value}"]) + "\n"
    line = 2 + len(base)
    assert fails(tmp_path, text, line, key).startswith(f"{key}={value!r}: {expected}")


def test_bind_port_zero_is_allowed(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        "actorbus.connections=c\nactorbus.connection.c.host=h\nactorbus.connection.c.port=65535\n"
        "actorbus.connection.c.bindPort=0\n",
    )
    assert (cfg.connections[0].port, cfg.connections[0].settings.bind_port) == (65535, 0)


# --------------------------------------------------------------------------- actors


def test_actors_with_options(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        f"""
actorbus.dispatchers=md
actorbus.actors=source, sink
actorbus.actor.source.class={HERE}.Pinned
actorbus.actor.source.dispatcher=md
actorbus.actor.source.subject=/demo/points
actorbus.actor.source.feed.period = 100
actorbus.actor.sink.class={HERE}.make_actor
""",
    )
    assert cfg.actors == (
        ActorConfig(
            name="source",
            class_path=f"{HERE}.Pinned",
            dispatcher="md",
            options=MappingProxyType({"subject": "/demo/points", "feed.period": "100"}),
        ),
        ActorConfig(name="sink", class_path=f"{HERE}.make_actor"),
    )


def test_an_actor_may_name_the_implicit_default_dispatcher(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        f"actorbus.actors=a\nactorbus.actor.a.class={HERE}.Pinned\n"
        "actorbus.actor.a.dispatcher=default\n",
    )
    assert cfg.actors[0].dispatcher == DEFAULT_DISPATCHER


def test_an_actor_needs_a_class(tmp_path: Path) -> None:
    detail = fails(
        tmp_path, "actorbus.actors=a\nactorbus.actor.a.x=1\n", 1, "actorbus.actor.a.class"
    )
    assert detail == (
        "actorbus.actor.a.class: missing; actor 'a' (listed in actorbus.actors on this line) "
        "needs it: expected the dotted path of an importable Actor class or factory"
    )


def test_an_actor_class_must_import(tmp_path: Path) -> None:
    key = "actorbus.actor.a.class"
    detail = fails(tmp_path, f"actorbus.actors=a\n{key}=no_such_module_xyz.Klass\n", 2, key)
    assert detail.startswith(
        f"{key}='no_such_module_xyz.Klass': 'no_such_module_xyz.Klass' does not import: "
        "there is no module named 'no_such_module_xyz' in the directories Python searched ("
    )
    assert detail.endswith(
        "); put it in one of them, add its directory to PYTHONPATH, or install its package; "
        "expected the dotted path of an importable Actor class or factory"
    )
    searched = detail.split("searched (", 1)[1].split("); put it", 1)[0].split(", ")
    assert searched == list(dict.fromkeys(os.path.abspath(p or os.curdir) for p in sys.path))


def test_an_actor_class_must_be_callable(tmp_path: Path) -> None:
    key = "actorbus.actor.a.class"
    detail = fails(tmp_path, f"actorbus.actors=a\n{key}=os.sep\n", 2, key)
    assert "'os.sep' names a str, not callable" in detail


def test_an_actor_dispatcher_must_be_configured(tmp_path: Path) -> None:
    key = "actorbus.actor.a.dispatcher"
    text = f"actorbus.actors=a\nactorbus.actor.a.class={HERE}.Pinned\n{key}=md\n"
    detail = fails(tmp_path, text, 3, key)
    assert detail == (
        f"{key}='md': expected the name of a configured dispatcher; actorbus.dispatchers "
        "is not set, so the only one is 'default'"
    )


def test_an_empty_actor_option_name(tmp_path: Path) -> None:
    detail = fails(tmp_path, "actorbus.actors=a\nactorbus.actor.a.=1\n", 2, "actorbus.actor.a.")
    assert detail == "actorbus.actor.a.='1': incomplete key; expected actorbus.actor.NAME.SETTING"


# ------------------------------------------------------------------------------ spark


def test_spark_keys_are_kept_raw(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        "actorbus.spark.master=local[2]\neBus.spark.journal=/var/j\n"
        "actorbus.spark.sql.shuffle.partitions=4\n",
    )
    assert dict(cfg.spark) == {
        "master": "local[2]",
        "journal": "/var/j",
        "sql.shuffle.partitions": "4",
    }


# ---------------------------------------------------------------------- gc.threshold

GC_EXPECTED = (
    "expected an integer >= 1 (the young-generation GC threshold while the bus is open) "
    "or none (any case) to leave the garbage collector alone"
)


def test_gc_threshold_defaults_to_10000(tmp_path: Path) -> None:
    assert BusConfig().gc_threshold == 10_000
    assert load(tmp_path, "actorbus.dispatchers=a\n").gc_threshold == 10_000


@pytest.mark.parametrize("prefix", ["actorbus.", "eBus."])
@pytest.mark.parametrize(("written", "meant"), [("50000", 50_000), ("1", 1), ("+700", 700)])
def test_gc_threshold_under_either_prefix(
    tmp_path: Path, prefix: str, written: str, meant: int
) -> None:
    assert load(tmp_path, f"{prefix}gc.threshold = {written}\n").gc_threshold == meant


@pytest.mark.parametrize("written", ["none", "None", "NONE"])
def test_gc_threshold_none_leaves_the_collector_alone(tmp_path: Path, written: str) -> None:
    assert load(tmp_path, f"eBus.gc.threshold={written}\n").gc_threshold is None


@pytest.mark.parametrize("value", ["0", "-5", "1.5", "abc", "", "1_000", "10k", "null"])
def test_gc_threshold_value_errors(tmp_path: Path, value: str) -> None:
    key = "actorbus.gc.threshold"
    text = f"actorbus.dispatchers=d\n# the bad one\n{key}={value}\n"
    assert fails(tmp_path, text, 3, key) == f"{key}={value!r}: {GC_EXPECTED}"


def test_gc_threshold_message_in_full(tmp_path: Path) -> None:
    path = write(tmp_path, "eBus.gc.threshold=0\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == f"{path}:1: eBus.gc.threshold='0': {GC_EXPECTED}"


def test_gc_threshold_with_an_end_of_line_comment(tmp_path: Path) -> None:
    key = "actorbus.gc.threshold"
    detail = fails(tmp_path, f"actorbus.dispatchers=d\n{key}=10000 ; comment\n", 2, key)
    assert detail == (
        f"{key}='10000 ; comment': properties files have no end-of-line comments; move "
        "'; comment' to its own '#' line (or escape it as '\\;' or '\\#' if it belongs to "
        "the value)"
    )


def test_gc_threshold_under_both_prefixes_last_wins_and_logged(
    tmp_path: Path, warnings_log: list[str]
) -> None:
    path = write(tmp_path, "actorbus.gc.threshold=20000\neBus.gc.threshold=none\n")
    assert load_config(path).gc_threshold is None
    assert warnings_log == [
        f"{path}:2: eBus.gc.threshold overrides actorbus.gc.threshold from line 1 "
        "(the last one wins)"
    ]


# --------------------------------------------------------------------------- nodeId

NODE_ID_HINT = (
    "use a short id unique among the nodes it links to, or leave the key out for a "
    "generated host-pid-random id"
)


def test_node_id_is_read_under_either_prefix_and_left_out_means_none(tmp_path: Path) -> None:
    assert BusConfig().node_id is None
    assert load(tmp_path, "actorbus.dispatchers=a\n").node_id is None
    assert load(tmp_path, "actorbus.nodeId = pricing-1\n").node_id == "pricing-1"
    assert load(tmp_path, "eBus.nodeId=marché\n").node_id == "marché"
    assert load(tmp_path, "actorbus.nodeId=" + "n" * 255 + "\n").node_id == "n" * 255


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("", "it has 0 UTF-8 bytes, expected 1..255"),
        ("n" * 256, "it has 256 UTF-8 bytes, expected 1..255"),
        ("é" * 128, "it has 256 UTF-8 bytes, expected 1..255"),
    ],
)
def test_node_id_value_errors_name_file_line_and_key(
    tmp_path: Path, value: str, problem: str
) -> None:
    key = "actorbus.nodeId"
    text = f"actorbus.dispatchers=d\n{key}={value}\n"
    assert fails(tmp_path, text, 2, key) == f"{key}={value!r}: {problem}; {NODE_ID_HINT}"


def test_dump_leaves_an_unset_node_id_out(tmp_path: Path) -> None:
    text = dump_config(BusConfig())
    assert "nodeId=" not in text
    assert "\n# nodeId: not set\n" in text
    assert "actorbus.nodeId=a b\n" in dump_config(BusConfig(node_id="a b"))


# ------------------------------------------------------------------------ name lists


@pytest.mark.parametrize(
    ("value", "detail"),
    [
        ("a,,b", "item 2 of 3 is empty"),
        ("a,b,", "item 3 of 3 is empty"),
        (",a", "item 1 of 2 is empty"),
        ("a, ,b", "item 2 of 3 is empty"),
    ],
)
def test_empty_names_are_errors(tmp_path: Path, value: str, detail: str) -> None:
    for list_key in ["dispatchers", "net.selectors", "services", "connections", "actors"]:
        key = f"actorbus.{list_key}"
        found = fails(tmp_path, f"{key}={value}\n", 1, key)
        assert found == (
            f"{key}={value!r}: {detail}; expected a comma list with no empty items "
            "(no ',,' and no trailing ',')"
        )


@pytest.mark.parametrize("name", ["a.b", "a b", "a/b", "é"])
def test_names_are_letters_digits_underscore_dash(tmp_path: Path, name: str) -> None:
    detail = fails(tmp_path, f"actorbus.dispatchers=ok, {name}\n", 1, "actorbus.dispatchers")
    assert detail.endswith(f"{name!r} is not a name; expected letters, digits, '_' and '-' only")


def test_duplicate_names_are_logged_and_ignored(tmp_path: Path, warnings_log: list[str]) -> None:
    path = write(tmp_path, "actorbus.dispatchers=a, b, a, a\n")
    cfg = load_config(path)
    assert [d.name for d in cfg.dispatchers] == ["a", "b"]
    assert warnings_log == [
        f"{path}:1: actorbus.dispatchers lists 'a' 3 times; the repeats are ignored"
    ]


def test_empty_lists_other_than_dispatchers_are_allowed(tmp_path: Path) -> None:
    cfg = load(tmp_path, "actorbus.services=\nactorbus.connections=\nactorbus.actors=\n")
    assert (cfg.services, cfg.connections, cfg.actors) == ((), (), ())


def test_a_setting_for_an_unlisted_name(tmp_path: Path) -> None:
    key = "actorbus.dispatcher.md.threadCount"
    detail = fails(tmp_path, f"actorbus.dispatchers=a,b\n{key}=2\n", 2, key)
    assert detail == (
        f"{key}='2': dispatcher 'md' is not listed in actorbus.dispatchers (line 1: a, b); "
        "add it to that list"
    )


def test_a_setting_for_a_name_when_the_list_is_absent(tmp_path: Path) -> None:
    key = "eBus.connection.up.host"
    detail = fails(tmp_path, f"{key}=h\n", 1, key)
    assert detail == (
        f"{key}='h': connection 'up' is not listed in eBus.connections, which the file does "
        "not set; add eBus.connections=up"
    )


# ---------------------------------------------------------------------- unknown keys


@pytest.mark.parametrize(
    ("key", "suggestion"),
    [
        ("actorbus.dispatchr.md.threadCount", "actorbus.dispatcher.md.threadCount"),
        ("actorbus.dispatcher", "actorbus.dispatchers"),
        ("actorbus.conections", "actorbus.connections"),
        ("eBus.net.selecter.io.type", "eBus.net.selector.io.type"),
        ("actorbus.sevice.port", "actorbus.service.port"),
        ("actorbus.sprak.master", "actorbus.spark.master"),
        ("actorbus.actr.a.class", "actorbus.actor.a.class"),
        ("actorbus.gc.treshold", "actorbus.gc.threshold"),
        ("eBus.gc.thresholds", "eBus.gc.threshold"),
        ("actorbus.gc.Threshold", "actorbus.gc.threshold"),
    ],
)
def test_unknown_keys_suggest_the_nearest(tmp_path: Path, key: str, suggestion: str) -> None:
    detail = fails(tmp_path, f"{key}=1\n", 1, key)
    prefix = key.split(".", maxsplit=1)[0] + "."
    assert detail == f"{key}='1': unknown key under {prefix!r}; did you mean {suggestion!r}?"


def test_an_unknown_key_far_from_any(tmp_path: Path) -> None:
    detail = fails(tmp_path, "actorbus.zzz=1\n", 1, "actorbus.zzz")
    assert detail == (
        "actorbus.zzz='1': unknown key under 'actorbus.'; expected one of the keys in "
        "docs/configuration.md"
    )


@pytest.mark.parametrize(
    ("section", "bad", "suggestion"),
    [
        ("dispatcher", "threadcount", "threadCount"),
        ("dispatcher", "runQueue", "runQueueType"),
        ("net.selector", "isdefault", "isDefault"),
        ("connection", "reconectDelay", "reconnectDelay"),
        ("service", "adressFilter", "addressFilter"),
    ],
)
def test_an_unknown_setting_suggests_the_nearest(
    tmp_path: Path, section: str, bad: str, suggestion: str
) -> None:
    list_key = "net.selectors" if section == "net.selector" else f"{section}s"
    key = f"actorbus.{section}.x.{bad}"
    detail = fails(tmp_path, f"actorbus.{list_key}=x\n{key}=1\n", 2, key)
    noun = section.removeprefix("net.")
    assert detail.startswith(
        f"{key}='1': unknown {noun} setting {bad!r}; did you mean {suggestion!r}? expected one of "
    )


def test_an_incomplete_per_name_key(tmp_path: Path) -> None:
    detail = fails(
        tmp_path, "actorbus.dispatchers=md\nactorbus.dispatcher.md=2\n", 2, "actorbus.dispatcher.md"
    )
    assert detail == (
        "actorbus.dispatcher.md='2': incomplete key; expected actorbus.dispatcher.NAME.SETTING"
    )


@pytest.mark.parametrize("key", ["ActorBus.dispatchers", "ebus.dispatchers", "EBUS.services"])
def test_a_prefix_in_the_wrong_case(tmp_path: Path, key: str) -> None:
    detail = fails(tmp_path, f"{key}=a\n", 1, key)
    assert "differs from" in detail
    assert "only by case; expected 'actorbus.' or 'eBus.' exactly" in detail


def test_keys_without_the_prefix_are_ignored(tmp_path: Path) -> None:
    path = write(tmp_path, "dispatchers=a,,b\nlogging.level=x ; y\nactorbusx.dispatchers=z\n")
    with pytest.warns(actorbus.config.ConfigWarning) as caught:
        assert load_config(path) == BusConfig(source=str(path))
    # ignored, but a key of ours without the prefix, or with a typo in it, is pointed out
    assert [str(w.message).split(": ", 2)[1] for w in caught] == [
        "dispatchers",
        "actorbusx.dispatchers",
    ]


# ------------------------------------------------------------------ trailing comments


@pytest.mark.parametrize(
    ("value", "comment"),
    [
        ("4 ; four threads", "; four threads"),
        ("4\t;four", ";four"),
        ("4  # four threads", "# four threads"),
    ],
)
def test_an_end_of_line_comment_is_an_error(tmp_path: Path, value: str, comment: str) -> None:
    key = "actorbus.dispatcher.d.threadCount"
    detail = fails(tmp_path, f"actorbus.dispatchers=d\n{key}={value}\n", 2, key)
    assert detail == (
        f"{key}={value!r}: properties files have no end-of-line comments; move {comment!r} to "
        "its own '#' line (or escape it as '\\;' or '\\#' if it belongs to the value)"
    )


def test_an_end_of_line_comment_on_a_string_value_is_an_error_too(tmp_path: Path) -> None:
    key = "actorbus.connection.c.host"
    detail = fails(tmp_path, f"actorbus.connections=c\n{key}=localhost ; the box\n", 2, key)
    assert "properties files have no end-of-line comments" in detail


def test_escaped_or_unspaced_semicolons_and_hashes_are_values(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        f"actorbus.actors=a\nactorbus.actor.a.class={HERE}.Pinned\n"
        "actorbus.actor.a.sql=select 1 \\; select 2\n"
        "actorbus.actor.a.title=Report \\#1\n"
        "actorbus.actor.a.list=x;y#z\n",
    )
    assert dict(cfg.actors[0].options) == {
        "sql": "select 1 ; select 2",
        "title": "Report #1",
        "list": "x;y#z",
    }


# -------------------------------------------------------------- same slot, two keys


def test_alias_and_prefix_duplicates_last_wins_and_logged(
    tmp_path: Path, warnings_log: list[str]
) -> None:
    path = write(
        tmp_path,
        "actorbus.dispatchers=d\n"
        "actorbus.dispatcher.d.threadCount=2\n"
        "eBus.dispatcher.d.numberThreads=3\n"
        "eBus.dispatchers=d\n",
    )
    cfg = load_config(path)
    assert cfg.dispatchers[0].thread_count == 3
    assert warnings_log == [
        f"{path}:3: eBus.dispatcher.d.numberThreads overrides "
        "actorbus.dispatcher.d.threadCount from line 2 (the last one wins)",
        f"{path}:4: eBus.dispatchers overrides actorbus.dispatchers from line 1 "
        "(the last one wins)",
    ]


def test_same_key_twice_is_logged_once_by_the_parser(
    tmp_path: Path, warnings_log: list[str]
) -> None:
    path = write(tmp_path, "actorbus.dispatchers=a\nactorbus.dispatchers=b\n")
    assert [d.name for d in load_config(path).dispatchers] == ["b"]
    assert warnings_log == [
        f"{path}:1: key 'actorbus.dispatchers' is set again on line 2; the value from line 2 "
        "is used"
    ]


# ------------------------------------------------------------------------ environment


def test_env_unset_gives_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ACTORBUS_CONFIG", raising=False)
    assert config_from_env() == BusConfig()


def test_env_empty_gives_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACTORBUS_CONFIG", "")
    assert config_from_env() == BusConfig()


def test_env_names_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, "actorbus.dispatchers=fromenv\n")
    monkeypatch.setenv("MY_APP_CONFIG", str(path))
    cfg = config_from_env("MY_APP_CONFIG")
    assert [d.name for d in cfg.dispatchers] == ["fromenv"]
    assert cfg.source == str(path)


def test_env_names_a_missing_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "gone.properties"
    monkeypatch.setenv("ACTORBUS_CONFIG", str(missing))
    with pytest.raises(ConfigError) as info:
        config_from_env()
    assert info.value.key == "ACTORBUS_CONFIG"
    assert str(info.value) == (
        f"ACTORBUS_CONFIG={str(missing)!r}: no such file; expected the path of a .properties "
        "file (unset ACTORBUS_CONFIG to use the default configuration)"
    )


def test_env_names_a_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACTORBUS_CONFIG", str(tmp_path))
    with pytest.raises(ConfigError, match="no such file"):
        config_from_env()


def test_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "nope.properties")
    assert info.value.path == str(tmp_path / "nope.properties")


# ------------------------------------------------------------------------ dump_config


FULL = f"""\
# everything at once
eBus.dispatchers = md, slow
eBus.dispatcher.md.runQueueType = spin+yield
eBus.dispatcher.md.numberThreads = 2
eBus.dispatcher.md.classes = {HERE}.Pinned
eBus.dispatcher.slow.isDefault = true
actorbus.net.selectors = io
actorbus.net.selector.io.type = blocking
actorbus.services = api
actorbus.service.api.port = 6000
actorbus.service.api.addressFilter = 127.0.0.1, [::1]:80
actorbus.service.api.serviceSelector = io
actorbus.connections = up
actorbus.connection.up.host = localhost
actorbus.connection.up.port = 6001
actorbus.connection.up.reconnect = yes
actorbus.actors = a
actorbus.actor.a.class = {HERE}.Pinned
actorbus.actor.a.dispatcher = md
actorbus.actor.a.motto = \\ padded \\; with \\# odd = chars: é\\n
actorbus.spark.master = local[2]
eBus.gc.threshold = 50000
actorbus.nodeId = pricing-é-1
"""


def test_dump_round_trips_a_full_config(tmp_path: Path) -> None:
    cfg = load(tmp_path, FULL)
    again = load_config(write(tmp_path, dump_config(cfg), "dumped.properties"))
    assert dataclasses.replace(again, source=cfg.source) == cfg
    assert cfg.actors[0].options["motto"] == " padded ; with # odd = chars: é\n"
    assert cfg.gc_threshold == 50_000
    assert cfg.node_id == "pricing-é-1"


def test_dump_round_trips_the_default_config(tmp_path: Path) -> None:
    text = dump_config(BusConfig())
    assert "actorbus.dispatchers=default\n" in text
    again = load_config(write(tmp_path, text))
    assert dataclasses.replace(again, source=None) == BusConfig()


def test_dump_round_trips_a_config_built_in_code(tmp_path: Path) -> None:
    cfg = BusConfig(
        dispatchers=(
            DispatcherConfig(name="a", kind=DispatcherKind.ASYNCIO),
            DispatcherConfig(name="b", is_default=True, classes=(f"{HERE}.AlsoPinned",)),
        ),
        services=(
            ServiceConfig(name="s", port=1, settings=ServiceSettings(address_filter=("h", "h:2"))),
        ),
        connections=(
            ConnectionConfig(
                name="c", host="h", port=3, settings=ConnectionSettings(bind_port=65535)
            ),
        ),
        actors=(ActorConfig(name="x", class_path=f"{HERE}.make_actor", dispatcher="a"),),
        spark=MappingProxyType({"journal": "/tmp/j k"}),
        gc_threshold=None,
        node_id="node a",
    )
    again = load_config(write(tmp_path, dump_config(cfg)))
    assert dataclasses.replace(again, source=None) == cfg


@pytest.mark.parametrize(
    ("threshold", "line"),
    [
        (None, "actorbus.gc.threshold=none"),
        (123_456, "actorbus.gc.threshold=123456"),
        (10_000, "actorbus.gc.threshold=10000"),
    ],
)
def test_dump_writes_the_gc_threshold(tmp_path: Path, threshold: int | None, line: str) -> None:
    cfg = BusConfig(gc_threshold=threshold)
    text = dump_config(cfg)
    assert f"\n{line}\n" in text
    again = load_config(write(tmp_path, text))
    assert dataclasses.replace(again, source=None) == cfg


def test_dump_writes_the_actorbus_prefix_and_every_setting(tmp_path: Path) -> None:
    text = dump_config(load(tmp_path, FULL))
    keys = [p.key for p in parse_properties(text)]
    assert all(k.startswith("actorbus.") for k in keys)
    assert "actorbus.dispatcher.md.threadCount" in keys
    assert "actorbus.connection.up.reconnectDelay" in keys
    assert "actorbus.connection.up.connectTimeout" in keys
    assert "actorbus.service.api.heartbeatReplyDelay" in keys


# --------------------------------------------------------------------------- exports


def test_the_public_api() -> None:
    assert sorted(actorbus.config.__all__) == sorted(
        [
            "DEFAULT_DISPATCHER",
            "ENV_VAR",
            "PREFIXES",
            "ActorConfig",
            "BusConfig",
            "ConfigWarning",
            "ConnectionConfig",
            "ConnectionSettings",
            "DispatcherConfig",
            "DispatcherKind",
            "GatewayConfig",
            "GatewaySettings",
            "JrepClientConfig",
            "JrepClientSettings",
            "LinkSettings",
            "MulticastConfig",
            "MulticastSettings",
            "Property",
            "SelectorConfig",
            "ServiceConfig",
            "ServiceSettings",
            "config_from_env",
            "config_from_properties",
            "dump_config",
            "format_property",
            "load_config",
            "parse_properties",
            "read_properties",
        ]
    )
    for name in actorbus.config.__all__:
        assert getattr(actorbus.config, name) is not None


# ------------------------------------------------------------------------------ docs

DOCS = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


@pytest.fixture
def myapp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A real importable ``myapp.actors`` module for the documentation's example."""
    package = tmp_path / "lib" / "myapp"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "actors.py").write_text(
        "class Pricer: pass\nclass QuoteHandler: pass\ndef make_recorder(): return None\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "lib"))
    yield
    for name in ("myapp.actors", "myapp"):
        sys.modules.pop(name, None)


def documented_example(tmp_path: Path) -> str:
    """The complete example of the docs, its secret file made here (mode 600)."""
    text = DOCS.read_text(encoding="utf-8")
    example = text.split("```properties\n")[-1].split("```")[0]
    secret = tmp_path / "link.secret"
    secret.write_text("0123456789abcdef0123456789abcdef\n")
    secret.chmod(0o600)
    assert "/etc/myapp/link.secret" in example
    return example.replace("/etc/myapp/link.secret", str(secret))


def test_the_documented_example_loads(tmp_path: Path, myapp: None) -> None:
    example = documented_example(tmp_path)
    cfg = load(tmp_path, example)
    assert [d.name for d in cfg.dispatchers] == ["md", "general"]
    assert cfg.default_dispatcher.name == "general"
    assert dispatcher(cfg, "md").classes == ("myapp.actors.Pricer", "myapp.actors.QuoteHandler")
    assert cfg.services[0].settings.address_filter == ("10.1.0.5", "10.1.0.6", "[::1]")
    assert cfg.connections[0].settings.reconnect is True
    assert (
        cfg.services[0].settings.secret_file
        == cfg.connections[0].settings.secret_file
        == str(tmp_path / "link.secret")
    )
    assert cfg.actors[1].options == {"title": "Prices ; all venues"}
    assert dict(cfg.spark) == {"master": "local[2]", "journal": "/var/lib/myapp/journal"}
    assert cfg.gc_threshold == 50_000
    again = load_config(write(tmp_path, dump_config(cfg), "dumped.properties"))
    assert dataclasses.replace(again, source=cfg.source) == cfg


def test_the_docs_name_every_setting(tmp_path: Path, myapp: None) -> None:
    text = DOCS.read_text(encoding="utf-8")
    example = documented_example(tmp_path)
    # dump_config writes every setting of every section the example uses
    written = {p.key for p in parse_properties(dump_config(load(tmp_path, example)))}
    per_name = [
        k
        for k in written
        if k.count(".") >= 3 and not k.startswith(("actorbus.actor.", "actorbus.spark."))
    ]
    settings = {key.rsplit(".", 1)[-1] for key in per_name}
    settings |= {"class", "dispatcher", "numberThreads", "reconnectTime"}
    assert len(settings) > 25
    for setting in sorted(settings):
        assert f"`{setting}`" in text, setting


def test_the_unnamed_and_named_default_service_are_one_slot(
    tmp_path: Path, warnings_log: list[str]
) -> None:
    path = write(tmp_path, "actorbus.service.port=1\nactorbus.service.default.port=2\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    # the named spelling won, and it needs the services list
    assert info.value.line == 2
    assert "service 'default' is not listed in actorbus.services" in str(info.value)
    assert warnings_log == [
        f"{path}:2: actorbus.service.default.port overrides actorbus.service.port from line 1 "
        "(the last one wins)"
    ]


def test_input_backlog_for_services_and_connections(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        "actorbus.services=s\nactorbus.service.s.port=0\nactorbus.service.s.inputBacklog=500\n"
        "actorbus.connections=c\nactorbus.connection.c.host=h\nactorbus.connection.c.port=1\n",
    )
    assert cfg.services[0].settings.input_backlog == 500
    assert cfg.connections[0].settings.input_backlog == 10_000  # the default
    detail = fails(
        tmp_path,
        "actorbus.services=s\nactorbus.service.s.port=0\nactorbus.service.s.inputBacklog=-1\n",
        3,
        "actorbus.service.s.inputBacklog",
    )
    assert "expected an integer >= 0" in detail
