"""The ``actorbus`` command.

* ``actorbus run APP.properties [--duration S]`` — start a bus from a properties
  file, create the actors its ``actors`` keys name, start them, and run until
  Ctrl-C or SIGTERM (or ``--duration``); then shut the actors down and close the
  bus, so that every link logs off with a reason (see :mod:`actorbus._signals`).
* ``actorbus demo calculator [...]`` — the moving-average calculator demo.
* ``actorbus demo web [--port P] [--duration S]`` — the calculator's actors
  behind a J.REP gateway and a live page (prints its URL).
* ``actorbus diagram MACHINE -o OUT`` — render a state machine (a ``.sm`` file or
  ``module:Class``) as Mermaid, DOT, SVG or PNG (by the output's extension).
* ``actorbus replay FILE [--json]`` — replay an actor's recording into a fresh
  instance and print the run; exit status 0 when its outputs match the
  recording, 1 with the first difference (docs/replay.md).
* ``actorbus topics HOST:PORT [--timeout S] [--auth none]`` — link to the running node that
  listens there and print the topics and queue groups in use on it and on the
  nodes linked to it (``Bus.topics()``), one table; a node that cannot be
  reached is one line on stderr and exit status 2.
* ``actorbus inspect HOST:PORT [--secret-file F] [--auth none] [--tls-ca-file F ...] [--watch
  [S]] [--diagram ACTOR [--format mermaid|dot|svg] [-o FILE]] [--json]`` — link to
  the running node there and print its actors, dispatchers, feeds, links,
  outstanding requests and state machines (``Bus.inspect()``,
  docs/inspect.md); a node that cannot be inspected is one line on stderr and
  exit status 1.

Bad arguments or bad files print one clear line to stderr and exit with status 2
(no traceback).

The working directory comes first on ``sys.path``, as under ``python -m``: the
modules a properties file or a ``module:Class`` names are found there, then on
``PYTHONPATH`` and among the installed packages.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from . import _cli_inspect, enable_logging
from ._log import logger
from ._signals import StopSignals
from .errors import Error

if TYPE_CHECKING:
    from .bus.discovery import Topic

__all__ = ["main"]


class _Fail(Exception):
    """A user-facing failure: printed as one line, exit status 2."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="actorbus",
        description="Actor runtime with a typed message bus, state machines and remote links.",
        epilog=(
            "Modules named by a properties file or a module:Class are imported from the "
            "working directory first (as under python -m), then from PYTHONPATH and the "
            "installed packages."
        ),
    )
    parser.add_argument(
        "--log-level",
        default=None,
        help="loguru level (default WARNING; ERROR for topics and inspect, whose failure is "
        "one line)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="run the actors a properties file names")
    run.add_argument("properties", type=Path, help="the application's .properties file")
    run.add_argument("--duration", type=float, default=None, help="stop after S seconds")

    demo = sub.add_parser("demo", help="run a demo")
    demos = demo.add_subparsers(dest="demo", required=True, metavar="DEMO")
    calc = demos.add_parser("calculator", help="moving average: source -> calculator (FSM) -> sink")
    calc.add_argument(
        "--config", type=Path, default=None, help="properties file (default: the demo's)"
    )
    calc.add_argument(
        "--duration", type=float, default=None, help="stop after S seconds (default: Ctrl-C)"
    )
    calc.add_argument(
        "--window", type=int, default=5, help="moving-average window size (default 5)"
    )
    calc.add_argument(
        "--period", type=float, default=100, help="ms between data points (default 100)"
    )
    calc.add_argument(
        "--min", dest="minimum", type=int, default=0, help="smallest data point (default 0)"
    )
    calc.add_argument(
        "--max", dest="maximum", type=int, default=100, help="data points are < MAX (default 100)"
    )
    calc.add_argument("--subject", default="/demo", help="subject prefix (default /demo)")
    calc.add_argument(
        "--machine",
        choices=("sm", "python"),
        default="sm",
        help="calculator machine: the .sm file or the Python class (default sm)",
    )
    calc.add_argument(
        "--engine",
        choices=("compiled", "reference"),
        default="compiled",
        help="FSM engine (default compiled)",
    )
    calc.add_argument(
        "--role",
        action="append",
        choices=("source", "calculator", "sink"),
        help="run only these actors (repeatable; default all three)",
    )
    calc.add_argument("--seed", type=int, default=None, help="random seed of the source")
    calc.add_argument("--count", type=int, default=None, help="the source sends at most N points")
    calc.add_argument(
        "--record",
        type=Path,
        default=None,
        help="record the calculator to this file (replay it with: actorbus replay FILE)",
    )
    calc.add_argument(
        "--diagram",
        type=Path,
        default=None,
        help="at the end, write the calculator's machine with its current state highlighted",
    )

    web = demos.add_parser(
        "web", help="a live page of the moving averages, over J.REP (prints the URL)"
    )
    web.add_argument("--port", type=int, default=8080, help="HTTP/WebSocket port (default 8080)")
    web.add_argument(
        "--duration", type=float, default=None, help="stop after S seconds (default: Ctrl-C)"
    )
    web.add_argument(
        "--period", type=float, default=100, help="ms between data points (default 100)"
    )
    web.add_argument("--window", type=int, default=5, help="moving-average window size (default 5)")

    spark = demos.add_parser(
        "spark",
        help="bus feeds -> journal -> Spark windowed averages -> back onto the bus",
        add_help=False,
    )
    del spark  # its options are the Spark demo's own: main() hands them over unparsed

    topics = sub.add_parser(
        "topics", help="list the topics and queue groups in use on a running node's bus"
    )
    topics.add_argument(
        "address", help="HOST:PORT of a node's service ([IPv6]:PORT for an IPv6 host)"
    )
    topics.add_argument(
        "--timeout",
        type=float,
        default=2.0,
        help="seconds to wait for the link, then for the nodes' answers (default 2)",
    )
    topics.add_argument(
        "--auth",
        choices=("auto", "none"),
        default="auto",
        help="auto (default): prove this user's secret, as the node's own links do; none: "
        "prove no secret (a node whose service has auth=none)",
    )

    _cli_inspect.add_parser(sub)
    rep = sub.add_parser(
        "replay", help="replay an actor's recording and compare its outputs with it"
    )
    rep.add_argument("file", type=Path, help="a recording (bus.record, actor.NAME.recordTo)")
    rep.add_argument("--json", action="store_true", help="print the run as JSON")
    rep.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        help="seconds to wait for the actor to take each input (default 10)",
    )

    diag = sub.add_parser("diagram", help="render a state machine")
    diag.add_argument("machine", help="a .sm file, or module:Class of a StateMachine")
    diag.add_argument(
        "-o",
        "--output",
        type=Path,
        default=None,
        help="output file (.mmd .dot .svg .png); default: Mermaid on stdout",
    )
    diag.add_argument("--current", default=None, help="state to highlight")
    return parser


