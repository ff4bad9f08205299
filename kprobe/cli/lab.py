"""`kprobe lab`: real Kafka brokers on loopback, in classic listener set-ups (kprobe.lab)."""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from kprobe.errors import UsageError

lab_app = typer.Typer(help="Real Kafka brokers on loopback, in classic listener set-ups.", no_args_is_help=True)


@lab_app.command("list")
def lab_list(
    netns: Annotated[bool, typer.Option("--netns", help="The namespace scenarios (`kprobe lab up --netns`).")] = False,
) -> None:
    """The scenarios, one line each."""
    from kprobe.lab.netns_scenarios import NETNS_SCENARIOS
    from kprobe.lab.scenarios import SCENARIOS

    summaries = ({name: s.summary for name, s in NETNS_SCENARIOS.items()} if netns
                 else {name: s.summary for name, s in SCENARIOS.items()})
    width = max(len(name) for name in summaries)
    for name, summary in summaries.items():
        typer.echo(f"{name:<{width}}  {summary}")


@lab_app.command("up")
def lab_up(
    scenario: Annotated[str, typer.Argument(help="Scenario name (see `kprobe lab list`).")],
    detach: Annotated[
        bool, typer.Option("--detach", "-d", help="Start in the background, beside other detached scenarios; stop "
                           "with `kprobe lab down [SCENARIO]`.")
    ] = False,
    backend: Annotated[
        str | None, typer.Option("--backend", envvar="KPROBE_LAB_BACKEND", help="native, docker or auto.")
    ] = None,
    netns: Annotated[
        bool, typer.Option("--netns", help="A namespace scenario: brokers, routers and vantages in network "
                           "namespaces (root; see `kprobe lab exec`).")
    ] = False,
) -> None:
    """Start a scenario's brokers and DNS views and print how to reach them."""
    if netns:
        from kprobe.lab import netns as netns_lab

        if detach:
            for line in netns_lab.start_detached(scenario):
                typer.echo(line)
            return
        netns_lab.run_foreground(scenario)
        return
    from kprobe.lab import choose_backend, get_scenario
    from kprobe.lab.supervisor import run_foreground, start_detached

    get_scenario(scenario)
    chosen = choose_backend(backend)
    if detach:
        for line in start_detached(scenario, chosen):
            typer.echo(line)
        return
    run_foreground(scenario, chosen)


@lab_app.command("down")
def lab_down(
    scenario: Annotated[str | None, typer.Argument(help="The scenario to stop; without it, every detached lab.",
                                                   show_default=False)] = None,
) -> None:
    """Stop labs started with `kprobe lab up --detach`: one scenario, or all of them (and any namespace lab)."""
    from kprobe.lab.netns_scenarios import NETNS_SCENARIOS
    from kprobe.lab.supervisor import stop_detached

    if scenario is None or scenario in NETNS_SCENARIOS:
        import shutil

        if os.geteuid() == 0 and shutil.which("ip"):  # namespaces exist only where root made them
            from kprobe.lab.netns import stop_all

            lines = stop_all(scenario)
            for line in lines:
                typer.echo(line)
            if scenario is not None and not lines:
                typer.echo(f"no namespace lab {scenario} is running")
        if scenario is not None:
            return
    if scenario is not None:
        from kprobe.lab import get_scenario

        get_scenario(scenario)  # a typo gets the list of scenarios, not "not running"
    for line in stop_detached(scenario):
        typer.echo(line)


@lab_app.command("exec", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def lab_exec(
    ctx: typer.Context,
    vantage: Annotated[str, typer.Argument(help="A vantage of the running namespace lab (laptop, vpc, ...).")],
    scenario: Annotated[str | None, typer.Option("--scenario", "-s", help="The namespace lab of this scenario, "
                                                 "where several run; else the newest with that vantage.")] = None,
) -> None:
    """Run a command inside a vantage of the namespace lab: `kprobe lab exec laptop -- kprobe probe -b ...`.

    The command runs in the vantage's network namespace with the vantage's own /etc/hosts; its exit
    code is the command's.
    """
    import shutil

    from kprobe.lab.netns import exec_argv, find_vantage

    command = ctx.args[1:] if ctx.args[:1] == ["--"] else list(ctx.args)
    if not command:
        raise UsageError("name a command to run: kprobe lab exec VANTAGE -- CMD [ARGS...]")
    namespace, workdir = find_vantage(vantage, scenario)
    if command[0] == "kprobe" and not shutil.which("kprobe"):
        from kprobe.private import python_argv

        command = python_argv("kprobe", *command[1:])  # the kprobe running this, off PATH (a venv)
    sys.stdout.flush()
    os.execvp("ip", exec_argv(namespace, workdir, vantage, command))
