"""Fixtures for the journal tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    """A journal directory path that does not exist yet (the writer creates it)."""
    return tmp_path / "journal"
