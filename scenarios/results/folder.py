"""Result folders that are never half-written: a run writes into a staging folder and swaps it in.

A run's tables, summary, plots and report are written into a fresh hidden folder beside the
target (``.NAME.podsim-new-PID``), which podsim created itself, so nothing planted in an
earlier result folder (a ``resolved.yaml`` symlink, a symlinked ``plots/``) is ever written
through. Only when every file is written is the staging folder swapped with the target:

- no target yet: one ``rename`` (atomic on POSIX);
- an earlier result folder: Linux's ``renameat2(RENAME_EXCHANGE)`` swaps the two folders in one
  atomic step (elsewhere two renames, with the earlier folder kept aside until the second one);
  then the files of the user's own in the earlier folder (everything its manifest does not list)
  move into the new one and the earlier folder is removed.

So SIGINT, SIGTERM or SIGKILL at any moment leave at the target either the earlier results or
the new ones, whole. What a killed run leaves beside the target (its staging folder, or the
earlier folder if it was killed between the swap and the clean-up) is tidied up by the next
run into the same target (:func:`recover`): an unfinished staging folder is removed, an
earlier folder gives back the user's files (or returns to its place if the target is missing).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from podsim.scenarios.errors import ScenarioError

__all__ = [
    "MANIFEST",
    "STAGING_MARK",
    "check_output_dir",
    "check_within",
    "is_result_folder",
    "podsim_entries",
    "recover",
    "staged_folder",
]

#: the list of files a run wrote into its result folder (relative paths, one a line), so that
#: the next run into the same folder knows which files are podsim's and which the user's
MANIFEST = ".podsim-files"
#: a file only a staging folder holds (a folder without it beside a target is an earlier one)
STAGING_MARK = ".podsim-staging"
#: what ``podsim plot`` / ``podsim report`` add to a result folder later
_LATER_FILES = ("report.html", "plots")
#: a result folder written before the manifest existed: podsim's files by name and suffix
_LEGACY_NAMES = ("summary.json", "cost.json", "resolved.yaml", "topology.graphml", "bom.csv")
_LEGACY_SUFFIXES = (".parquet", ".csv")
_PREFIX = ".{name}.podsim-"


def is_result_folder(folder: Path) -> bool:
    """A folder a ``podsim run`` wrote (it has ``summary.json``)."""
    return (folder / "summary.json").is_file()


def check_output_dir(folder: Path, option: str = "--out") -> None:
    """Refuse, before anything runs, an output folder the results cannot go to: an existing
    file, or a non-empty folder that is not a podsim result folder (its files would be mixed
    with the results). An earlier result folder is fine: it is replaced whole."""
    if folder.exists() and not folder.is_dir():
        raise ScenarioError(f"{option} {str(folder)!r} is an existing file, not a folder.")
    if folder.is_dir() and not is_result_folder(folder) and any(folder.iterdir()):
        raise ScenarioError(
            f"{option} {str(folder)!r} is a folder that is neither empty nor a podsim result "
            "folder (it has no summary.json); the results would be mixed with its files. "
            "Choose a new or empty folder, or an earlier result folder (which is replaced)."
        )


def check_within(folder: Path, relative: str) -> Path:
    """``folder / relative`` for podsim to write into an existing result folder (``podsim
    plot``, ``podsim report``), refused if that path or a folder on the way to it is a symlink:
    a link planted in a result folder must not send podsim's files elsewhere."""
    path = folder
    for part in Path(relative).parts:
        path = path / part
        if path.is_symlink():
            raise ScenarioError(
                f"{str(path)!r} is a symbolic link; podsim writes only real files inside "
                f"the result folder {str(folder)!r}. Remove the link (or run the scenario "
                "again, which rewrites the folder whole)."
            )
    return path


def podsim_entries(folder: Path) -> set[str]:
    """Top-level names in result folder ``folder`` that podsim wrote (its manifest's entries,
    the plots and the report; for a folder from before the manifest, podsim's named files and
    every .parquet or .csv table). Everything else in the folder is the user's."""
    manifest = folder / MANIFEST
    owned = {MANIFEST, STAGING_MARK, *_LATER_FILES}
    if manifest.is_file() and not manifest.is_symlink():
        owned |= {Path(n).parts[0] for n in manifest.read_text().splitlines() if n.strip()}
    else:
        owned |= {
            p.name
            for p in folder.iterdir()
            if p.name in _LEGACY_NAMES or (p.suffix in _LEGACY_SUFFIXES and p.is_file())
        }
    return owned


# --------------------------------------------------------------------------- swapping

_RENAME_EXCHANGE = 2  # linux/fs.h


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths with Linux's renameat2(RENAME_EXCHANGE); False where the
    system call is not available (other systems, old kernels or file systems)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError, TypeError):
        return False
    at_fdcwd = -100
    rc = fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _adopt_user_files(old: Path, new: Path) -> None:
    """Move the user's own files from the earlier result folder into the new one."""
    owned = podsim_entries(old)
    for entry in sorted(old.iterdir()):
        if entry.name in owned or (new / entry.name).exists() or (new / entry.name).is_symlink():
            continue
        os.rename(entry, new / entry.name)  # same folder, same file system; a symlink moves as one


def _remove(folder: Path) -> None:
    # rmtree removes symlinks themselves and never follows them out of the folder
    shutil.rmtree(folder, ignore_errors=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _siblings(target: Path) -> Iterator[tuple[Path, int]]:
    prefix = _PREFIX.format(name=target.name)
    if not target.parent.is_dir():
        return
    for p in target.parent.iterdir():
        if not p.name.startswith(prefix) or p.is_symlink() or not p.is_dir():
            continue
        pid = p.name.rsplit("-", 1)[-1]
        if pid.isdigit():
            yield p, int(pid)


def recover(target: Path) -> None:
    """Tidy what killed runs left beside ``target`` (see the module docstring)."""
    for left, pid in _siblings(target):
        if pid != os.getpid() and _pid_alive(pid):
            continue  # another run into the same folder is still writing
        if (left / STAGING_MARK).exists():
            _remove(left)  # an unfinished new result folder: the earlier one is in place
        elif not target.exists():
            os.rename(left, target)  # killed between the two renames: put it back
        else:
            _adopt_user_files(left, target)
            _remove(left)


@contextlib.contextmanager
def staged_folder(target: Path) -> Iterator[Path]:
    """Yield a fresh staging folder beside ``target``; when the block ends normally, swap it
    in as ``target`` (see the module docstring); if the block raises (including
    KeyboardInterrupt), remove it and leave ``target`` as it was."""
    target = Path(os.path.abspath(target))
    if target.is_symlink() and target.is_dir():
        target = target.resolve()  # results go where the user's link points
    target.parent.mkdir(parents=True, exist_ok=True)
    recover(target)
    pid = os.getpid()
    staging = target.parent / (_PREFIX.format(name=target.name) + f"new-{pid}")
    _remove(staging)
    staging.mkdir()
    (staging / STAGING_MARK).write_text("")
    try:
        yield staging
    except BaseException:
        _remove(staging)
        raise
    (staging / STAGING_MARK).unlink()
    if not target.exists():
        os.rename(staging, target)
        return
    if _exchange(staging, target):
        old = staging  # the staging name now holds the earlier folder
    else:
        old = target.parent / (_PREFIX.format(name=target.name) + f"old-{pid}")
        os.rename(target, old)
        os.rename(staging, target)
    _adopt_user_files(old, target)
    _remove(old)
