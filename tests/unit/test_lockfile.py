"""`npm install` (what setup runs) leaves package-lock.json as committed: the lock lists every
optional platform package its packages name (npm adds the missing ones on each install, so a lock
without them shows as modified after setup)."""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def missing_optional_entries(lock: dict) -> list[str]:
    packages = lock["packages"]
    missing = []
    for path, meta in packages.items():
        for name in meta.get("optionalDependencies", {}):
            nested = f"{path}/node_modules/{name}" if path else f"node_modules/{name}"
            if nested not in packages and f"node_modules/{name}" not in packages:
                missing.append(f"{name} (optional for {path or 'the project'})")
    return sorted(set(missing))


def test_the_lock_lists_every_optional_platform_package():
    lock = json.loads((REPO / "package-lock.json").read_text())
    assert missing_optional_entries(lock) == []


def test_the_check_sees_a_missing_entry():
    lock = {"packages": {"": {}, "node_modules/a": {"optionalDependencies": {"a-darwin": "1"}}}}
    assert missing_optional_entries(lock) == ["a-darwin (optional for node_modules/a)"]
