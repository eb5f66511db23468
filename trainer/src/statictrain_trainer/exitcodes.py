"""Process exit codes the operator can tell apart (ExitCode lives in statictrain.exitcodes, shared with it).

USER_ERROR means the job cannot succeed by retrying (bad entrypoint, bad
settings): the operator should fail the job. INFRA_ERROR means the failure came
from the machine (CUDA, NCCL, I/O): retry. PREEMPTED means a SIGTERM (spot
notice, drain) was honoured and a checkpoint was written first: retry, and do
not count it against the job's backoff limit. Any other non-zero code is an
uncaught error whose cause is unknown (Python's own 1).
"""

from __future__ import annotations

from statictrain.exitcodes import ExitCode

__all__ = ["ExitCode", "InfraError", "UserError"]


class UserError(Exception):
    """A mistake in what the user gave us; the message says what to fix."""


class InfraError(Exception):
    """A failure of the machine or the cluster; retrying may succeed."""
