"""Test doubles shared by the unit and integration tests (``from tests.fakes.kube import FakeKube``).

They live here, not in the product packages, so no image ships them. Each is checked against
the real component by an integration test (FakeKube: tests/integration/operator/test_kube_contract.py).
"""
