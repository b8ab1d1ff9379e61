"""The ``tripeaks`` command: ``serve``, ``migrate``, ``deal``, ``solve``, ``stats``,
``loadtest`` and ``admin``, one module per family of commands."""

from __future__ import annotations

import click

from server.cli.admin import admin
from server.cli.deals import deal, solve, stats
from server.cli.loadtest import loadtest
from server.cli.review import suspicious
from server.cli.serve import migrate, serve


@click.group()
@click.version_option(package_name="tripeaks-server")
def main() -> None:
    """Competitive TriPeaks server: shared deals, daily challenge, leaderboards."""


admin.add_command(suspicious)
for command in (serve, migrate, deal, solve, stats, loadtest, admin):
    main.add_command(command)
