"""Subcommands imported on first use: `mqttq credentials ls` imports the credentials
commands, not the broker, Spark's reports and the lake as well.

Every `mqttq` start pays for what the command tree imports; with each subcommand's module
loaded eagerly that was twice what a single command needs. `LazyGroup` is typer's group
with its subcommands named up front (for usage errors, "did you mean" and `--help`) and
built from their module only when looked up. The commands are the same typer objects as
with `Typer.add_typer`: options, help and errors do not change.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any, ClassVar

import typer
import typer.main
from typer._click import Command, Context
from typer.core import TyperGroup


@dataclass(frozen=True)
class LazyCommand:
    """Where a subcommand lives: `attribute` of `module`, a `typer.Typer` (a group of
    commands) or a function (one command, its help text the module's `help_attribute`)."""

    module: str
    attribute: str
    help_attribute: str | None = None

    def build(self, name: str) -> Command:
        """Import the module and make the click command typer would have made."""
        module = importlib.import_module(self.module)
        target: Any = getattr(module, self.attribute)
        holder = typer.Typer(add_completion=False)
        if isinstance(target, typer.Typer):
            holder.add_typer(target, name=name)
        else:
            help_text = getattr(module, self.help_attribute) if self.help_attribute else None
            holder.command(name, help=help_text)(target)
        return typer.main.get_group(holder).commands[name]


class LazyCommands(MutableMapping[str, Command]):
    """A group's commands by name, in order; a lazy one is built (and `on_load` called on
    it) the first time it is looked up. Listing the names builds nothing."""

    def __init__(
        self,
        loaded: MutableMapping[str, Command],
        lazy: dict[str, LazyCommand],
        on_load: Callable[[Command], None],
    ) -> None:
        self._names = [*loaded, *(name for name in lazy if name not in loaded)]
        self._loaded = dict(loaded)
        self._lazy = {name: spec for name, spec in lazy.items() if name not in loaded}
        self._on_load = on_load

    def loaded(self) -> dict[str, Command]:
        """The commands built so far."""
        return dict(self._loaded)

    def __getitem__(self, name: str) -> Command:
        if name not in self._loaded:
            spec = self._lazy[name]  # KeyError for a name the group does not have
            command = spec.build(name)
            self._on_load(command)
            self._loaded[name] = command
            del self._lazy[name]
        return self._loaded[name]

    def __setitem__(self, name: str, command: Command) -> None:
        if name not in self._names:
            self._names.append(name)
        self._lazy.pop(name, None)
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        self._names.remove(name)
        self._lazy.pop(name, None)
        self._loaded.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._names))

    def __len__(self) -> int:
        return len(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._names


class LazyGroup(TyperGroup):
    """typer's group whose subcommands in `LAZY` (set by the subclass) are imported on
    first use; `on_load` is called on each as it is built."""

    LAZY: ClassVar[dict[str, LazyCommand]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = LazyCommands(self.commands, self.LAZY, self.on_load)

    def on_load(self, command: Command) -> None:
        """Called once on each lazily built subcommand."""

    def list_commands(self, ctx: Context) -> list[str]:
        return list(self.commands)
