"""`podsim list` names every built-in a scenario or study can use, with its description."""

from __future__ import annotations

import pytest
from podsim.scenarios.cli.app import app
from podsim.scenarios.input.loader import library_names
from podsim.scenarios.input.registries import get_registry
from podsim.scenarios.study.spec import study_description, study_names
from typer.testing import CliRunner


def test_list_names_studies_layouts_nics_workloads_models_engines() -> None:
    r = CliRunner().invoke(app, ["list"], terminal_width=200)
    assert r.exit_code == 0, r.output
    for title in ("studies (podsim sweep)", "node layouts", "NIC models", "workloads",
                  "MoE model presets", "engines", "scenarios"):  # fmt: skip
        assert title in r.output, title
    names = [*library_names(), *study_names()]
    for kind in ("node layout", "NIC model", "workload", "model preset", "engine"):
        described = get_registry(kind).describe()
        assert described, kind  # every kind has built-ins, each with a description
        assert all(desc for _, desc in described), kind
        names += [n for n, _ in described]
    for name in names:
        assert name in r.output, name
    for name in study_names():
        assert study_description(name) and study_description(name)[:40] in r.output


@pytest.mark.parametrize(
    ("section", "expect"),
    [("studies", "on-card-switch-savings"), ("study", "fabric-what-if"),
     ("nic", "smartnic-400g"), ("layouts", "on-card-switch"), ("workloads", "ring-allreduce"),
     ("models", "deepseek-v3"), ("engines", "packet")],
)  # fmt: skip
def test_list_one_section(section: str, expect: str) -> None:
    r = CliRunner().invoke(app, ["list", section], terminal_width=200)
    assert r.exit_code == 0 and expect in r.output, r.output
    assert "quickstart" not in r.output  # only that section


def test_user_facing_text_speaks_of_the_product_not_the_brief() -> None:
    """Issue 19: `podsim list` and `podsim docs` describe the SmartNIC as the product's design,
    never as "the brief"."""
    from podsim.scenarios.cli.app import app
    from typer.testing import CliRunner

    for cmd in (["list"], ["docs"], ["list", "nic"]):
        out = CliRunner().invoke(app, cmd).output
        assert "brief" not in out.lower(), cmd
