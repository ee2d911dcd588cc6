"""Run the web demo: ``actorbus demo web`` calls :func:`run`.

One node runs the calculator demo's source and calculator, a stats replier and
a control replier, and serves J.REP plus the page (``page/``) on one port:
open the printed URL in a browser.  :class:`WebDemo` is the same node as a
context manager, for tests.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType

from actorbus import StopSignals
from actorbus.config import GatewaySettings
from actorbus.net.jrep import Gateway
from actorbus.node import Bus
from demos.calculator.actors import Calculator

from . import PAGE_DIR
from .actors import ControlService, PausableSource, StatsService


class WebDemo:
    """The demo's node: ``with WebDemo(port=0) as demo: demo.url ...``."""

    def __init__(
        self,
        *,
        port: int = 8080,
        host: str = "127.0.0.1",
        period_ms: float = 100,
        window: int = 5,
        seed: int | None = None,
    ) -> None:
        self.port, self.host = port, host
        self.period_ms, self.window, self.seed = period_ms, window, seed
        self.bus: Bus | None = None
        self.gateway: Gateway | None = None
        self.source: PausableSource | None = None

    def __enter__(self) -> WebDemo:
        bus = self.bus = Bus(node_id="web-demo")
        try:
            self.source = PausableSource("source", period_ms=self.period_ms, seed=self.seed)
            actors = [
                self.source,
                Calculator("calculator", window=self.window),
                StatsService("stats"),
                ControlService("control", source=self.source),
            ]
            for actor in actors:
                bus.register(actor)
            bus.startup(actors).wait(10)
            self.gateway = bus.serve_jrep(
                self.port, self.host, name="web", settings=GatewaySettings(static_dir=str(PAGE_DIR))
            )
        except BaseException:
            bus.close()
            raise
        return self

    @property
    def url(self) -> str:
        """The page's address."""
        assert self.gateway is not None
        return f"http://{self.host}:{self.gateway.port}/"

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        bus = self.bus
        if bus is not None:
            bus.shutdown_all().wait(10)
            bus.close()


def run(
    *,
    port: int = 8080,
    duration: float | None = None,
    period_ms: float = 100,
    window: int = 5,
    stop: threading.Event | None = None,
    out: Callable[[str], object] = print,
) -> None:
    """Serve the demo until ``duration`` seconds pass, ``stop`` is set, or Ctrl-C / SIGTERM."""
    stop = stop or threading.Event()
    with (
        StopSignals(stop=stop) as stopping,
        WebDemo(port=port, period_ms=period_ms, window=window) as demo,
    ):
        out(f"web demo: open {demo.url}  (Ctrl-C stops)")
        stopping.wait(duration)
