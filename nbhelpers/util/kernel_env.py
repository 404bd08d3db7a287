"""Environment variables through which the CLI talks to the notebook kernel it starts with papermill.

They live in the bottom layer so that both sides (``cli.headless`` and ``notebook``) name them without
the CLI importing the notebook layer, and so that the secrets they carry never become notebook parameters.
"""

PROGRESS_FILE_ENV = "KSERVE_RUNBOOK_PROGRESS_FILE"  # the kernel appends one event<TAB>message line per step
ERROR_FILE_ENV = "KSERVE_RUNBOOK_ERROR_FILE"  # the one-line message of an error that stopped the run
HEADERS_ENV = "KSERVE_RUNBOOK_PROMETHEUS_HEADERS"  # extra Prometheus headers, a JSON object
# A Prometheus URL with credentials in it (user:pass@, ?token=): the parameters carry it redacted, this the real one.
PROMETHEUS_URL_ENV = "KSERVE_RUNBOOK_PROMETHEUS_URL"
