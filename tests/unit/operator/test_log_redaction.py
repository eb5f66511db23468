"""The operator's log setup: every line it writes (its own, kopf's per-object ones, tracebacks) is redacted."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import kopf
import pytest
from statictrain_operator import main, settings

SECRETS = ("pw-SECRET1", "SECRET2token", "SECRET3abc", "SECRET4abcdef")


@pytest.fixture
def root_logging() -> Iterator[None]:
    """Leave the process's logging as it was (configure_logging changes the root logger)."""
    root, objects = logging.getLogger(), logging.getLogger("kopf.objects")
    saved = root.handlers[:], root.level, objects.level
    yield
    root.handlers[:], level, objects_level = saved
    root.setLevel(level)
    objects.setLevel(objects_level)


def test_log_lines_carry_no_credentials(
    root_logging: None, capsys: pytest.CaptureFixture[str]
) -> None:
    main.configure_logging(verbose=False)
    logging.getLogger("statictrain.operator").warning(
        "GET %s failed; token=%s", "http://u:pw-SECRET1@api:6443/x?access_token=SECRET2token", "SECRET3abc"
    )
    body = kopf.Body({"apiVersion": "statictrain.io/v1alpha1", "kind": "StaticTrainingJob",
                      "metadata": {"name": "j", "namespace": "n", "uid": "u1"}})
    job_log = kopf.ObjectLogger(body=body, settings=main.kopf_settings(settings.Settings()))
    job_log.warning("retrying with Authorization: Bearer SECRET4abcdef")
    try:
        raise RuntimeError("connect to http://u:pw-SECRET1@api:6443 failed")
    except RuntimeError:
        logging.getLogger("statictrain.operator").exception("API trouble")

    err = capsys.readouterr().err
    assert "GET http://api:6443/x failed; token=***" in err  # the line is still there, made safe
    assert "retrying with Authorization: ***" in err
    assert "connect to http://api:6443 failed" in err  # the traceback's text too
    for secret in SECRETS:
        assert secret not in err
