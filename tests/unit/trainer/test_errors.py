from __future__ import annotations

import pytest
import torch
from statictrain_trainer.errors import classify
from statictrain_trainer.exitcodes import ExitCode, InfraError, UserError


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        pytest.param(UserError("bad entrypoint"), ExitCode.USER_ERROR, id="user"),
        pytest.param(torch.cuda.OutOfMemoryError("CUDA out of memory"), ExitCode.USER_ERROR, id="oom"),
        pytest.param(InfraError("node gone"), ExitCode.INFRA_ERROR, id="infra"),
        pytest.param(OSError("disk full"), ExitCode.INFRA_ERROR, id="io"),
        pytest.param(RuntimeError("CUDA error: an illegal memory access"), ExitCode.INFRA_ERROR, id="cuda"),
        pytest.param(RuntimeError("NCCL communicator was aborted"), ExitCode.INFRA_ERROR, id="nccl"),
        pytest.param(ValueError("shape mismatch"), ExitCode.UNKNOWN_ERROR, id="other"),
    ],
)
def test_classify(exc: BaseException, code: ExitCode) -> None:
    got, reason = classify(exc)
    assert got == code
    assert reason


def test_codes_are_distinct() -> None:
    assert len({int(c) for c in ExitCode}) == len(ExitCode)
