"""Map an exception to the exit code the operator acts on (pure)."""

from __future__ import annotations

import torch

from .exitcodes import ExitCode, InfraError, UserError

_INFRA_MARKERS = ("CUDA error", "NCCL", "cuDNN error", "CUBLAS_STATUS", "ECC error", "device-side assert")


def classify(exc: BaseException) -> tuple[ExitCode, str]:
    """Exit code and a one-line reason for an exception that ended the run."""
    if isinstance(exc, UserError):
        return ExitCode.USER_ERROR, str(exc)
    if isinstance(exc, torch.cuda.OutOfMemoryError):
        return ExitCode.USER_ERROR, (
            f"out of GPU memory ({exc}); lower STATICTRAIN_BATCH_SIZE, raise STATICTRAIN_GRAD_ACCUM_STEPS "
            "or set STATICTRAIN_AUTOTUNE=on to find a batch that fits"
        )
    if isinstance(exc, InfraError | OSError | ConnectionError):
        return ExitCode.INFRA_ERROR, f"{type(exc).__name__}: {exc}"
    dist_error = getattr(torch.distributed, "DistError", None)
    if dist_error is not None and isinstance(exc, dist_error):
        return ExitCode.INFRA_ERROR, f"{type(exc).__name__}: {exc}"
    text = str(exc)
    if isinstance(exc, RuntimeError) and any(marker in text for marker in _INFRA_MARKERS):
        return ExitCode.INFRA_ERROR, f"{type(exc).__name__}: {text}"
    return ExitCode.UNKNOWN_ERROR, f"{type(exc).__name__}: {text}"
