"""statictrain_operator: the kopf operator, in layers (import-linter holds them, pyproject.toml).

- ``main``: reads and checks every setting (the operator's and each part's) before kopf starts,
  builds the one ``runtime.Runtime`` (settings, the Kube port, the clock) and imports the parts switched on;
- parts, which never import each other: ``handlers`` + ``converger`` (children, phase, lifecycle
  conditions), ``progress`` (status.progress/compile), ``cost`` (status.cost, the one budget
  enforcer), ``anomaly`` (anomalies, remediation); ``report``/``cli`` for the command line;
- ``writer``: one writer per status field (server-side apply, a field manager per part);
- ``kube``: the only edge to the API server (``port.Kube``, ``http.HttpKube``; its fake is in tests/fakes/);
- pure logic below: ``reconcile``, ``status``, ``children``, ``settings``.
"""
