"""``statictrain preflight -f job.yaml``: the trainer's pre-flight check, run as a separate program.

The check imports and runs the user's model, so it needs torch; the operator
package must not import torch (pyproject's import contracts). This subcommand
therefore runs ``statictrain-preflight`` (the trainer distribution's script) in
a subprocess, or ``python -m statictrain_trainer.preflight`` with this
interpreter when the script is not on PATH, and passes its exit status on:
0 pass, 1 a problem found, 2 bad input or an entrypoint that does not import.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys

TRAINER_SCRIPT = "statictrain-preflight"
TRAINER_MODULE = "statictrain_trainer.preflight"
PASSED_ON = ("--reduced-batch", "--backend", "--timeout")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "preflight",
        help="run a job's model on the CPU first: graph breaks, recompiles, GPU memory fit, $/hour",
        description="Run statictrain-preflight (from statictrain-trainer) on a StaticTrainingJob manifest; "
        "the options are passed on, and their defaults are statictrain-preflight's.",
    )
    p.add_argument("-f", "--filename", required=True, help="the StaticTrainingJob manifest (YAML or JSON; - for stdin)")
    for opt in PASSED_ON:
        p.add_argument(opt, help="passed on to statictrain-preflight (see its --help)")
    p.add_argument("--json", action="store_true", help="print the measurements and verdict as JSON")
    p.set_defaults(func=run_preflight)


def command() -> list[str] | None:
    """How to start the trainer's check here; None when statictrain-trainer is not installed."""
    script = shutil.which(TRAINER_SCRIPT)
    if script is not None:
        return [script]
    if importlib.util.find_spec("statictrain_trainer") is not None:
        return [sys.executable, "-m", TRAINER_MODULE]
    return None


def run_preflight(args: argparse.Namespace) -> int:
    cmd = command()
    if cmd is None:
        print(
            f"error: {TRAINER_SCRIPT} not found: pip install statictrain-trainer (it brings torch), "
            "or run it in the trainer image",
            file=sys.stderr,
        )
        return 2
    passed: list[str] = []
    for opt in PASSED_ON:
        value = getattr(args, opt.lstrip("-").replace("-", "_"))
        if value is not None:
            passed += [opt, value]
    if args.json:
        passed.append("--json")
    return subprocess.run([*cmd, "-f", args.filename, *passed], check=False).returncode
