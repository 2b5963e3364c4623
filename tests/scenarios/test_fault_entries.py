"""Fault entries of a scenario: bad kinds, targets, rates and windows are refused at their keys."""

from __future__ import annotations

from pathlib import Path

from podsim.scenarios.cli.app import app
from typer.testing import CliRunner


def _cli(*args: str):
    return CliRunner().invoke(app, list(args))


def _clean(r) -> None:
    assert "Traceback" not in r.output and "internal error" not in r.output, r.output


def _flat(r) -> str:
    return " ".join(r.output.split())


def test_link_degrade_above_the_link_rate_is_refused() -> None:
    fault = "faults=[{kind: link_degrade, link: [leaf0, spine0], rate: 800Gbps}]"
    for engine in ("packet", "flow"):
        r = _cli("validate", "link-failure", "--set", f"engine={engine}", "--set", fault)
        assert r.exit_code == 2, r.output
        _clean(r)
        out = _flat(r)
        assert "key faults[0].rate" in out and "800Gbps" in out and "400Gbps" in out


def test_flow_engine_validate_checks_fault_targets() -> None:
    # validate said "valid"; the run failed later with no key path
    fault = "faults=[{kind: link_down, link: [leaf0, spine9], at: 3us}]"
    r = _cli("validate", "link-failure", "--set", "engine=flow", "--set", fault)
    assert r.exit_code == 2, r.output
    assert "key faults[0].link" in _flat(r) and "spine9" in _flat(r)
    # every engine models scale-up faults: those stay valid (with an end: su0.0 is the node's
    # only scale-up switch, and a GPU cut off its scale-up domain for good is refused)
    ok = "faults=[{kind: switch_down, node: su0.0, at: 1us, until: 5us}]"
    for engine in ("flow", "packet"):
        r = _cli("validate", "quickstart", "--set", f"engine={engine}", "--set", ok)
        assert r.exit_code == 0, r.output
    r = _cli("validate", "quickstart", "--set", ok.replace(", until: 5us", ""))
    assert r.exit_code == 2, r.output
    assert "key faults[0]" in _flat(r) and "every scale-up link of 'gpu" in _flat(r)


def test_fault_window_error_prints_times_with_units() -> None:
    fault = "faults=[{kind: link_down, link: [leaf0, spine0], at: 5us, until: 2us}]"
    r = _cli("validate", "link-failure", "--set", fault)
    assert r.exit_code == 2, r.output
    assert "until (2us) must be after at (5us)" in _flat(r)


def test_misspelt_fault_kind_gets_a_did_you_mean_at_the_kind_key(tmp_path: Path) -> None:
    f = tmp_path / "fk.yaml"
    f.write_text("include: link-failure\nfaults:\n  - {kind: straggle, rank: 1}\n")
    r = _cli("validate", str(f))
    assert r.exit_code == 2, r.output
    _clean(r)
    out = _flat(r)
    assert "key faults[0].kind" in out and "line 3" in out
    assert "Did you mean 'straggler'?" in out and "Input tag" not in out


def test_fault_without_a_kind_names_the_missing_key() -> None:
    r = _cli("validate", "link-failure", "--set", "faults=[{link: [leaf0, spine0]}]")
    assert r.exit_code == 2, r.output
    out = _flat(r)
    assert "key faults[0].kind" in out and "missing" in out and "discriminator" not in out
