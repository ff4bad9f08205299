"""Typer's parameters built from the options' declarations (kprobe.option_table).

Typer reads a command's options from its signature and type hints: `Annotated[T, typer.Option(...)]`
and a default. Built here from the one declaration of each option, so `probe`, `watch` and `list`
list no option by hand, and the options other commands share (-n, --timeout, --vantage, ...) read
the same everywhere.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, get_type_hints

import typer

from kprobe.option_table import DURATION, FLAG, FLOAT, INT, LIST, PATH, SWITCH, TEXT, Option

_TYPES: dict[str, Any] = {LIST: list[str], TEXT: str, DURATION: str, FLAG: bool, INT: int, FLOAT: float, PATH: Path,
                          SWITCH: bool}


def typed(option: Option) -> Any:
    """`Annotated[T, typer.Option(...)]` for one option: the type its value has, and how typer reads it."""
    kind = _TYPES[option.kind]
    if option.default is None and option.kind != LIST and not option.required:
        kind = kind | None
    settings: dict[str, Any] = {"help": option.help}
    if option.envvar is not None:
        settings["envvar"] = option.envvar
    if option.metavar is not None:
        settings["metavar"] = option.metavar
    flags = (f"{option.flags[0]}/{option.flags[1]}",) if option.kind == SWITCH else option.flags
    return Annotated[kind, typer.Option(*flags, **settings)]


def parameter(option: Option) -> inspect.Parameter:
    """The keyword-only parameter typer reads an option from; a required one has no default."""
    default = inspect.Parameter.empty if option.required else option.value
    return inspect.Parameter(option.param, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=typed(option))


def command(options: tuple[Option, ...], run: Callable[..., int]) -> Callable[..., None]:
    """A typer command taking `options` (typer reads `__signature__` and `__annotations__`) and calling `run`
    with them by parameter; its exit code is the command's, its help `run`'s docstring.
    """
    def call(**given: Any) -> None:
        raise typer.Exit(run(**given))

    parameters = [parameter(o) for o in options]
    call.__name__ = call.__qualname__ = run.__name__
    call.__doc__ = run.__doc__
    call.__signature__ = inspect.Signature(parameters, return_annotation=None)  # type: ignore[attr-defined]
    call.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": None}
    return call


def takes(*items: Option | str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A command's options in their order: declared ones (an Option, read as everywhere else) and the
    command's own (a parameter's name, as the function declares it). The function takes them by name.
    """
    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        own = inspect.signature(function).parameters
        hints = get_type_hints(function, include_extras=True)
        parameters = [
            own[item].replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=hints[item]) if isinstance(item, str)
            else parameter(item) for item in items]

        @functools.wraps(function)
        def call(**given: Any) -> Any:
            return function(**given)

        call.__signature__ = inspect.Signature(parameters, return_annotation=None)  # type: ignore[attr-defined]
        call.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": None}
        return call
    return decorate
