"""Cost reports by job, commit, team or namespace over a half-open UTC window.

``model`` builds a :class:`~statictrain_cli.report.model.Report` from
Prometheus series (pure); ``fetch`` runs the queries through an injected
reader; ``text`` and ``html`` render it.
"""
