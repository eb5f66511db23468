"""The Python API types (statictrain.api) and the CRD schema (crds/) agree field for field."""

from __future__ import annotations

import pathlib
import typing
from typing import Any, Literal, get_args, get_origin, get_type_hints, is_typeddict

import pytest
import yaml
from statictrain import api
from statictrain_operator.anomaly.evaluate import CONDITION_TYPE as REMEDIATION
from statictrain_operator.cost.budgets import CONDITION as BUDGET

CRD_PATH = pathlib.Path(__file__).resolve().parents[3] / "crds" / "statictrain.io_statictrainingjobs.yaml"


def _schema() -> dict[str, Any]:
    crd = yaml.safe_load(CRD_PATH.read_text())
    (version,) = crd["spec"]["versions"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def _differences(path: str, schema: dict[str, Any], typ: Any) -> list[str]:
    """Every way `typ` disagrees with `schema`, as readable lines."""
    kind = schema.get("type")
    origin = get_origin(typ)
    if kind == "object" and "properties" in schema:
        if not is_typeddict(typ):
            return [f"{path}: CRD has an object, Python has {typ!r}"]
        hints = get_type_hints(typ)
        out = [f"{path}.{k}: only in the CRD" for k in schema["properties"].keys() - hints.keys()]
        out += [f"{path}.{k}: only in {typ.__name__}" for k in hints.keys() - schema["properties"].keys()]
        for key in schema["properties"].keys() & hints.keys():
            out += _differences(f"{path}.{key}", schema["properties"][key], hints[key])
        return out
    if kind == "object":
        value = schema.get("additionalProperties", {}).get("type")
        if origin is dict and value == "string" and get_args(typ) == (str, str):
            return []
        return [f"{path}: CRD has a map of {value}, Python has {typ!r}"]
    if kind == "array":
        if origin is not list:
            return [f"{path}: CRD has an array, Python has {typ!r}"]
        return _differences(f"{path}[]", schema["items"], get_args(typ)[0])
    if kind == "string":
        if "enum" in schema:
            if origin is not Literal:
                return [f"{path}: CRD has an enum, Python has {typ!r}"]
            if list(get_args(typ)) != schema["enum"]:
                return [f"{path}: enum {schema['enum']} in the CRD, {list(get_args(typ))} in Python"]
            return []
        return [] if typ is str else [f"{path}: CRD has a string, Python has {typ!r}"]
    expected = {"integer": int, "boolean": bool}.get(str(kind))
    if expected is None:
        return [f"{path}: the CRD uses type {kind!r}, which the API must not (no floats, no free form)"]
    return [] if typ is expected else [f"{path}: CRD has {kind}, Python has {typ!r}"]


@pytest.mark.parametrize(("part", "typ"), [("spec", api.Spec), ("status", api.Status)])
def test_types_mirror_the_crd(part: str, typ: type) -> None:
    assert _differences(part, _schema()["properties"][part], typ) == []


def _crd_defaults(schema: dict[str, Any]) -> dict[str, Any]:
    """Defaults the API server fills in for a spec with only its required fields."""
    out: dict[str, Any] = {}
    for key, sub in schema.get("properties", {}).items():
        if "default" not in sub:
            continue
        value = sub["default"]
        if isinstance(value, dict):
            value = {**value, **_crd_defaults(sub)}
        out[key] = value
    return out


def test_python_defaults_are_the_crd_defaults() -> None:
    assert _crd_defaults(_schema()["properties"]["spec"]) == api.DEFAULTS


def test_constants_match_the_crd() -> None:
    status = _schema()["properties"]["status"]["properties"]
    assert list(api.PHASES) == status["phase"]["enum"]
    assert list(api.CONDITION_TYPES) == status["conditions"]["items"]["properties"]["type"]["enum"]
    assert status["anomalies"]["maxItems"] == api.MAX_ANOMALIES
    assert set(api.PHASES) >= api.FINISHED_PHASES


def test_no_number_fields_anywhere() -> None:
    """Money and rates are strings or integers: a float in the API is a bug."""

    def walk(node: Any, path: str) -> typing.Iterator[str]:
        if isinstance(node, dict):
            if node.get("type") == "number":
                yield path
            for k, v in node.items():
                yield from walk(v, f"{path}.{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                yield from walk(v, f"{path}[{i}]")

    assert list(walk(_schema(), "")) == []


class _Wrong(typing.TypedDict, total=False):
    image: int
    extra: str


def test_the_comparison_catches_a_mismatch() -> None:
    schema = {"type": "object", "properties": {"image": {"type": "string"}, "missing": {"type": "boolean"}}}
    assert sorted(_differences("spec", schema, _Wrong)) == [
        "spec.extra: only in _Wrong",
        "spec.image: CRD has a string, Python has <class 'int'>",
        "spec.missing: only in the CRD",
    ]


SCHEMA_KEYS = {
    "type",
    "format",
    "description",
    "properties",
    "items",
    "required",
    "enum",
    "default",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "maxProperties",
    "additionalProperties",
    "x-kubernetes-validations",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
}


def test_every_schema_node_uses_only_openapi_keywords() -> None:
    """Catches YAML slips such as an unquoted ': ' inside a flow-style description."""

    def walk(node: dict[str, Any], path: str) -> typing.Iterator[str]:
        for key in node.keys() - SCHEMA_KEYS:
            yield f"{path}: {key!r}"
        for name, sub in (node.get("properties") or {}).items():
            yield from walk(sub, f"{path}.{name}")
        if isinstance(node.get("items"), dict):
            yield from walk(node["items"], f"{path}[]")
        if isinstance(node.get("additionalProperties"), dict):
            yield from walk(node["additionalProperties"], f"{path}{{}}")

    assert list(walk(_schema(), "")) == []


def test_condition_types_the_parts_write_are_in_the_api() -> None:
    assert {BUDGET, REMEDIATION} <= set(api.CONDITION_TYPES)
