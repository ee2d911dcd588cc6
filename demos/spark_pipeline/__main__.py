"""``python -m demos.spark_pipeline``: run the Spark pipeline demo."""

from __future__ import annotations

import sys

from .run import main

sys.exit(main())
