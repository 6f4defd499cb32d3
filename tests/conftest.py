"""The suite's tiers and its parallel run.

Every test that starts servers is marked `integration`, so `pytest -m "not integration"` (`make test-fast`) runs the
tests that need none: a test is marked when it lives in tests/integration/ or asks for a fixture that starts servers
(a test elsewhere that starts them itself carries the mark by hand). Under pytest-xdist (`make test`: `-n` workers,
`--dist loadgroup`) the tests of a module that share a module-wide fixture (one mesh for the module) run on one worker,
so that fixture starts once; every other test goes to whichever worker is free.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

from services import CORE_BUILD, compiled_core

INTEGRATION = Path(__file__).parent / "integration"
SERVER_FIXTURES = frozenset({"server_path", "servers", "mesh"})
"""Fixtures that start nats-server and redis-server (or need them: every mesh fixture asks for `server_path`)."""

settings.register_profile("suite", deadline=None)
settings.load_profile("suite")
"""Hypothesis' 200 ms deadline per example measures the machine, not the code: a busy machine (or several xdist
workers on few cores) fails it. A test whose speed is the behaviour asserts its own bound."""


def pytest_configure(config: pytest.Config) -> None:
    """With `CORRAL_CORE=compiled` (`make test-compiled`) the suite runs the compiled core, or stops saying why not."""
    if compiled_core.requested(os.environ) == "compiled" and CORE_BUILD != "compiled":
        raise pytest.UsageError(f"{compiled_core.SETTING}=compiled: {compiled_core.unusable() or 'not loaded'}")


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """Async tests (`pytest.mark.anyio`) run on asyncio: nats-py speaks asyncio only."""
    return "asyncio"


@pytest.hookimpl(tryfirst=True)  # before `-m` selects by markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests that start servers `integration`; group the tests sharing a module's fixture for xdist."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if INTEGRATION in item.path.parents or fixtures & SERVER_FIXTURES:
            item.add_marker(pytest.mark.integration)
        if isinstance(item, pytest.Function) and shares_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))


def shares_a_module_fixture(item: pytest.Function) -> bool:
    """Whether the test uses a fixture set up once per module (or package): its module's tests belong together."""
    definitions = item._fixtureinfo.name2fixturedefs.values()
    return any(d.scope in {"module", "package"} for defs in definitions for d in defs)
