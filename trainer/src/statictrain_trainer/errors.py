"""Map an exception to the exit code the operator acts on (pure)."""

from __future__ import annotations

import torch

from .exitcodes import ExitCode, InfraError, UserError

_INFRA_MARKERS = ("CUDA error", "NCCL", "cuDNN error", "CUBLAS_STATUS", "ECC error", "device-side assert")


def one_line(exc: BaseException, limit: int = 200) -> str:
    """``Type: first line of the message``, at most ``limit`` characters, for a log line (pure)."""
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0] if lines else ''}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


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
