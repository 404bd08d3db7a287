"""``python -m nbhelpers`` runs the ``kserve-runbook`` CLI."""

from nbhelpers.cli.main import main

main()
