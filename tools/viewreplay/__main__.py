"""Allow ``python -m viewreplay``."""

import sys

from viewreplay.cli import main

sys.exit(main())
