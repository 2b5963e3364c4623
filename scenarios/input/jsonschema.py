"""The scenario schema as JSON Schema (``podsim schema``), for YAML editors.

Generated from the pydantic models of :mod:`podsim.scenarios.input.schema` (one source of truth;
nothing restated), plus the loader's own keys: ``include`` (a file or files merged under this
one) and ``variants`` (named sets of dotted-key overrides) with ``variant`` choosing one.
Quantities accept a number in SI units or a string with a unit (``"400Gbps"``). Point an editor
at the file, e.g. with the YAML language server: ``# yaml-language-server: $schema=podsim.json``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["scenario_json_schema"]

#: JSON Schema dialect of the export (what pydantic generates)
DIALECT = "https://json-schema.org/draft/2020-12/schema"


def scenario_json_schema() -> dict[str, Any]:
    """The JSON Schema of a scenario file."""
    from podsim import __version__
    from podsim.scenarios.input.schema import Scenario

    schema = Scenario.model_json_schema(mode="validation")
    props = schema.setdefault("properties", {})
    props["include"] = {
        "description": "scenario file(s) or built-in name(s) merged under this one",
        "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
    }
    props["variants"] = {
        "description": "named sets of overrides (dotted keys, as --set takes them)",
        "type": "object",
        "additionalProperties": {"type": "object"},
    }
    # a file may rely on include: for required keys, so nothing is required at the top
    schema.pop("required", None)
    return {
        "$schema": DIALECT,
        "$id": f"https://podsim.invalid/schema/scenario-{__version__}.json",
        "title": f"podsim scenario (podsim {__version__})",
        **{k: v for k, v in schema.items() if k != "title"},
    }
