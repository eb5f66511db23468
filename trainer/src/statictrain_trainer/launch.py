"""``statictrain-launch``: torchrun's agent in this process, exiting with the workers' own code.

torchrun exits 1 whenever a worker fails and also when it is stopped by SIGTERM,
so the codes of ``exitcodes.ExitCode`` that the operator's podFailurePolicy acts
on (42 user error: fail at once; 75 infrastructure and 143 preempted: retry,
not counted) never reach the container. This runs the same agent with the same
flags and ``PET_*`` environment (``torch.distributed.run``) and exits with:

- 0 when every worker finished;
- the exit code of the first failed worker (torchelastic's root cause), or
  128+N for a worker killed by signal N (137 for SIGKILL, counted as a failure);
- 128+N when the agent itself got signal N (SIGTERM from the kubelet on delete,
  drain or preemption): the agent has passed the signal to the workers and
  waited up to ``--shutdown-timeout`` (``PET_SHUTDOWN_TIMEOUT``) for them to
  checkpoint, so SIGTERM gives 143 (PREEMPTED).

Usage is torchrun's: ``statictrain-launch [torchrun flags] --module statictrain_trainer.main``.
"""

from __future__ import annotations

import logging
import sys

from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.run import get_args_parser, run

from .exitcodes import ExitCode

__all__ = ["container_exit_code", "main"]

log = logging.getLogger("statictrain_trainer.launch")


def container_exit_code(worker_exit_code: int) -> int:
    """A worker's exit code as a container reports it: a signal N (negative code -N) becomes 128+N."""
    if worker_exit_code < 0:
        return 128 - worker_exit_code
    return worker_exit_code if worker_exit_code <= 255 else int(ExitCode.UNKNOWN_ERROR)


def main(argv: list[str] | None = None) -> int:
    args = get_args_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        run(args)
    except ChildFailedError as e:
        rank, failure = e.get_first_failure()
        code = container_exit_code(failure.exitcode)
        log.error("worker rank %d failed with exit code %d: exiting %d", rank, failure.exitcode, code)
        return code
    except SignalException as e:
        code = 128 + int(e.sigval)
        log.warning("stopped by signal %s after the workers were told: exiting %d", e.sigval, code)
        return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
