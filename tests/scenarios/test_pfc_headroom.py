"""PFC sizing check: with PFC on, every ingress link of a switch may fill to xoff and then take
what is in flight while its PAUSE travels; if that exceeds the shared buffer the switch can drop,
and the scenario is refused (``--force`` runs it). The suggested xoff must then be lossless."""

from __future__ import annotations

import json
import re
from pathlib import Path

from podsim.scenarios.cli.app import app
from typer.testing import CliRunner

SETS = [
    "variant=none",  # no CC: PFC alone must hold the 15:1 incast
    "cluster.switch.pfc.enabled=true",
    "cluster.switch.buffer=4MiB",
    "workload.synthetic.size=1MiB",
    "outputs.plots=false",
]


def _args(*cmd: str, extra: list[str] | tuple[str, ...] = ()) -> list[str]:
    args = [*cmd]
    for s in [*SETS, *extra]:
        args += ["--set", s]
    return args


def _counters(folder: Path) -> dict:
    return json.loads((folder / "summary.json").read_text())["counters"]


def test_undersized_buffer_is_refused_and_the_suggested_xoff_is_lossless(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, _args("validate", "incast-cc"))
    assert r.exit_code == 2, r.output
    flat = " ".join(r.output.split())
    assert "key cluster.switch.pfc.xoff" in flat and "lossless" in flat
    m = re.search(r"pfc\.xoff to at most (\S+) \(and xon", flat)
    assert m, flat
    xoff = m.group(1)
    # at the suggested xoff (xon a little below) the incast is lossless, with pauses
    pfc = [f"cluster.switch.pfc.xoff={xoff}", "cluster.switch.pfc.xon=300KiB"]
    ok = _args("run", "incast-cc", "--out", str(tmp_path / "ok"), extra=pfc)
    r = CliRunner().invoke(app, ok)
    assert r.exit_code == 0, r.output
    c = _counters(tmp_path / "ok")
    assert c["drops"] == 0 and c["pfc_pauses"] > 0
    # the refused configuration, forced, does drop: the check is not vacuous
    forced = _args("run", "incast-cc", "--force", "--out", str(tmp_path / "forced"))
    r = CliRunner().invoke(app, forced)
    assert r.exit_code == 0, r.output
    assert _counters(tmp_path / "forced")["drops"] > 0
