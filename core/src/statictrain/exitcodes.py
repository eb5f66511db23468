"""Exit codes of the trainer process, the contract between the trainer and the operator.

USER_ERROR means the job cannot succeed by retrying (bad entrypoint, bad
settings): the operator fails the job. INFRA_ERROR means the failure came from
the machine (CUDA, NCCL, I/O): retry without counting it against the job's
backoff limit. PREEMPTED means a SIGTERM (spot notice, drain) was honoured and a
checkpoint was written first: retry, not counted either. Any other non-zero
code is an uncaught error whose cause is unknown (Python's own 1) and counts.
The operator turns these into the worker Job's podFailurePolicy.
"""

from __future__ import annotations

import enum

__all__ = ["ExitCode"]


class ExitCode(enum.IntEnum):
    """What the trainer process returns."""

    OK = 0
    UNKNOWN_ERROR = 1
    USER_ERROR = 42
    INFRA_ERROR = 75
    PREEMPTED = 143
