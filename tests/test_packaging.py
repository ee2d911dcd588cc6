"""pyproject.toml declares its metadata the way current build backends read it
without deprecation warnings: the license as an SPDX expression (PEP 639), with a
setuptools new enough to read one."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.licenses import canonicalize_license_expression
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


def _pyproject() -> dict[str, object]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)


def test_license_is_an_spdx_expression_not_a_table() -> None:
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    license_ = project["license"]
    # a table ({text = ...} or {file = ...}) is deprecated by setuptools and
    # stops working after 2027-02-18
    assert isinstance(license_, str), f"project.license is {license_!r}, not an SPDX string"
    assert canonicalize_license_expression(license_) == license_
    assert not any(c.startswith("License ::") for c in project.get("classifiers", []))


def test_build_backend_reads_spdx_license_expressions() -> None:
    build = _pyproject()["build-system"]
    assert isinstance(build, dict)
    assert build["build-backend"] == "setuptools.build_meta"
    (setuptools,) = [Requirement(r) for r in build["requires"] if r.startswith("setuptools")]
    # setuptools reads `license = "SPDX"` and `license-files` from 77.0 on
    assert setuptools.specifier.contains(Version("77.0"))
    assert not setuptools.specifier.contains(Version("76.9"))
