"""``python -m nbhelpers`` runs the ``kserve-runbook`` CLI."""

from nbhelpers.cli import main

main()
