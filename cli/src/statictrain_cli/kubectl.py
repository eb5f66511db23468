"""kubectl for the ``statictrain`` subcommands that read the API server (estimate, advise): bounded, checked.

:func:`system_kubectl` runs ``kubectl`` with a time limit; :func:`kubectl_json`
parses what it printed. Anything that is not an answer (kubectl missing or timed
out, output that is not a JSON object, more than :data:`MAX_KUBECTL_BYTES`) is a
:class:`CommandError`: the caller exits ``CliExit.CANNOT_JUDGE``.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["KUBECTL_TIMEOUT_S", "MAX_KUBECTL_BYTES", "CommandError", "Kubectl", "kubectl_json", "system_kubectl"]

Kubectl = Callable[[Sequence[str], str | None], subprocess.CompletedProcess[str]]
KUBECTL_TIMEOUT_S = 60.0
MAX_KUBECTL_BYTES = 256 * 1024 * 1024
"""Largest kubectl output parsed (a list of a few thousand nodes is tens of MB)."""
_DETAIL_CHARS = 300


class CommandError(RuntimeError):
    """kubectl could not give an answer; the message says what to check."""


def system_kubectl(kubeconfig: str | None, timeout_s: float = KUBECTL_TIMEOUT_S) -> Kubectl:
    def run(args: Sequence[str], stdin: str | None) -> subprocess.CompletedProcess[str]:
        cmd = ["kubectl", *(["--kubeconfig", kubeconfig] if kubeconfig else []), *args]
        try:
            return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout_s, check=False)
        except FileNotFoundError:
            raise CommandError(
                "kubectl not found on PATH; install it or use --offline with --nodes/--catalog"
            ) from None
        except subprocess.TimeoutExpired:
            raise CommandError(
                f"kubectl {' '.join(args[:2])} gave no answer within {timeout_s:g} s; check the API server"
            ) from None
        except UnicodeDecodeError:
            raise CommandError(f"kubectl {' '.join(args[:2])} printed something that is not UTF-8 text") from None

    return run


def kubectl_json(kubectl: Kubectl, args: Sequence[str], stdin: str | None = None) -> tuple[Any, str]:
    """kubectl's JSON object, and ``""``; or ``None`` and kubectl's message when it failed."""
    proc = kubectl(args, stdin)
    if proc.returncode != 0:
        return None, (proc.stderr.strip() or proc.stdout.strip())[: _DETAIL_CHARS * 10]
    what = f"kubectl {' '.join(args[:2])}"
    if len(proc.stdout) > MAX_KUBECTL_BYTES:
        raise CommandError(f"{what} printed more than {MAX_KUBECTL_BYTES // (1024 * 1024)} MiB")
    try:
        found = json.loads(proc.stdout)
    except (ValueError, RecursionError):
        raise CommandError(f"{what} printed something that is not JSON: {proc.stdout[:80]!r}") from None
    if not isinstance(found, dict):
        raise CommandError(f"{what} printed JSON that is not an object ({type(found).__name__})")
    return found, ""