def _load_machine(text: str) -> Any:
    if text.endswith(".sm") or Path(text).suffix == ".sm":
        path = Path(text)
        if not path.is_file():
            raise _Fail(f"{text}: no such .sm file")
        return path
    if ":" not in text:
        raise _Fail(f"{text!r}: expected a .sm file or module:Class")
    module_name, _, attr = text.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        from .config.loader import _no_module_hint

        missing = exc.name if isinstance(exc, ModuleNotFoundError) else None
        if missing and (module_name == missing or module_name.startswith(missing + ".")):
            reason = _no_module_hint(missing)
        else:
            reason = f"{type(exc).__name__}: {exc}"
        raise _Fail(f"{text}: cannot import {module_name!r}: {reason}") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise _Fail(f"{text}: module {module_name!r} has no {attr!r}") from None


def _cmd_diagram(args: argparse.Namespace) -> int:
    from .fsm import render, write_diagram

    machine = _load_machine(args.machine)
    if args.output is None:
        sys.stdout.write(str(render(machine, "mermaid", current=args.current)))
        return 0
    write_diagram(machine, args.output, current=args.current)
    print(f"wrote {args.output}")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    if args.demo == "web":
        return _cmd_demo_web(args)
    from demos.calculator.run import ROLES, run

    _check_duration(args.duration)
    if args.window < 1:
        raise _Fail(f"--window {args.window}: expected an integer >= 1")
    if args.period <= 0:
        raise _Fail(f"--period {args.period}: expected milliseconds > 0")
    if args.maximum <= args.minimum:
        raise _Fail(f"--max {args.maximum} must be greater than --min {args.minimum}")
    if args.count is not None and args.count < 0:
        raise _Fail(f"--count {args.count}: expected an integer >= 0")
    summary = run(
        config=args.config,
        duration=args.duration,
        window=args.window,
        period_ms=args.period,
        minimum=args.minimum,
        maximum=args.maximum,
        subject=args.subject,
        machine=args.machine,
        engine=args.engine,
        roles=tuple(args.role) if args.role else ROLES,
        seed=args.seed,
        count=args.count,
        diagram=args.diagram,
        record_to=args.record,
    )
    print(
        f"done: {summary['sent']} points sent, {summary['published']} averages published, "
        f"{summary['received']} received; calculator ended in {summary.get('final_state')}"
    )
    return 0


