"""Fuzz the environment: any `CORRAL_*` values give settings a service can run with, or one SettingsError line
naming the variable and its value; a service or `corral` started with a bad value says so and exits 2."""

from __future__ import annotations

import contextlib
import io
import math
import os
import zlib
from dataclasses import fields
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.cli.__main__ import main
from services.local import preloaded
from services.runtime.settings import COUNTS, DAY_S, LOG_LEVELS, SECONDS, Settings, SettingsError
from tests.support.examples import examples

NAMES = [f"CORRAL_{field.name.upper()}" for field in fields(Settings)]
NUMBERS = ["nan", "NaN", "inf", "-inf", "1e999", "-0", "-0.0", "0", "0.0", "-1", "1e-320", "2", "3.5", "86401"]
HUGE = [str(2**64), str(2**63), "9" * 30, "1" + "0" * 5000]

values = st.one_of(
    st.sampled_from(NUMBERS + HUGE + ["", " ", "1_000", "١٢", "²", "0x10", "true", "nats://", "redis://h:99999"]),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats().map(str),
    st.text(max_size=20),
)
environments = st.dictionaries(st.sampled_from(NAMES), values, max_size=4)


def _shown(raw: str) -> str:
    """How a check of two parsed values prints `raw` (a float), else `raw` itself."""
    try:
        return str(float(raw))
    except (ValueError, OverflowError):
        return raw


@settings(max_examples=examples(400), deadline=None)
@given(environments)
def test_any_environment_gives_sane_settings_or_one_clear_settings_error(env: dict[str, str]) -> None:
    """SettingsError (one line naming a variable set and its value) or settings no service stalls or crashes on."""
    try:
        found = Settings.from_env(env)
    except SettingsError as error:
        message = str(error)
        assert "\n" not in message
        assert any(name in message and (repr(raw) in message or _shown(raw) in message) for name, raw in env.items())
        return
    for name in SECONDS:
        seconds = getattr(found, name)
        assert math.isfinite(seconds) and 0 < seconds <= DAY_S, (name, seconds)
    for name, (low, high) in COUNTS.items():
        assert low <= getattr(found, name) <= high, name
    assert found.heartbeat_timeout > found.heartbeat_interval
    assert found.log_level.upper() in LOG_LEVELS
    zlib.crc32(b"labels") % found.snapshot_every  # the follower's snapshot offset
    found.seed.to_bytes(8, "little")  # how the core keys its hashes


BAD = {
    "CORRAL_SNAPSHOT_EVERY": st.sampled_from(["0", "-1", "nan", "x"]),
    "CORRAL_LEASE_TTL": st.sampled_from(["0", "nan", "inf", "1e999", "-0"]),
    "CORRAL_REQUEST_BATCH": st.sampled_from(["0", "1e3", str(10**9)]),
    "CORRAL_MAX_MESSAGE_BYTES": st.sampled_from(["0", "12", "1e6"]),
    "CORRAL_SEED": st.sampled_from([str(2**64), "-5"]),
    "CORRAL_LOG_LEVEL": st.text(alphabet="abcxyz_", min_size=1, max_size=8),
    "CORRAL_REDIS_URL": st.sampled_from(["localhost:6379", "http://x", "redis://h:99999"]),
    "CORRAL_NATS_URL": st.sampled_from(["127.0.0.1:4222", "nats://", "nats://h:port"]),
    "CORRAL_CORE": st.sampled_from(["Compiled", "c", "python", "compiled "]),
}
"""Each family of bad values: every family is tried (a value drawn from it), not a few families drawn among them."""


@pytest.mark.parametrize("name", sorted(BAD))
@settings(max_examples=1, deadline=None)
@given(data=st.data())
def test_a_service_and_corral_started_with_a_bad_variable_say_so_in_one_line_and_exit_2(
    name: str, data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The labels service (forked as the meshes start it, `python -m services.labels` in its process) and `corral
    status` (in this process): exit 2, one line on stderr naming the variable, no traceback."""
    raw = data.draw(BAD[name], label=name)
    env = {**os.environ, name: raw}
    log = tmp_path_factory.mktemp("bad-variable") / "labels.log"
    service = preloaded.start("labels", env, log).wait(timeout=60), log.read_text()
    with mock.patch.dict(os.environ, env, clear=True), contextlib.redirect_stderr(io.StringIO()) as stderr:
        command = main(["status"]), stderr.getvalue()
    for what, (code, said) in (("labels", service), ("corral status", command)):
        lines = said.strip().splitlines()
        assert code == 2, (what, code, said[-2000:])
        assert len(lines) == 1 and name in lines[0] and "Traceback" not in said, (what, said[-2000:])
