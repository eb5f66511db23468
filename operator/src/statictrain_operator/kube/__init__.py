"""The only layer that imports ``kubernetes``: each module holds the API calls of one concern.

Callers pass the client objects in (built once in ``clients.build``); bodies go
in and come out as plain dicts in the API server's camelCase, so the pure
modules never see a kubernetes model class.
"""
