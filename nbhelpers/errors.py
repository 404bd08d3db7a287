"""The project's exceptions.

``RunbookError`` is the root of every error that reaches a user: its message is
one line that says what is wrong and what to do, and the CLI turns it into exit
code 2. ``StepSkipped`` and ``EvidenceMissing`` are raised by checks and turned
into step statuses by ``run_step`` (docs/contracts.md#findingsjson-v1); they never reach the user as
errors.
"""

from __future__ import annotations


class RunbookError(Exception):
    """A problem with the user's input or environment that stops the run (exit 2)."""


class BundleError(RunbookError):
    """An evidence bundle that cannot be read."""


class ReadFailed(Exception):
    """A read from a source failed; the run goes on and records it.

    ``status`` is one of: ``forbidden`` (401/403), ``not_installed`` (the API
    group is not served: its CRD is not installed), ``missing`` (404: the
    object, log or recorded answer does not exist), ``error`` (5xx, malformed
    answer), ``timeout``, ``unreachable``.
    """

    def __init__(self, what: str, status: str, reason: str) -> None:
        super().__init__(f"{what}: {status}: {reason}")
        self.what = what
        self.status = status
        self.reason = reason


class StepSkipped(Exception):
    """A check does not apply to this service, or its source is not configured."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class EvidenceMissing(Exception):
    """A read that a check needs failed; the step is recorded as ``error``."""

    def __init__(self, what: str, reason: str) -> None:
        super().__init__(f"{what}: {reason}")
        self.what = what
        self.reason = reason
