"""TLS on links over real loopback sockets: a CA, server and client certificates
made here (``openssl``), pub/sub and request/reply over TLS, mutual TLS, the
certificates a client or a service refuses (another CA, self-signed, expired,
the wrong host name), TLS with a secret, TLS and plain ends that meet, the
properties-file keys and their errors, and contexts that would not verify."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from loguru import logger
from nodes.messages import Answer, Ask, Counter
from nodes.support import buses, started, wait_for

from actorbus import Bus, BusConfig, ConfigError, FeedState
from actorbus.config import (
    ConnectionSettings,
    DispatcherConfig,
    DispatcherKind,
    SelectorConfig,
    load_config,
)
from actorbus.errors import LinkClosedError, UsageError
from actorbus.net import Link, Service, tls_client_context, tls_server_context
from actorbus.testing import Recorder

UP = FeedState.UP
KEY = b"0123456789abcdef0123456789abcdef"


# ============================================================ certificates


def _openssl(cwd: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=30)


def _key(cwd: Path, name: str) -> None:
    _openssl(cwd, "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-out", f"{name}.key")  # fmt: skip
    (cwd / f"{name}.key").chmod(0o600)


def _ca(cwd: Path, name: str) -> None:
    _key(cwd, name)
    _openssl(cwd, "req", "-x509", "-new", "-key", f"{name}.key", "-out", f"{name}.pem",
             "-days", "2", "-subj", f"/CN={name}",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")  # fmt: skip


def _cert(cwd: Path, name: str, ca: str, san: str, days: int = 2) -> None:
    """``name``.pem/.key: a certificate for ``san`` signed by ``ca`` (``ca`` ==
    ``name``: self-signed)."""
    _key(cwd, name)
    ext = cwd / f"{name}.ext"
    ext.write_text(
        f"subjectAltName={san}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth,clientAuth\n"
    )
    _openssl(cwd, "req", "-new", "-key", f"{name}.key", "-out", f"{name}.csr",
             "-subj", f"/CN={name}")  # fmt: skip
    signer = (
        ["-signkey", f"{name}.key"] if ca == name else ["-CA", f"{ca}.pem", "-CAkey", f"{ca}.key"]
    )
    _openssl(cwd, "x509", "-req", "-in", f"{name}.csr", *signer, "-out", f"{name}.pem",
             "-days", str(days), "-extfile", ext.name)  # fmt: skip


@dataclass(frozen=True)
class Pki:
    dir: Path

    def pem(self, name: str) -> str:
        return str(self.dir / f"{name}.pem")

    def key(self, name: str) -> str:
        return str(self.dir / f"{name}.key")

    def server(self, name: str = "server", ca: str | None = None) -> ssl.SSLContext:
        return tls_server_context(
            self.pem(name), self.key(name), self.pem(ca) if ca is not None else None
        )

    def client(self, ca: str = "ca", cert: str | None = None) -> ssl.SSLContext:
        if cert is None:
            return tls_client_context(self.pem(ca))
        return tls_client_context(self.pem(ca), self.pem(cert), self.key(cert))


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    cwd = tmp_path_factory.mktemp("pki")
    _ca(cwd, "ca")
    _ca(cwd, "other-ca")
    local = "IP:127.0.0.1,DNS:localhost"
    _cert(cwd, "server", "ca", local)
    _cert(cwd, "stranger", "other-ca", local)  # a server certificate of another CA
    _cert(cwd, "selfsigned", "selfsigned", local)
    _cert(cwd, "expired", "ca", local, days=-1)
    _cert(cwd, "elsewhere", "ca", "DNS:elsewhere.example")
    _cert(cwd, "client", "ca", "DNS:client.example")
    _cert(cwd, "foreign-client", "other-ca", "DNS:client.example")
    return Pki(cwd)


def _tls_linked(a: Bus, b: Bus, server: ssl.SSLContext, client: ssl.SSLContext,
                **connect: object) -> tuple[Service, Link]:  # fmt: skip
    service = a.listen(0, tls=server, **connect.pop("listen", {}))  # type: ignore[arg-type]
    link = b.connect("127.0.0.1", service.port, tls=client, **connect)  # type: ignore[arg-type]
    link.wait_logged_on(5)
    wait_for(lambda: any(x.is_logged_on for x in service.links), "the accepted link logs on")
    return service, link


@pytest.fixture
def logs() -> Iterator[list[str]]:
    """Every actorbus log record, DEBUG and up."""
    lines: list[str] = []
    logger.enable("actorbus")
    sink = logger.add(lambda m: lines.append(str(m.record["message"])))
    try:
        yield lines
    finally:
        logger.remove(sink)
        logger.disable("actorbus")


def _pub_sub_and_request_reply(a: Bus, b: Bus) -> None:
    """A publishes /c and answers /q; B subscribes and asks; all over the link."""
    pub, rep = Recorder("pub"), Recorder("rep")
    sub, req = Recorder("sub"), Recorder("req")
    started(a, pub, rep)
    started(b, sub, req)
    rep.auto_reply = lambda inc: Answer("/q", value=inc.request.q * 2)
    rep.replier(Ask, "/q")
    p = pub.publisher(Counter, "/c", up=True)
    s = sub.subscribe(Counter, "/c")
    sub.log.wait_for(lambda ev: ("feed_status", s.key, UP) in ev)
    pub.log.wait_for(lambda ev: ("publish_status", p.key, UP) in ev)
    for n in range(200):
        p.publish(Counter("/c", n=n, payload=b"x" * (n % 7) * 100))
    got = sub.log.wait_count("message", 200)
    assert [e[1].n for e in got if e[0] == "message"] == list(range(200))
    f = req.requestor(Ask, "/q")
    req.log.wait_for(lambda ev: ("feed_status", f.key, UP) in ev)
    for q in range(50):
        f.request(Ask("/q", q=q))
    replies = [e for e in req.log.wait_count("reply", 50) if e[0] == "reply"]
    assert sorted(r[2].value for r in replies) == [q * 2 for q in range(50)]


def _shared(node_id: str) -> Bus:
    """A bus whose actors and links share one asyncio loop."""
    config = BusConfig(
        dispatchers=(DispatcherConfig("io", kind=DispatcherKind.ASYNCIO, is_default=True),),
        selectors=(SelectorConfig("net", dispatcher="io", is_default=True),),
    )
    return Bus(config, node_id=node_id)


# ============================================================ traffic over TLS


def test_pub_sub_and_request_reply_work_over_tls(pki: Pki) -> None:
    with buses("A", "B") as (a, b):
        service, link = _tls_linked(a, b, pki.server(), pki.client())
        _pub_sub_and_request_reply(a, b)
        # threaded dispatchers: replies and requests made on their threads were
        # encoded there and written by the loop (a TLS record is the transport's)
        (accepted,) = service.links
        assert accepted.counters.messages_in == link.counters.messages_out == 50
        assert link.counters.messages_in == accepted.counters.messages_out >= 250
        assert link.counters.tls_failures == service.counters.tls_failures == 0


def test_pub_sub_and_request_reply_work_over_tls_on_a_shared_loop(pki: Pki) -> None:
    a, b = _shared("A"), _shared("B")
    try:
        _tls_linked(a, b, pki.server(), pki.client())
        _pub_sub_and_request_reply(a, b)
    finally:
        b.close()
        a.close()


def test_the_traffic_is_encrypted(pki: Pki) -> None:
    """The link's socket carries TLS: what the peer's certificate says is known,
    and the subject never crosses in clear (read through a recording relay)."""
    import socket
    import threading

    seen = bytearray()
    with buses("A", "B") as (a, b):
        service = a.listen(0, tls=pki.server())
        relay = socket.create_server(("127.0.0.1", 0))
        done = threading.Event()

        def pump(src: socket.socket, dst: socket.socket) -> None:
            try:
                while chunk := src.recv(65536):
                    seen.extend(chunk)
                    dst.sendall(chunk)
            except OSError:
                pass
            finally:
                for s in (src, dst):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        def serve() -> None:
            inner, _ = relay.accept()
            outer = socket.create_connection(("127.0.0.1", service.port))
            threads = [
                threading.Thread(target=pump, args=(inner, outer)),
                threading.Thread(target=pump, args=(outer, inner)),
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join(10)
            inner.close()
            outer.close()
            done.set()

        server = threading.Thread(target=serve)
        server.start()
        try:
            link = b.connect("127.0.0.1", relay.getsockname()[1], tls=pki.client())
            link.wait_logged_on(5)
            inbox = b.inbox(Counter, "/very/secret/subject")
            feed = a.publisher(Counter, "/very/secret/subject")
            wait_for(feed.is_feed_up, "the remote subscriber is seen")
            feed.publish(Counter("/very/secret/subject", n=1, payload=b"plain-text-payload"))
            assert inbox.receive(5) is not None
            link.close()
        finally:
            b.close()
            assert done.wait(10)
            server.join(5)
            relay.close()
    assert seen
    assert b"secret/subject" not in seen and b"plain-text-payload" not in seen
    assert b"linktest.Counter" not in seen


# ============================================================ refused certificates


@pytest.mark.parametrize(
    ("server", "says"),
    [
        ("stranger", "not signed by a CA in this connection's tlsCaFile"),
        ("selfsigned", "not signed by a CA in this connection's tlsCaFile"),
        ("expired", "needs a certificate valid now"),
    ],
)
def test_a_client_refuses_a_service_certificate_it_cannot_trust(
    pki: Pki, server: str, says: str
) -> None:
    with buses("A", "B") as (a, b):
        service = a.listen(0, tls=pki.server(server))
        link = b.connect("127.0.0.1", service.port, tls=pki.client())
        with pytest.raises(LinkClosedError) as info:
            link.wait_logged_on(5)
        assert "TLS failed: the service's certificate was refused" in str(info.value)
        assert says in str(info.value)
        assert link.counters.tls_failures == 1
        assert link.counters.logons == 0
        # the service saw the client give up in the handshake: counted, and it goes on
        wait_for(lambda: service.counters.tls_failures == 1, "the service counts it")
        good = a.listen(0, tls=pki.server())
        assert b.connect("127.0.0.1", good.port, tls=pki.client()).wait_logged_on(5) == "A"


def test_a_host_name_the_certificate_does_not_carry_is_refused(pki: Pki) -> None:
    with buses("A", "B", "C") as (a, b, c):
        service = a.listen(0, tls=pki.server("elsewhere"))
        link = b.connect("127.0.0.1", service.port, tls=pki.client())
        with pytest.raises(LinkClosedError) as info:
            link.wait_logged_on(5)
        assert "IP address mismatch" in str(info.value) or "mismatch" in str(info.value)
        assert "tlsServerName (tls_server_name=)" in str(info.value)
        assert link.counters.tls_failures == 1
        # the name the certificate carries, checked instead of the dialled one
        named = c.connect(
            "127.0.0.1",
            service.port,
            tls=pki.client(),
            settings=ConnectionSettings(tls_server_name="elsewhere.example"),
        )
        assert named.wait_logged_on(5) == "A"
        # and a certificate for 127.0.0.1 and localhost, dialled as "localhost"
        local = a.listen(0, tls=pki.server())
        other = c.connect(
            "localhost",
            local.port,
            tls=pki.client(),
            settings=ConnectionSettings(tls_server_name="wrong.example"),
        )
        with pytest.raises(LinkClosedError, match="Hostname mismatch"):
            other.wait_logged_on(5)


# ============================================================ mutual TLS


def test_mutual_tls_admits_a_client_certificate_of_its_ca(pki: Pki) -> None:
    with buses("A", "B") as (a, b):
        service, _ = _tls_linked(a, b, pki.server(ca="ca"), pki.client(cert="client"))
        _pub_sub_and_request_reply(a, b)
        assert service.counters.tls_failures == 0


@pytest.mark.parametrize(
    ("cert", "service_says", "client_says"),
    [
        (None, "the client presented no certificate", "refused this node's certificate"),
        (
            "foreign-client",
            "the client's certificate was refused",
            "refused this node's certificate",
        ),
    ],
)
def test_mutual_tls_refuses_a_client_without_a_certificate_of_its_ca(
    pki: Pki, cert: str | None, service_says: str, client_says: str, logs: list[str]
) -> None:
    with buses("A", "B") as (a, b):
        service = a.listen(0, tls=pki.server(ca="ca"))
        link = b.connect("127.0.0.1", service.port, tls=pki.client(cert=cert))
        with pytest.raises(LinkClosedError) as info:
            link.wait_logged_on(5)
        assert client_says in str(info.value)
        wait_for(lambda: service.counters.tls_failures == 1, "the service counts the refusal")
        assert link.counters.tls_failures == 1
        assert service.counters.links.logons == 0
        wait_for(lambda: not a.links, "nothing of the client stays a link")
    assert any(service_says in line and "counted in tls_failures" in line for line in logs)


def test_mutual_tls_is_enough_to_listen_beyond_loopback_without_a_secret(pki: Pki) -> None:
    with buses("A", "B") as (a, b):
        with pytest.raises(ConfigError, match="without a secret"):
            a.listen(0, "0.0.0.0", tls=pki.server())  # server TLS only: not enough
        service = a.listen(0, "0.0.0.0", tls=pki.server(ca="ca"))
        link = b.connect("127.0.0.1", service.port, tls=pki.client(cert="client"))
        assert link.wait_logged_on(5) == "A"


# ============================================================ TLS and the secret


def test_tls_and_a_secret_together(pki: Pki) -> None:
    with buses("A", "B", "C") as (a, b, c):
        service, link = _tls_linked(
            a, b, pki.server(), pki.client(), secret=KEY, listen={"secret": KEY}
        )
        _pub_sub_and_request_reply(a, b)
        wrong = c.connect(
            "127.0.0.1", service.port, tls=pki.client(), secret=b"fedcba9876543210fedcba98"
        )
        with pytest.raises(LinkClosedError, match="authentication failed"):
            wrong.wait_logged_on(5)
        assert service.counters.auth_failures == 1
        assert service.counters.tls_failures == 0  # TLS itself was fine
        assert link.is_logged_on


# ============================================================ TLS meets plain


def test_a_tls_client_and_a_plain_service_fail_clearly_and_both_go_on(
    pki: Pki, logs: list[str]
) -> None:
    with buses("A", "B") as (a, b):
        plain = a.listen(0)
        link = b.connect("127.0.0.1", plain.port, tls=pki.client())
        with pytest.raises(LinkClosedError) as info:
            link.wait_logged_on(5)
        assert "the service does not speak TLS" in str(info.value)
        assert link.counters.tls_failures == 1
        wait_for(lambda: plain.counters.tls_failures == 1, "the plain service counts it")
        assert any("the client speaks TLS to this service, which does not" in x for x in logs)
        assert b.connect("127.0.0.1", plain.port).wait_logged_on(5) == "A"


def test_a_plain_client_and_a_tls_service_fail_clearly_and_both_go_on(
    pki: Pki, logs: list[str]
) -> None:
    with buses("A", "B") as (a, b):
        service = a.listen(0, tls=pki.server())
        link = b.connect("127.0.0.1", service.port)
        with pytest.raises(LinkClosedError) as info:
            link.wait_logged_on(5)
        assert "a service that speaks TLS closes plain connections so" in str(info.value)
        wait_for(lambda: service.counters.tls_failures == 1, "the TLS service counts it")
        assert any("the client does not speak TLS" in x for x in logs)
        assert b.connect("127.0.0.1", service.port, tls=pki.client()).wait_logged_on(5) == "A"


# ============================================================ properties files


def test_nodes_from_properties_files_link_with_mutual_tls(pki: Pki, tmp_path: Path) -> None:
    server = tmp_path / "server.properties"
    server.write_text(
        "actorbus.services = feeds\n"
        "actorbus.service.feeds.port = 0\n"
        "actorbus.service.feeds.host = 127.0.0.1\n"
        f"actorbus.service.feeds.tlsCertFile = {pki.pem('server')}\n"
        f"actorbus.service.feeds.tlsKeyFile = {pki.key('server')}\n"
        f"actorbus.service.feeds.tlsCaFile = {pki.pem('ca')}\n"
    )
    a = Bus.from_properties(server, node_id="A")
    try:
        (service,) = a.net.services
        assert service.mutual_tls
        client = tmp_path / "client.properties"
        client.write_text(
            "actorbus.connections = up\n"
            "actorbus.connection.up.host = localhost\n"
            f"actorbus.connection.up.port = {service.port}\n"
            f"actorbus.connection.up.tlsCaFile = {pki.pem('ca')}\n"
            f"actorbus.connection.up.tlsCertFile = {pki.pem('client')}\n"
            f"actorbus.connection.up.tlsKeyFile = {pki.key('client')}\n"
            "actorbus.connection.up.tlsServerName = localhost\n"
        )
        config = load_config(client)
        assert config.connections[0].settings.tls_server_name == "localhost"
        b = Bus.from_properties(client, node_id="B")
        try:
            (link,) = b.links
            assert link.wait_logged_on(5) == "A"
            _pub_sub_and_request_reply(a, b)
        finally:
            b.close()
    finally:
        a.close()


def _props(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "app.properties"
    path.write_text("".join(line + "\n" for line in lines))
    return path


@pytest.mark.parametrize(
    ("setting", "value", "problem"),
    [
        ("tlsCertFile", "missing.pem", "does not exist; give the path of the file holding the certificate"),
        ("tlsKeyFile", "cert-not-key.key", "holds no PEM private key"),
        ("tlsCaFile", "server.key", "holds no PEM certificate that loads"),
        ("tlsKeyFile", "readable.key", "can be read by every user of this machine (mode 0644)"),
    ],
)  # fmt: skip
def test_an_unfit_tls_file_is_refused_at_load_with_file_line_and_key(
    pki: Pki, tmp_path: Path, setting: str, value: str, problem: str
) -> None:
    readable = pki.dir / "readable.key"
    if not readable.exists():
        shutil.copy(pki.key("server"), readable)
        readable.chmod(0o644)
        shutil.copy(pki.pem("server"), pki.dir / "cert-not-key.key")
        (pki.dir / "cert-not-key.key").chmod(0o600)
    path = _props(
        tmp_path,
        [
            "actorbus.services = feeds",
            "actorbus.service.feeds.port = 0",
            f"actorbus.service.feeds.{setting} = {pki.dir / value}",
        ],
    )
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert (info.value.line, info.value.key) == (3, f"actorbus.service.feeds.{setting}")
    assert str(info.value).startswith(f"{path}:3: actorbus.service.feeds.{setting}=")
    assert problem in str(info.value)


@pytest.mark.parametrize(
    ("lines", "line", "key", "problem"),
    [
        (["service.feeds.tlsCertFile = {server.pem}"], 3, "service.feeds.tlsCertFile",
         "a certificate needs its private key: set tlsKeyFile too"),
        (["service.feeds.tlsCaFile = {ca.pem}"], 3, "service.feeds.tlsCaFile",
         "needs a service that speaks TLS; set tlsCertFile and tlsKeyFile"),
        (["service.feeds.tlsCertFile = {server.pem}", "service.feeds.tlsKeyFile = {client.key}"],
         4, "service.feeds.tlsKeyFile", "does not load with the certificate"),
        (["connection.up.tlsCertFile = {client.pem}", "connection.up.tlsKeyFile = {client.key}"],
         3, "connection.up.tlsCertFile", "TLS on a connection needs the CA"),
        (["connection.up.tlsServerName = localhost"], 3, "connection.up.tlsServerName",
         "set tlsCaFile on this connection too"),
        (["connection.up.tlsCaFile = {ca.pem}", "connection.up.tlsKeyFile = {client.key}"],
         4, "connection.up.tlsKeyFile", "a private key needs its certificate"),
    ],
)  # fmt: skip
def test_tls_keys_that_belong_together_are_checked_at_load(
    pki: Pki, tmp_path: Path, lines: list[str], line: int, key: str, problem: str
) -> None:
    if lines[0].startswith("service"):
        head = ["actorbus.services = feeds", "actorbus.service.feeds.port = 0"]
    else:  # the TLS keys on lines 3 and 4, the port after them
        head = ["actorbus.connections = up", "actorbus.connection.up.host = localhost"]
        lines = [*lines, "connection.up.port = 7000"]
    files = {
        "{server.pem}": pki.pem("server"),
        "{ca.pem}": pki.pem("ca"),
        "{client.pem}": pki.pem("client"),
        "{client.key}": pki.key("client"),
    }
    body = []
    for text in lines:
        for mark, file in files.items():
            text = text.replace(mark, file)
        body.append(f"actorbus.{text}")
    path = _props(tmp_path, [*head, *body])
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert (info.value.line, info.value.key) == (line, f"actorbus.{key}")
    assert problem in str(info.value)


# ============================================================ the Python API


def test_the_context_helpers_name_the_argument_that_is_wrong(pki: Pki, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        tls_server_context(pki.pem("server"), tmp_path / "nope.key")
    assert info.value.key == "tls_server_context(key_file)"
    assert "does not exist" in str(info.value)
    with pytest.raises(ConfigError, match=r"tls_client_context\(cert_file\) is given without"):
        tls_client_context(pki.pem("ca"), pki.pem("client"))
    with pytest.raises(ConfigError, match="does not load with the certificate"):
        tls_server_context(pki.pem("server"), pki.key("client"))
    context = tls_client_context(pki.pem("ca"), pki.pem("client"), pki.key("client"))
    assert context.verify_mode is ssl.CERT_REQUIRED and context.check_hostname
    assert context.minimum_version is ssl.TLSVersion.TLSv1_2
    server = tls_server_context(pki.pem("server"), pki.key("server"), pki.pem("ca"))
    assert server.verify_mode is ssl.CERT_REQUIRED


def test_a_context_that_would_not_verify_is_refused(pki: Pki) -> None:
    lax = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    lax.check_hostname = False
    lax.verify_mode = ssl.CERT_NONE
    old = ssl.create_default_context(cafile=pki.pem("ca"))
    old.maximum_version = ssl.TLSVersion.TLSv1_2  # (setting an older minimum warns)
    old.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
    with buses("A") as (a,):
        with pytest.raises(UsageError, match="does not verify the service's certificate"):
            a.connect("127.0.0.1", 7000, tls=lax)
        with pytest.raises(UsageError, match="accepts MINIMUM_SUPPORTED; links need TLS 1.2"):
            a.connect("127.0.0.1", 7000, tls=old)
        with pytest.raises(UsageError, match="a client context"):
            a.listen(0, tls=pki.client())
        with pytest.raises(UsageError, match="expected an ssl.SSLContext"):
            a.listen(0, tls="server.pem")  # type: ignore[arg-type]
        with pytest.raises(UsageError, match="without tls="):
            a.connect("127.0.0.1", 7000, settings=ConnectionSettings(tls_server_name="localhost"))
        assert not a.links


def test_run_exits_1_naming_a_plain_connection_a_tls_service_refused(pki: Pki) -> None:
    # `actorbus run` in a subprocess dials this process's TLS service without TLS
    import os
    import sys
    import time

    from nodes.support import buses as _buses

    root = Path(__file__).resolve().parents[2]
    with _buses("service") as (peer,):
        service = peer.listen(0, tls=pki.server())
        app = pki.dir / "plain-client.properties"
        app.write_text(
            "actorbus.actors = sink\n"
            "actorbus.actor.sink.class = demos.calculator.actors.Sink\n"
            "actorbus.connections = upstream\n"
            "actorbus.connection.upstream.host = 127.0.0.1\n"
            f"actorbus.connection.upstream.port = {service.port}\n"
        )
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), str(root)])}
        started = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "actorbus", "run", str(app), "--duration", "15"],
            capture_output=True, text=True, timeout=60, cwd=root, env=env, check=False,
        )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert time.monotonic() - started < 12  # stopped by the refusal, not by --duration
    lines = [x for x in proc.stderr.splitlines() if x.startswith("actorbus run:")]
    assert len(lines) == 1, proc.stderr
    assert "connection 'upstream' failed" in lines[0]
    assert "a service that speaks TLS closes plain connections" in lines[0]  # the reason
    assert "give this connection tlsCaFile" in lines[0]  # the fix
