"""Which checkpoint to resume from: the newest that passes the integrity check and fits the model.

A checkpoint that verifies but does not fit (other parameter names or shapes, another optimizer layout)
is logged and the one before it tried. When checkpoints verify but none fits, the model or optimizer
changed since they were written: that is a user error (exit 42), since starting afresh would overwrite
and prune another model's checkpoints. When none verifies, training starts at step 0.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from statictrain import envvars
from torch import nn

from . import checkpoint
from .errors import one_line
from .exitcodes import UserError

log = logging.getLogger(__name__)

SIZE_FACTOR = 8
"""A checkpoint of a model is at most this many times its state's bytes (weights and two AdamW moments
are about 3), plus SIZE_SLACK; a larger file cannot be one and is skipped unread."""
SIZE_SLACK = 64 << 20


def max_checkpoint_bytes(model: nn.Module) -> int:
    """The largest checkpoint ``model`` can have (see SIZE_FACTOR)."""
    state = sum(t.numel() * t.element_size() for t in model.state_dict().values() if isinstance(t, torch.Tensor))
    return SIZE_FACTOR * state + SIZE_SLACK


def _names(keys: set[str]) -> str:
    return ", ".join(ascii(k) for k in sorted(keys)[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")


def misfit(state: dict[str, Any], model: nn.Module, optimizer: torch.optim.Optimizer) -> str | None:
    """Why ``state`` cannot be loaded into ``model`` and ``optimizer`` (checked before anything is
    loaded; nothing is changed), or None."""
    saved = state.get("model")
    if not isinstance(saved, dict) or not all(isinstance(k, str) for k in saved):
        return "it holds no model state"
    expected = model.state_dict()
    missing, unexpected = expected.keys() - saved.keys(), saved.keys() - expected.keys()
    if missing or unexpected:
        return f"model keys differ (missing {_names(missing) or 'none'}; unexpected {_names(unexpected) or 'none'})"
    for name, tensor in expected.items():
        value = saved[name]
        if not isinstance(value, torch.Tensor) or value.shape != tensor.shape:
            got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
            return f"{name!a} is {got} in the checkpoint, {tuple(tensor.shape)} in the model"
    opt = state.get("optimizer")
    if not isinstance(opt, dict) or not isinstance(opt.get("param_groups"), list):
        return "it holds no optimizer state"
    groups = opt["param_groups"]
    if not all(isinstance(g, dict) and isinstance(g.get("params"), list) for g in groups):
        return "its optimizer state has no parameter groups"
    sizes = [len(g["params"]) for g in groups]
    own = [len(g["params"]) for g in optimizer.param_groups]
    if sizes != own:
        return f"optimizer parameter groups of {sizes} parameters in the checkpoint, {own} in the optimizer"
    per_param = opt.get("state")
    if not isinstance(per_param, dict):
        return "its optimizer state has no per-parameter state"
    params = [p for g in optimizer.param_groups for p in g["params"]]
    ids = [i for g in groups for i in g["params"]]
    if not all(isinstance(i, int) for i in ids):
        return "its optimizer state names parameters by something other than numbers"
    for i, param in zip(ids, params, strict=True):
        entry = per_param.get(i, {})
        if not isinstance(entry, dict):
            return f"optimizer state of parameter {i!a} is not a mapping"
        for key, value in entry.items():
            if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape != param.shape:
                return f"optimizer {key!a} of parameter {i!a} is {tuple(value.shape)}, not {tuple(param.shape)}"
    return None


def _apply(
    found: checkpoint.Checkpoint,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler | None,
) -> str | None:
    why = misfit(found.state, model, optimizer)
    if why is not None:
        return why
    try:
        model.load_state_dict(found.state["model"])
        optimizer.load_state_dict(found.state["optimizer"])
        if scaler is not None and "scaler" in found.state:
            scaler.load_state_dict(found.state["scaler"])
    except Exception as e:  # what the checks above do not foresee: torch's own message says what
        return one_line(e)
    return None


def resume(
    directory: Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler | None,
    map_location: str | torch.device,
) -> checkpoint.Checkpoint | None:
    """Load the newest verified checkpoint that fits into model, optimizer and scaler and return it; None
    when none verifies; UserError when some verify but none fits."""
    misfits: list[str] = []
    for found in checkpoint.verified(directory, map_location, max_checkpoint_bytes(model)):
        why = _apply(found, model, optimizer, scaler)
        if why is None:
            if misfits:
                log.warning("resuming from %s, the newest checkpoint that fits this model", found.path)
            return found
        log.warning("checkpoint %s does not fit this model (%s): trying the one before it", found.path, why)
        misfits.append(f"{found.path.name}: {why}")
    if misfits:
        raise UserError(
            f"no checkpoint in {directory} fits this model ({'; '.join(misfits[:2])}): the model or optimizer "
            f"changed since they were written; set {envvars.CHECKPOINT_DIR} to an empty directory to start "
            "afresh, or train the model they were written for"
        )
    return None
