"""``python -m libs.gpuctl``: the same as the ``gpuctl`` console script."""

from __future__ import annotations

import sys

from libs.gpuctl.app import main

sys.exit(main())
