"""The user contract: ``module:function`` returns a Workload.

    from statictrain_trainer.workload import Workload

    def build() -> Workload:
        model = MyModel()
        return Workload(
            model=model,
            batch=lambda start, count: make_batch(start, count),  # (inputs, targets) on CPU
            loss=torch.nn.functional.cross_entropy,               # (model output, targets) -> scalar
            batch_size=16,
        )

``batch(start, count)`` returns samples ``start .. start+count-1`` of an endless
sample stream (wrap around a finite dataset). The runtime gives each rank and
micro-step its own slice, so data order is deterministic, is the same for any
number of ranks, and resumes exactly after a checkpoint. The function is called
once per process, after the runtime has seeded torch; keep it cheap.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from .exitcodes import UserError

BatchFn = Callable[[int, int], tuple[torch.Tensor, torch.Tensor]]
LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
HiddenAndHeadFn = Callable[[nn.Module, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


@dataclass
class Workload:
    """What the user's entrypoint returns."""

    model: nn.Module
    """The model; the runtime moves it to the device, compiles and wraps it."""
    batch: BatchFn
    """``batch(start, count) -> (inputs, targets)`` for samples start..start+count-1."""
    loss: LossFn
    """``loss(model(inputs), targets) -> scalar``; compiled together with the model."""
    batch_size: int = 8
    """Per-rank micro-batch size (overridden by STATICTRAIN_BATCH_SIZE or the autotuner)."""
    tokens_per_sample: int = 0
    """Tokens in one sample (sequence length) for token models; 0 otherwise."""
    flops_per_sample: float = 0.0
    """Training FLOPs (forward + backward) of one sample, for MFU; 0 when unknown."""
    learning_rate: float = 3e-4
    """AdamW learning rate."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    max_batch_size: int = 0
    """Largest per-rank batch the autotuner may try; 0: 8 x batch_size."""
    max_steps: int = 0
    """Optimizer steps to train when spec.training.maxSteps is unset; 0: until stopped (tokens, signal)."""
    name: str = field(default="")
    """Name for logs and the compile-cache key; the entrypoint when empty."""
    hidden_and_head: HiddenAndHeadFn | None = None
    """Optional, for the chunked-loss lever: ``(model, inputs) -> (hidden, head_weight)`` such that
    ``loss(model(inputs), targets)`` is the mean cross-entropy of ``hidden @ head_weight.T``
    against ``targets`` (a language model's last Linear, without bias, and its loss)."""


def load_entrypoint(spec: str) -> Workload:
    """Import ``module:function``, call it, check the result; UserError on any mistake."""
    module_name, _, func_name = spec.partition(":")
    if not module_name or not func_name:
        raise UserError(f"entrypoint {spec!r} must be 'module:function'")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        raise UserError(f"entrypoint {spec!r}: cannot import module {module_name!r} ({e})") from None
    except Exception as e:
        raise UserError(f"entrypoint {spec!r}: importing {module_name!r} raised {type(e).__name__}: {e}") from e
    func = getattr(module, func_name, None)
    if func is None or not callable(func):
        raise UserError(f"entrypoint {spec!r}: module {module_name!r} has no function {func_name!r}")
    try:
        inspect.signature(func).bind()
    except TypeError:
        raise UserError(f"entrypoint {spec!r}: {func_name}() must be callable with no arguments") from None
    except ValueError:
        pass
    try:
        result = func()
    except UserError:
        raise
    except Exception as e:
        raise UserError(f"entrypoint {spec!r}: {func_name}() raised {type(e).__name__}: {e}") from e
    if not isinstance(result, Workload):
        raise UserError(
            f"entrypoint {spec!r}: {func_name}() returned {type(result).__name__}, "
            "expected statictrain_trainer.workload.Workload"
        )
    if not isinstance(result.model, nn.Module):
        raise UserError(f"entrypoint {spec!r}: Workload.model is {type(result.model).__name__}, not nn.Module")
    if result.batch_size < 1:
        raise UserError(f"entrypoint {spec!r}: Workload.batch_size must be >= 1, got {result.batch_size}")
    if not result.name:
        result.name = spec
    return result
