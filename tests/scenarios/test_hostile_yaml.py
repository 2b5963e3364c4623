"""Hostile YAML is refused before it is expanded: alias bombs, deep nesting, recursive aliases,
huge strings, NUL bytes, includes of files that are not scenarios (issue 20, items 1 and 7)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from podsim.scenarios.errors import ScenarioError, check_run_name, printable
from podsim.scenarios.input.loader import LIBRARY, load_scenario
from podsim.scenarios.input.yamltext import LIMITS, YamlRefused, check_yaml_text, read_yaml


def _bomb(levels: int = 9) -> str:
    text = 'a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    for i in range(1, levels):
        text += f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]\n"
    return text


def test_alias_bomb_refused_fast_with_its_line() -> None:
    text = _bomb()  # 9**9 = 387 million strings once expanded, 600 bytes of text
    t0 = time.process_time()
    with pytest.raises(YamlRefused) as info:
        check_yaml_text(text, "bomb.yaml")
    assert time.process_time() - t0 < 1.0
    assert f"{LIMITS.max_nodes:,}" in str(info.value)
    assert info.value.problem_mark.line > 0  # the line where the limit was crossed


def test_aliases_within_the_limit_load() -> None:
    text = _bomb(levels=3)  # 9**3 = 729 strings: a legitimate use of anchors
    check_yaml_text(text)
    assert len(yaml.safe_load(text)["a2"]) == 9


@pytest.mark.parametrize(
    "text, needle",
    [
        ("".join(" " * i + f"k{i}:\n" for i in range(LIMITS.max_depth + 2)), "nest deeper"),
        ("a: " + "[" * 200 + "]" * 200 + "\n", "nest deeper"),
        ("a: &x [1, *x]\n", "recursive"),
        ("a: &x {b: *x}\n", "recursive"),
        ("d: " + "x" * (LIMITS.max_scalar_chars + 1) + "\n", "characters"),
        ("seed: 1\nname: a\x00b\n", "NUL byte"),
        ("seed: 1\nname: a\x07b\n", "control character #x0007"),
    ],
)
def test_refusals(text: str, needle: str) -> None:
    with pytest.raises(YamlRefused, match=needle):
        check_yaml_text(text)


def test_nul_byte_position_is_reported() -> None:
    with pytest.raises(YamlRefused) as info:
        check_yaml_text("seed: 1\nname: ab\x00\n")
    mark = info.value.problem_mark
    assert (mark.line, mark.column) == (1, 8)


def test_size_limit_reads_no_more_than_the_limit(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("a: 1\n" + "#" * LIMITS.max_bytes)
    with pytest.raises(YamlRefused, match="bytes"):
        read_yaml(big)


def test_every_library_file_is_within_the_limits() -> None:
    files = sorted(LIBRARY.rglob("*.yaml"))
    assert files
    for f in files:
        read_yaml(f)


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    "text, needle",
    [
        (_bomb(), "expands to more than"),
        ("include: quickstart\nname: x\x00\n", "NUL byte"),
        (
            "include: quickstart\n" + "x:\n" + "".join(" " * i + "y:\n" for i in range(1, 80)),
            "nest",
        ),
    ],
)
def test_scenario_loader_gives_a_scenario_error(tmp_path: Path, text: str, needle: str) -> None:
    f = _write(tmp_path, "s.yaml", text)
    with pytest.raises(ScenarioError, match=needle) as info:
        load_scenario(f)
    assert str(f) in str(info.value)


def test_include_of_a_non_scenario_file_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "outside" / "secret.yaml"
    secret.parent.mkdir()
    secret.write_text("seed: 1\n")
    scen_dir = tmp_path / "scen"
    scen_dir.mkdir()
    (scen_dir / "link.yaml").symlink_to("/proc/self/environ")
    for ref, needle in [
        ("/proc/self/environ", "not a scenario file"),
        ("link.yaml", "not a scenario file"),  # a symlink is judged by what it points to
        (str(secret), "outside the scenario's folder"),
        ("../outside/secret.yaml", "outside the scenario's folder"),
    ]:
        f = _write(scen_dir, "s.yaml", f"include: [quickstart, {ref!r}]\n")
        with pytest.raises(ScenarioError, match=needle) as info:
            load_scenario(f)
        assert info.value.path == "include"


def test_include_path_environment_allows_a_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "base.yaml").write_text("include: quickstart\nseed: 7\n")
    scen_dir = tmp_path / "scen"
    scen_dir.mkdir()
    f = _write(scen_dir, "s.yaml", f"include: {str(shared / 'base.yaml')!r}\n")
    with pytest.raises(ScenarioError, match="PODSIM_INCLUDE_PATH"):
        load_scenario(f)
    monkeypatch.setenv("PODSIM_INCLUDE_PATH", str(shared))
    scenario, _ = load_scenario(f)
    assert scenario.seed == 7


def test_names_with_control_characters_are_refused_and_printed_escaped() -> None:
    with pytest.raises(ValueError, match="control characters"):
        check_run_name("run\x1b[31mred")
    with pytest.raises(ValueError, match="at most"):
        check_run_name("x" * 256)
    assert printable("a\x1b[31mb\nc\td") == "a\\x1b[31mb\nc\td"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PODSIM_DEBUG": ""}
    return subprocess.run(
        [sys.executable, "-m", "podsim", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=60,
    )


def test_cli_refuses_the_alias_bomb_and_a_control_character_description(tmp_path: Path) -> None:
    bomb = _write(tmp_path, "bomb.yaml", _bomb())
    res = _cli("validate", str(bomb), cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert "expands to more than" in res.stderr and "Traceback" not in res.stderr
    nul = _write(tmp_path, "nul.yaml", "include: quickstart\nname: a\x00\n")
    res = _cli("run", str(nul), cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert "NUL byte" in res.stderr and "line 2" in res.stderr
    esc = _write(tmp_path, "esc.yaml", 'include: quickstart\nname: "a\\x1b[2Jb"\n')
    res = _cli("validate", str(esc), cwd=tmp_path)
    assert res.returncode == 2
    assert "\x1b" not in res.stderr and "\\x1b" in res.stderr