def _cmd_demo_web(args: argparse.Namespace) -> int:
    from demos.web.run import run

    _check_duration(args.duration)
    if not 0 <= args.port <= 65535:
        raise _Fail(f"--port {args.port}: expected 0..65535 (0: any free port)")
    if args.window < 1:
        raise _Fail(f"--window {args.window}: expected an integer >= 1")
    if args.period <= 0:
        raise _Fail(f"--period {args.period}: expected milliseconds > 0")
    run(port=args.port, duration=args.duration, period_ms=args.period, window=args.window)
    return 0


def _check_duration(duration: float | None) -> None:
    if duration is not None and not duration >= 0:  # (NaN too)
        raise _Fail(
            f"--duration {duration}: expected seconds >= 0 (leave it out to run until stopped)"
        )


def _keyword(key: str) -> str:
    """An actor option's key spelled as a Python name: ``someKey`` -> ``some_key``,
    ``httpPort``/``HTTPPort`` -> ``http_port``, ``feed.subject`` -> ``feed_subject``;
    ``period_ms`` stays as it is."""
    return _CAMEL_BOUNDARY.sub("_", key).replace(".", "_").lower()


#: where a camelCase key gets an underscore: before an upper-case letter that
#: follows a lower-case letter or digit, or that starts a word after an acronym
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def _actor_keywords(properties: Path, name: str, options: Mapping[str, str]) -> dict[str, str]:
    """The keyword arguments ``actor.NAME.KEY = value`` lines give the actor's class.

    The rule (docs/configuration.md, "Actors"): each other key of the actor is
    one keyword argument, its value the str, its name the key in Python
    spelling (:func:`_keyword`), the way every actorbus key maps to a field."""
    keywords: dict[str, str] = {}
    keys: dict[str, str] = {}
    for key, value in options.items():
        word = _keyword(key)
        if not word.isidentifier():
            raise _Fail(
                f"{properties}: actorbus.actor.{name}.{key}: {word!r} is not a Python name, so "
                f"it cannot be a keyword argument of the actor's class; rename the key"
            )
        if word in keys:
            raise _Fail(
                f"{properties}: actor {name!r}: keys {keys[word]!r} and {key!r} both give the "
                f"keyword argument {word}; keep one"
            )
        keys[word] = key
        keywords[word] = value
    return keywords


def _cmd_run(args: argparse.Namespace) -> int:
    from .config import load_config
    from .node import Bus

    _check_duration(args.duration)
    if not args.properties.is_file():
        raise _Fail(f"{args.properties}: no such properties file")
    config = load_config(args.properties)
    if not config.actors:
        raise _Fail(
            f"{args.properties}: names no actors; add 'actorbus.actors = NAME' and "
            f"'actorbus.actor.NAME.class = package.module.Class'"
        )
    # the stop signals are taken from before the bus opens: one that comes while
    # the actors start is kept, and the node stops in order right after
    with StopSignals() as stopping, Bus(config) as bus:
        actors = []
        for spec in config.actors:
            module_name, _, attr = spec.class_path.rpartition(".")
            factory = getattr(importlib.import_module(module_name), attr)
            keywords = _actor_keywords(args.properties, spec.name, spec.options)
            if spec.machine is not None:  # resolved against the properties file's directory
                keywords["machine"] = spec.machine
            try:
                actor = factory(spec.name, **keywords)
            except (TypeError, ValueError) as exc:
                raise _Fail(
                    f"{args.properties}: actor {spec.name!r} ({spec.class_path}) rejected its "
                    f"keyword arguments {keywords}: {exc}"
                ) from None
            bus.register(actor, dispatcher=spec.dispatcher)
            if spec.record_to is not None:  # resolved against the properties file's directory
                bus.record(actor, spec.record_to, kwargs=keywords)
            actors.append(actor)
        net = bus.net
        if net is not None:
            # A configured connection without reconnect whose dial fails, or
            # whose peer refuses it (its secret, TLS on one end only), stops the
            # node (it would otherwise run on, silently missing its peer).
            net.on_link_failed(lambda name, reason: stopping.stop.set())
            if net.failed_links:
                stopping.stop.set()
        bus.startup(actors).wait(30)
        signum = stopping.wait(args.duration)
        if signum is not None:
            logger.info("actorbus run: {} received, shutting down", signum.name)
        bus.shutdown_all().wait(30)
        failed = net.failed_links if net is not None else ()
    if failed:
        for name, reason in failed:
            print(
                f"actorbus run: connection {name!r} failed and does not reconnect: {reason}; "
                f"fix that (and start the peer first), or set "
                f"actorbus.connection.{name}.reconnect = true to keep trying",
                file=sys.stderr,
            )
        return 1
    return 0


