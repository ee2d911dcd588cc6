"""``python -m actorbus``: the ``actorbus`` command (:mod:`actorbus.cli`)."""

import sys

from actorbus.cli import main

sys.exit(main())
