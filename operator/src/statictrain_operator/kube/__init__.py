"""The operator's edge to the Kubernetes API, and the only layer that imports ``kubernetes`` or speaks HTTP to it.

- ``port``: the ``Kube`` Protocol every part calls, the resources, what "missing" answers mean;
- ``http``: ``HttpKube``, the port over the API server (aiohttp, one session on kopf's loop);
- ``endpoint``: server and credentials, read once in main (kubeconfig or service account);
- ``blocking``: calling the port from code with no loop (tools, tests);
- ``events``, ``heartbeat``: Event and Lease bodies.

Bodies go in and come out as plain dicts in the API server's camelCase. What a
part writes (which patch for which decision) lives with that part, not here.
"""
