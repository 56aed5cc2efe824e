"""Shared pytest options."""
from __future__ import annotations


def pytest_addoption(parser) -> None:
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/golden/* from the current export instead of comparing")
