"""The moving-average calculator demo: source → calculator (FSM) → sink."""

from __future__ import annotations

from pathlib import Path

#: the calculator's machine in SMC syntax
CALCULATOR_SM = Path(__file__).with_name("calculator.sm")
#: the one-process configuration: three actors pinned to three dispatcher kinds
CALCULATOR_PROPERTIES = Path(__file__).with_name("calculator.properties")
