"""The runtime around the kernels: doctor, caches, offline and record modes, counters.

The switches mirror the environment variables: ``set_offline`` is SHAPEJIT_OFFLINE,
``set_record_file`` SHAPEJIT_RECORD and ``set_cache_dir`` SHAPEJIT_CACHE_DIR; each takes effect
for the whole process at once.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator, Optional

from . import _shapejit as _ext
from ._errors import InvalidArgumentError


def version() -> str:
    """The library version."""
    return _ext.version()


def describe_manifest_line(line: str, *, json: bool = False) -> str:
    """Plans a manifest line (what follows ``shapejit plan``, e.g. ``"rearrange --dtype f16
    --shape 8,4 --perm 1,0"``) and returns its description, as text or a JSON document."""
    return _ext.describe_manifest_line(line, json)


def counters() -> dict[str, Any]:
    """Process-wide JIT counters: memory_hits, disk_hits, compiles, compile_ms, load_ms,
    bad_entries_replaced."""
    return _ext.counters()


# ------------------------------------------------------------------------------------------------
# Offline and record modes


def set_offline(offline: bool = True) -> None:
    """Forbids (or allows again) NVRTC for the whole process: a kernel in no cache then raises
    OfflineMissError naming its manifest line. SHAPEJIT_OFFLINE=1 sets it at start."""
    _ext.set_offline(bool(offline))


def is_offline() -> bool:
    """Whether NVRTC is forbidden."""
    return _ext.offline()


@contextlib.contextmanager
def offline_mode(offline: bool = True) -> Iterator[None]:
    """A ``with`` block in offline mode (or out of it), restoring the previous mode after."""
    before = is_offline()
    set_offline(offline)
    try:
        yield
    finally:
        set_offline(before)


def set_record_file(path: Optional[str | os.PathLike[str]]) -> None:
    """Starts record mode: each plan whose kernels were not recorded yet appends its manifest line
    to ``path`` (what ``shapejit precompile --manifest`` reads). None stops it.
    SHAPEJIT_RECORD=path sets it at start."""
    _ext.set_record_file("" if path is None else os.fspath(path))


def record_file() -> Optional[str]:
    """The file record mode appends to, or None."""
    return _ext.record_file() or None


@contextlib.contextmanager
def recording(path: str | os.PathLike[str]) -> Iterator[None]:
    """A ``with`` block in record mode, restoring the previous record file after."""
    before = record_file()
    set_record_file(path)
    try:
        yield
    finally:
        set_record_file(before)


# ------------------------------------------------------------------------------------------------
# Caches


def set_cache_dir(path: Optional[str | os.PathLike[str]]) -> None:
    """Sets the user cache directory (SHAPEJIT_CACHE_DIR) for the kernels compiled from now on;
    None goes back to the default ($XDG_CACHE_HOME/shapejit or ~/.cache/shapejit)."""
    if path is None:
        os.environ.pop("SHAPEJIT_CACHE_DIR", None)
    else:
        os.environ["SHAPEJIT_CACHE_DIR"] = os.fspath(path)


def cache_dir() -> Optional[str]:
    """The user cache directory, or None when there is none (no SHAPEJIT_CACHE_DIR or HOME)."""
    return _ext.user_cache_dir()


def deployment_cache_dirs() -> list[str]:
    """The read-only deployment caches of SHAPEJIT_CACHE_PATH, searched first."""
    return _ext.deployment_cache_dirs()


def _root(path: Optional[str | os.PathLike[str]]) -> str:
    if path is not None:
        return os.fspath(path)
    root = cache_dir()
    if root is None:
        raise InvalidArgumentError(
            "no cache directory: pass a path or set SHAPEJIT_CACHE_DIR or HOME", 1)
    return root


def cache_stats(path: Optional[str | os.PathLike[str]] = None) -> dict[str, Any]:
    """Entries, bytes and leftover temp files of a cache directory (default: the user cache)."""
    return _ext.cache_stats(_root(path))


def cache_verify(path: Optional[str | os.PathLike[str]] = None, *, repair: bool = False) -> dict[str, Any]:
    """Checks every entry (checked, bad, removed, problems); ``repair`` removes bad entries."""
    return _ext.cache_verify(_root(path), repair)


def cache_prune(max_mb: float, path: Optional[str | os.PathLike[str]] = None) -> dict[str, Any]:
    """Removes least recently used entries until at most ``max_mb`` MiB remain."""
    if max_mb < 0:
        raise InvalidArgumentError(f"max_mb {max_mb} is negative", 1)
    return _ext.cache_prune(_root(path), int(max_mb * 1024 * 1024))


def cache_clear(path: Optional[str | os.PathLike[str]] = None) -> int:
    """Removes every entry; returns how many files were removed."""
    return _ext.cache_clear(_root(path))


# ------------------------------------------------------------------------------------------------
# Doctor


def _doctor_text(info: dict[str, Any]) -> str:
    lines = [f"shapejit {info['version']}"]
    driver = info["driver"]
    if driver["usable"]:
        lines.append(f"driver:   CUDA {driver['version']}")
        for d in driver["devices"]:
            lines.append(f"device {d['index']}: {d['name']} ({d['arch']}, {d['bytes'] / 2**30:.1f} GiB)")
        if "devices_error" in driver:
            lines.append(f"devices:  not listed: {driver['devices_error']}")
    else:
        lines.append(f"driver:   not usable: {driver['reason']}")
        lines.append("          (no GPU: planning, precompiling and cache commands still work)")
    nvrtc = info["nvrtc"]
    if nvrtc["usable"]:
        lines.append(f"nvrtc:    {nvrtc['version']} ({nvrtc['path']})")
    else:
        lines.append(f"nvrtc:    not usable: {nvrtc['reason']}")
    user = info["user_cache"]
    if user is None:
        lines.append("user cache: none (set SHAPEJIT_CACHE_DIR or HOME)")
    else:
        lines.append(f"user cache: {user['path']} ({user['entries']} entries, {user['bytes']} bytes)")
        lines.append(f"cache cap:  {info['cache_max_bytes'] >> 20} MiB")
    for c in info["deployment_caches"]:
        lines.append(f"deployment: {c['path']} ({c['entries']} entries, {c['bytes']} bytes)")
    lines.append(f"offline:  {'yes (NVRTC is never called)' if info['offline'] else 'no'}")
    lines.append(f"record:   {info['record_file'] or 'off'}")
    c = info["counters"]
    lines.append("counters: " + " ".join(f"{k}={v}" for k, v in c.items()))
    return "\n".join(lines)


def doctor(*, print_report: bool = True) -> dict[str, Any]:
    """What ``shapejit doctor`` reports: version, driver and devices, NVRTC, caches, offline and
    record modes, counters. Prints it (unless ``print_report`` is False) and returns it as a dict.
    Works without a GPU."""
    info = _ext.doctor_info()
    if print_report:
        print(_doctor_text(info))
    return info
