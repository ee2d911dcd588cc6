"""Logging: loguru, disabled for the library at import; applications enable it.

Call :func:`enable_logging` (the CLI and the demos do) or
``loguru.logger.enable("actorbus")`` to see the library's records.
"""

from __future__ import annotations

import sys

from loguru import logger

__all__ = ["enable_logging", "logger"]

logger.disable("actorbus")


def enable_logging(level: str = "INFO") -> None:
    """Turn on actorbus logging to stderr at ``level``."""
    logger.enable("actorbus")
    logger.remove()
    logger.add(sys.stderr, level=level, format="{time:HH:mm:ss.SSS} {level:<7} {name}: {message}")
