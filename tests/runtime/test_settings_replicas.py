"""CORRAL_REPLICAS and several servers in CORRAL_NATS_URL: what a cluster's services are told."""

from __future__ import annotations

import pytest

from services.runtime.settings import Settings, SettingsError


def test_replicas_outside_one_to_five_say_the_rule() -> None:
    with pytest.raises(SettingsError, match="CORRAL_REPLICAS '6': must be a whole number from 1 to 5"):
        Settings.from_env({"CORRAL_REPLICAS": "6"})


@pytest.mark.parametrize("raw", ["0", "6", "three", "2.5", "-1"])
def test_replicas_outside_one_to_five_are_refused_naming_the_variable_the_value_and_the_rule(raw: str) -> None:
    with pytest.raises(SettingsError) as refused:
        Settings.from_env({"CORRAL_REPLICAS": raw})
    assert f"CORRAL_REPLICAS {raw!r}: must be" in str(refused.value)


def test_replicas_default_to_one_and_take_three() -> None:
    assert (Settings.from_env({}).replicas, Settings.from_env({"CORRAL_REPLICAS": "3"}).replicas) == (1, 3)


def test_a_nats_url_may_name_every_server_of_a_cluster() -> None:
    url = "nats://u:p@a:4222, nats://u:p@b:4222,nats://u:p@c:4222"
    assert Settings.from_env({"CORRAL_NATS_URL": url}).nats_servers == [
        "nats://u:p@a:4222",
        "nats://u:p@b:4222",
        "nats://u:p@c:4222",
    ]
