"""No error message and no log line shows a secret or a token: every error the
config and link-credential code raises about one is triggered here, and the
secret's text and bytes are looked for in all of them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from nodes.support import buses

from actorbus import Bus, ConfigError, UsageError
from actorbus.config import GatewaySettings, ServiceSettings, load_config
from actorbus.errors import LinkClosedError

SECRET = "s3cr3t-0123456789abcdef-0123456789"
OTHER = "0th3r-0123456789abcdef-0123456789"
SHORT = "sh0rtz"


def hidden(text: str) -> bool:
    return all(
        s not in text and repr(s.encode()) not in text and s.encode().hex() not in text
        for s in (SECRET, OTHER, SHORT)
    )


def file(tmp_path: Path, name: str, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    return path


def raises(call: Callable[[], object]) -> str:
    with pytest.raises((ConfigError, UsageError)) as info:
        call()
    return str(info.value)


def properties(tmp_path: Path, text: str) -> Callable[[], object]:
    path = file(tmp_path, "app.properties", text, 0o644)
    return lambda: load_config(path)


def test_no_error_or_log_line_shows_a_secret(tmp_path: Path, log_lines: list[str]) -> None:
    service_head = "actorbus.services=s\nactorbus.service.s.port=0\n"
    messages: list[str] = []
    with buses("n", "m") as (n, m):
        checks: list[Callable[[], object]] = [
            # written inline in a properties file, with a habitual comment, keyless
            properties(tmp_path, f"{service_head}actorbus.service.s.secret={SECRET}\n"),
            properties(tmp_path, f"{service_head}actorbus.service.s.password={SECRET} ; pw\n"),
            properties(tmp_path, f"={SECRET}\n"),
            properties(
                tmp_path,
                "actorbus.jrep.gateways=g\nactorbus.jrep.gateway.g.port=0\n"
                f"actorbus.jrep.gateway.g.token={SECRET}\n",
            ),
            # a short secret, in code and in a file; files too open, empty, a directory
            lambda: n.listen(0, secret=SHORT.encode()),
            lambda: n.connect("127.0.0.1", 1, secret=SHORT.encode()),
            lambda: n.listen(0, secret={"a": SHORT.encode()}),
            properties(
                tmp_path,
                f"{service_head}actorbus.service.s.secretFile={file(tmp_path, 'short', SHORT)}\n",
            ),
            properties(
                tmp_path,
                f"{service_head}actorbus.service.s.secretFile="
                f"{file(tmp_path, 'open', SECRET, 0o644)}\n",
            ),
            lambda: n.listen(0, settings=ServiceSettings(secret_file=tmp_path / "open")),
            lambda: n.listen(0, settings=ServiceSettings(secret_file=tmp_path)),
            # peer-secrets files with bad lines
            *(
                lambda text=text: n.listen(  # type: ignore[misc]
                    0,
                    settings=ServiceSettings(peer_secrets_file=file(tmp_path, "peers", text)),
                )
                for text in (
                    f"a = {SHORT}\n",
                    f"b\\d = {SECRET}\n",
                    f"={SECRET}\n",
                    f"{'x' * 300} = {SECRET}\n",
                    f"a = {SECRET} \\u12\n",
                )
            ),
            # tokens: short, in a file too open, both given
            lambda: n.serve_jrep(0, token=SHORT.encode()),
            lambda: n.serve_jrep(
                0, settings=GatewaySettings(token_file=file(tmp_path, "tok", SECRET, 0o644))
            ),
            lambda: n.serve_jrep(
                0,
                token=SECRET.encode(),
                settings=GatewaySettings(token_file=file(tmp_path, "tok2", OTHER)),
            ),
        ]
        messages += [raises(check) for check in checks]
        # the wrong secret at logon, over a real loopback link
        service = n.listen(0, secret=SECRET.encode())
        link = m.connect("127.0.0.1", service.port, secret=OTHER.encode())
        with pytest.raises(LinkClosedError) as info:
            link.wait_logged_on(5)
        messages.append(str(info.value))
        messages.append(repr(link))
        messages.append(repr(service))
    assert len(messages) == 22
    for message in messages + log_lines:
        assert hidden(message), message
    assert any("authentication failed" in line for line in messages)


def test_a_bus_from_a_file_with_an_inline_secret_does_not_start(tmp_path: Path) -> None:
    path = file(
        tmp_path, "app.properties", f"actorbus.service.port=0\nactorbus.service.secret={SECRET}\n"
    )
    with pytest.raises(ConfigError) as info:
        Bus.from_properties(path)
    assert hidden(str(info.value))
    assert "secretFile" in str(info.value)
