"""pytest plugin of ``viewreplay run-aotdispatch``: keep only the tests listed in the subset.

Loaded with ``-p viewreplay.aotdispatch_plugin`` in the interpreter under test; reads the selection
(a JSON list of ``[class, method, variant prefix or null]``) from ``$VIEWREPLAY_AOTDISPATCH_SELECTION``.
Needs nothing but the standard library and pytest.
"""

from __future__ import annotations

import json
import os


def _selected(cls: str, name: str, wanted: list[list[object]]) -> bool:
    for want_cls, want_name, prefix in wanted:
        if cls == want_cls and (name == want_name or (prefix and name.startswith(prefix))):
            return True
    return False


def pytest_collection_modifyitems(config, items):  # noqa: ANN001 - pytest hook
    path = os.environ.get("VIEWREPLAY_AOTDISPATCH_SELECTION")
    if not path:
        return
    with open(path, encoding="utf-8") as handle:
        wanted = json.load(handle)
    keep, drop = [], []
    for item in items:
        cls = getattr(item, "cls", None)
        (keep if cls is not None and _selected(cls.__name__, item.name, wanted) else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep
