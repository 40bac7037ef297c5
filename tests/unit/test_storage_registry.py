"""storage/registry.py: each backend's name declared once, and read by config validation,
`mqttq serve --help` and the composition root alike."""

from __future__ import annotations

import inspect

import pytest

from mqttq.cli.serve import CONFIG_HELP, open_storage
from mqttq.config import parse_settings
from mqttq.errors import ConfigError
from mqttq.storage import registry
from mqttq.storage.memory import MemoryStorage
from mqttq.storage.sqlite.store import SqliteStorage

CASES = [(key, name) for key, names in registry.BACKENDS.items() for name in names]


@pytest.mark.parametrize(("key", "name"), CASES)
def test_every_named_adapter_imports_as_a_class(key: str, name: str) -> None:
    if registry.BACKENDS[key][name] is None:
        with pytest.raises(ValueError, match="has no adapter of its own"):
            registry.load(key, name)
        return
    adapter = registry.load(key, name)
    assert inspect.isclass(adapter)
    assert adapter.__name__ == registry.BACKENDS[key][name].rpartition(":")[2]


@pytest.mark.parametrize("key", list(registry.BACKENDS))
def test_config_refuses_a_name_the_registry_does_not_list_and_lists_those_it_does(
    key: str,
) -> None:
    section, _, field = key.partition(".")
    with pytest.raises(ConfigError) as caught:
        parse_settings(f'[{section}]\n{field} = "nosuch"\n', {}, {}, source="broker.toml")
    assert caught.value.key == key
    for name in registry.names(key):
        assert name in caught.value.problem


@pytest.mark.parametrize("name", registry.names("storage.backend"))
def test_config_takes_every_backend_name(name: str) -> None:
    settings = parse_settings(f'[storage]\nbackend = "{name}"\n', {}, {}, source="broker.toml")
    assert settings.storage.backend == name


def test_serve_help_lists_every_name() -> None:
    for key in registry.BACKENDS:
        assert f"{key} = {' | '.join(registry.names(key))}" in CONFIG_HELP


@pytest.mark.parametrize(
    ("name", "adapter"), [("memory", MemoryStorage), ("sqlite", SqliteStorage)]
)
def test_the_composition_root_opens_the_named_backend(
    name: str, adapter: type, tmp_path: object
) -> None:
    settings = parse_settings(
        f'[storage]\nbackend = "{name}"\ndata_dir = "{tmp_path}"\n', {}, {}, source="broker.toml"
    )
    assert type(open_storage(settings)) is adapter
