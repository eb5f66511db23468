"""Exit codes: of the trainer process (the contract between the trainer and the operator), and of the
``statictrain`` / ``kubectl stj`` command line.

USER_ERROR means the job cannot succeed by retrying (bad entrypoint, bad
settings): the operator fails the job. INFRA_ERROR means the failure came from
the machine (CUDA, NCCL, I/O): retry without counting it against the job's
backoff limit. PREEMPTED means a SIGTERM (spot notice, drain) was honoured and a
checkpoint was written first: retry, not counted either. Any other non-zero
code is an uncaught error whose cause is unknown (Python's own 1) and counts.
The operator turns these into the worker Job's podFailurePolicy.

:class:`CliExit` is the one table of the command line's statuses (README, "Exit
status"): a CI job can tell a judged failure (1) from a wrong command line (2)
and from a verdict that could not be reached (3).
"""

from __future__ import annotations

import enum

__all__ = ["CliExit", "ExitCode"]


class ExitCode(enum.IntEnum):
    """What the trainer process returns."""

    OK = 0
    UNKNOWN_ERROR = 1
    USER_ERROR = 42
    INFRA_ERROR = 75
    PREEMPTED = 143


class CliExit(enum.IntEnum):
    """What every ``statictrain`` subcommand returns."""

    OK = 0
    FAILED = 1
    """Judged and failed: a gate regression or a commit without runs, a spec the API server rejected,
    a problem the pre-flight check found."""
    USAGE = 2
    """Bad arguments or input: an option, an input file (unreadable, not a regular file, too large,
    not what it should hold), an output path that cannot be written. Fix the command line."""
    CANNOT_JUDGE = 3
    """No verdict: Prometheus, the API server or kubectl unreachable, timed out, or answering with
    something that is not their API's answer; or figures that are missing or not finite."""
    INTERNAL = 70
    """A bug in statictrain (sysexits' EX_SOFTWARE): an unexpected exception, reported on one line."""
    INTERRUPTED = 130
    """Ctrl-C (128 + SIGINT)."""
    PIPE_CLOSED = 141
    """Standard output was closed early, e.g. piped to ``head`` (128 + SIGPIPE)."""