def _split_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (or ``[IPv6]:PORT``) -> (host, port), or _Fail saying why not."""
    expected = "expected HOST:PORT of a node's service, e.g. 127.0.0.1:7701 or [::1]:7701"
    if text.startswith("["):
        host, sep, port = text[1:].partition("]:")
    else:
        host, sep, port = text.rpartition(":")
        if ":" in host:
            sep = ""  # a bare IPv6 address: the port is ambiguous
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise _Fail(f"{text!r} is not an address: {expected}")
    return host, int(port)


_TOPIC_COLUMNS = ("NODE", "ROLE", "TYPE", "SUBJECT", "SCOPE", "QUEUE", "COUNT", "UP")


def _topics_table(topics: Sequence[Topic]) -> list[str]:
    """One header line and one line per topic, each column as wide as its widest cell."""
    rows = [_TOPIC_COLUMNS] + [
        (
            t.node,
            t.role,
            t.message_type,
            t.subject if t.wildcard is None else f"{t.subject} ({t.wildcard})",
            t.scope,
            t.queue if t.queue is not None else "-",
            str(t.count),
            str(t.up),
        )
        for t in topics
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_TOPIC_COLUMNS))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def _cmd_topics(args: argparse.Namespace) -> int:
    host, port = _split_address(args.address)
    timeout = args.timeout
    if not timeout > 0:  # (NaN too)
        raise _Fail(f"--timeout {timeout}: expected seconds > 0")
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    # A failed dial is reported by the link too (at WARNING, to loguru when it
    # takes that level, else to the standard logger): the one line below says it.
    fallback = logging.getLogger("actorbus")
    was_disabled, fallback.disabled = fallback.disabled, True
    try:
        topics = _topics_of(host, port, address, timeout, args.auth)
    finally:
        fallback.disabled = was_disabled
    for line in _topics_table(topics):
        print(line)
    return 0


def _topics_of(
    host: str, port: int, address: str, timeout: float, auth: Literal["auto", "none"]
) -> list[Topic]:
    from .config import ConnectionSettings
    from .errors import LinkClosedError
    from .node import Bus

    with Bus() as bus:  # a generated node id: host-pid-random
        settings = ConnectionSettings(connect_timeout=timeout, auth=auth)
        link = bus.connect(host, port, settings=settings)
        try:
            link.wait_logged_on(timeout)
        except LinkClosedError:
            # the link's reason names the address and the fix (refused, unreachable, ...)
            reason = link.last_reason or "the link closed before logging on"
            raise _Fail(
                f"topics: no node at {address}: {reason}"
                if address not in reason
                else f"topics: {reason}"
            ) from None
        except TimeoutError:
            raise _Fail(
                f"topics: no node at {address} logged on within {timeout:g} s; start the node "
                f"there, check HOST:PORT (its service's port), or raise --timeout"
            ) from None
        return bus.topics(timeout)


def _cmd_replay(args: argparse.Namespace) -> int:
    from .replay import replay

    if not args.file.is_file():
        raise _Fail(f"{args.file}: no such recording")
    result = replay(args.file, timeout=args.timeout)
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        for line in result.lines():
            print(line)
    return 0 if result.matched else 1


def _import_from_working_directory() -> None:
    """Put the working directory first on ``sys.path`` unless it is there already.

    ``python -m actorbus`` does this itself; the console script's ``sys.path``
    starts with the script's own directory instead, so without this the user's
    modules in the working directory would not import under ``actorbus run``."""
    cwd = os.getcwd()
    if not any(os.path.abspath(entry or os.curdir) == cwd for entry in sys.path):
        sys.path.insert(0, cwd)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``actorbus`` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    _import_from_working_directory()
    if argv[:2] == ["demo", "spark"]:
        enable_logging("WARNING")
        from demos.spark_pipeline.run import main as spark_main

        return spark_main(argv[2:], prog="actorbus demo spark")
    parser = _parser()
    args = parser.parse_args(argv)
    quiet = args.command in ("topics", "inspect")
    enable_logging(args.log_level or ("ERROR" if quiet else "WARNING"))
    try:
        if args.command == "diagram":
            return _cmd_diagram(args)
        if args.command == "demo":
            return _cmd_demo(args)
        if args.command == "topics":
            return _cmd_topics(args)
        if args.command == "inspect":
            return _cli_inspect.run(args, _split_address(args.address), _Fail)
        if args.command == "replay":
            return _cmd_replay(args)
        return _cmd_run(args)
    except _cli_inspect.InspectFailed as exc:
        print(f"actorbus: {exc}", file=sys.stderr)
        return 1
    except _Fail as exc:
        print(f"actorbus: {exc}", file=sys.stderr)
        return 2
    except (Error, OSError, ValueError) as exc:
        print(f"actorbus: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
