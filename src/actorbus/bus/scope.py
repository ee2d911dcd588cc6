"""Feed scope, feed state and the scope matching table.

Every feed in a router belongs to one of five *categories*: a local feed of
scope LOCAL_ONLY, LOCAL_AND_REMOTE or REMOTE_ONLY, a feed that arrived from a
remote peer (a proxy, which acts as a local & remote feed here), or a proxy
that arrived over a *forwarding* link (``forward`` in the link settings; see
docs/routing.md).  Two feeds can see each other when :data:`MATCH` says so:

================  ==========  ===============  ===========  ===========  =========
                  local only  local & remote   remote only  from remote  forwarded
================  ==========  ===============  ===========  ===========  =========
local only        match       match            no           no           no
local & remote    match       match            match        match        match
remote only       no          match            no           match        match
from remote       no          match            match        no           no
forwarded         no          match            match        no           policy
================  ==========  ===============  ===========  ===========  =========

The first three columns are the scope table of docs/bus.md, cell by cell.
The "from remote" column is how "a feed that arrives from a remote peer acts
as a local & remote feed there" is applied, with one deliberate refinement: a
LOCAL_ONLY feed never matches a remote one (that is what *local only*
promises), and two proxies of ordinary (non-forwarding) links never match each
other (such a node does not forward between its links).  Two proxies of
forwarding links match under the routing policy of :mod:`.routing`: never two
of the same peer (split horizon), and only over the links the forwarding tree
keeps (so no frame circulates).
"""

from __future__ import annotations

import enum

__all__ = ["CAT_FORWARD", "CAT_REMOTE", "MATCH", "FeedState", "Scope"]


class FeedState(enum.Enum):
    """Whether a feed is up (someone is there / the source is live) or down."""

    DOWN = 0
    UP = 1

    @property
    def is_up(self) -> bool:
        return self is FeedState.UP

    def __bool__(self) -> bool:
        return self is FeedState.UP


class Scope(enum.IntEnum):
    """Which other feeds a feed may match (see the module table)."""

    LOCAL_ONLY = 0
    LOCAL_AND_REMOTE = 1
    REMOTE_ONLY = 2

    @property
    def remote_capable(self) -> bool:
        """True when the feed is visible to remote peers."""
        return self is not Scope.LOCAL_ONLY


#: category of a proxy feed that stands for a remote peer's feed.
CAT_REMOTE = 3
#: category of a proxy feed of a forwarding link (see :mod:`.routing`).
CAT_FORWARD = 4

#: MATCH[a][b]: a feed of category a matches a feed of category b.
MATCH: tuple[tuple[bool, bool, bool, bool, bool], ...] = (
    (True, True, False, False, False),  # local only
    (True, True, True, True, True),  # local & remote
    (False, True, False, True, True),  # remote only
    (False, True, True, False, False),  # from remote
    (False, True, True, False, True),  # forwarded (two of one peer never: split horizon)
)

#: how many categories there are
CATEGORIES = len(MATCH)

#: for each category, the categories it matches (precomputed for the router).
MATCHING: tuple[tuple[int, ...], ...] = tuple(
    tuple(b for b in range(CATEGORIES) if MATCH[a][b]) for a in range(CATEGORIES)
)
