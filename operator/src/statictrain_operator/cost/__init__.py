"""The cost part of the operator: node prices, cost accounting, budgets.

Data flow, one run every ``STATICTRAIN_COST_INTERVAL_S`` (``handlers.py``):

1. ``annotator``: GPU nodes get ``statictrain.io/hourly-cost-usd``, the per-GPU
   price, capacity type, price source and notes, from custom prices (ConfigMap
   ``STATICTRAIN_COST_CUSTOM_PRICES_CONFIGMAP``, key ``prices.csv``), live quotes
   (``live_prices``, Azure), the shipped catalog, or a flagged fallback.
2. ``accounting``: worker pods (API server, keyed by UID) and sidecar series
   (Prometheus: utilization, compile seconds, tokens, steps; ``inputs``) go
   through :func:`statictrain.cost.allocate`; each job's ``status.cost`` gets the
   increment (``status``); node, job and idle totals go to the metrics collector
   (``exporter``), atomically per run.
3. ``budgets``: ``spec.budget`` is compared with the new cost; one action per limit.

Everything but ``handlers`` and ``prom``/``live_prices`` (HTTP) is pure; the
Kubernetes calls go through the Kube port (``statictrain_operator.cost.cluster``).
"""
