"""A node that only listens, logging at INFO to stderr: the victim of the
connection-flood tests.

Usage: ``python victim_node.py NODE_ID``.  Listens on a free loopback port,
prints ``PORT <port>``, and runs until its stdin closes; then prints
``COUNTERS <accepted> <open links> <auth failures>`` and closes its bus (which says how many
log lines each kind held back).
"""

from __future__ import annotations

import sys

from actorbus import Bus, enable_logging


def main() -> int:
    enable_logging("INFO")
    with Bus(node_id=sys.argv[1]) as bus:
        service = bus.listen(0)
        print(f"PORT {service.port}", flush=True)
        sys.stdin.read()
        counters = service.counters
        print(
            f"COUNTERS {counters.accepted} {counters.open_links} {counters.auth_failures}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
