"""pytest setup for the Python package's tests.

Run against a build tree with ``PYTHONPATH=<build>/python`` (tests/run.sh does) or against an
installed package. GPU and framework tests are skipped one by one, by name, when the GPU or the
framework is missing (see ``gpu.py``).
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture
def tmp_cache(tmp_path, monkeypatch):
    """A fresh, empty user cache directory for the test."""
    monkeypatch.setenv("SHAPEJIT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"
