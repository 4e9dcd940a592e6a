"""The runtime wrapper's sites call the overlay through a few objects (#35; Note [Runtime fixups]).

``runtime_wrappers.py`` is where the series meets upstream's most rewritten file: each name it
imports from ``view_replay`` is a hook that a rebase must carry. The fixups of the returns and of
the saved tensors are objects built once from the metadata (ReturnFixups, SavedTensorFixups), and
the synthetic-base wrapper's hooks one object (MergedInputs), so a new fixup adds no name here.
Stock torch imports nothing from the overlay (0 names); patched torch at most 10.
"""

from __future__ import annotations

import ast
import inspect

from torch._functorch._aot_autograd import runtime_wrappers
from torch.testing._internal.common_utils import run_tests, TestCase

from view_replay_testing import PATCHED


MAX_OVERLAY_NAMES = 10


def overlay_names() -> list[str]:
    """The names runtime_wrappers.py imports from the view_replay package."""
    tree = ast.parse(inspect.getsource(runtime_wrappers))
    return [
        alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module == "view_replay"
        for alias in node.names
    ]


class TestRuntimeSites(TestCase):
    def test_overlay_names_imported(self) -> None:
        names = overlay_names()
        if PATCHED:
            self.assertIn("ReturnFixups", names)
            self.assertIn("SavedTensorFixups", names)
            self.assertLessEqual(len(names), MAX_OVERLAY_NAMES, names)
        else:
            self.assertEqual(names, [])

    def test_every_imported_name_is_used(self) -> None:
        source = inspect.getsource(runtime_wrappers)
        for name in overlay_names():
            self.assertGreater(source.count(name), 1, f"{name} is imported but not used")


if __name__ == "__main__":
    run_tests()
