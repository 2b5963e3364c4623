"""`podsim schema` exports a JSON Schema that every built-in scenario file satisfies and that
catches what the loader refuses (a misspelt key, a wrong type)."""

from __future__ import annotations

import json

import jsonschema
import pytest
import yaml
from podsim.scenarios.cli.app import app
from podsim.scenarios.input.jsonschema import scenario_json_schema
from podsim.scenarios.input.loader import LIBRARY
from typer.testing import CliRunner

FILES = sorted(LIBRARY.glob("*.yaml"))


def _validator() -> jsonschema.Validator:
    schema = scenario_json_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)  # the export itself is a valid JSON Schema of its dialect
    return cls(schema)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_library_scenario_satisfies_the_schema(path) -> None:
    errors = list(_validator().iter_errors(yaml.safe_load(path.read_text())))
    assert not errors, [f"{'.'.join(map(str, e.path))}: {e.message}" for e in errors]


def test_the_schema_refuses_what_the_loader_refuses() -> None:
    v = _validator()
    doc = yaml.safe_load((LIBRARY / "quickstart.yaml").read_text())
    assert v.is_valid(doc)
    assert not v.is_valid({**doc, "engnie": "flow"})  # misspelt top-level key
    assert not v.is_valid({**doc, "seed": "one"})  # wrong type
    bad_rate = {**doc, "cluster": {**doc["cluster"], "nic": {"packet_rate": "fast"}}}
    assert not v.is_valid(bad_rate)  # not a quantity
    ok_rate = {**doc, "cluster": {**doc["cluster"], "nic": {"packet_rate": "400Mpps"}}}
    assert v.is_valid(ok_rate)


def test_the_command_prints_and_writes_the_schema(tmp_path) -> None:
    r = CliRunner().invoke(app, ["schema"])
    assert r.exit_code == 0 and json.loads(r.output) == scenario_json_schema()
    r = CliRunner().invoke(app, ["schema", "-o", str(tmp_path / "s.json")])
    assert r.exit_code == 0
    assert json.loads((tmp_path / "s.json").read_text())["$schema"].startswith("https://json")
    r = CliRunner().invoke(app, ["schema", "-o", str(tmp_path / "no" / "s.json")])
    assert r.exit_code == 2 and "--out" in r.output
