"""DYNAMIC_ROUTER: a destination that keeps failing leaves the router, and comes back
once it is up again."""

from __future__ import annotations

from typing import Any, Callable

from carbon.batch import Batch


class DynamicRouting:
    """Takes a destination out of the router after DYNAMIC_ROUTER_MAX_RETRIES failed
    attempts (its queued points are routed to the others through ``reinject``; the last
    destination is kept, so its points spool) and puts it back when it connects."""

    def __init__(self, router: Any, max_retries: int, log: Any,
                 reinject: Callable[[Batch], None]) -> None:
        self.router = router
        self.max_retries = max_retries
        self.log = log
        self.reinject = reinject

    def state_changed(self, client: Any, up: bool) -> None:
        """A DestinationClient's ``state_changed`` hook: it connected (up) or failed."""
        router, dest = self.router, client.destination
        if up:
            if not router.has_destination(dest):
                self.log.clients("Adding client %s:%d:%s to router" % tuple(dest))
                router.add_destination(dest)
            return
        if (client.retries < self.max_retries or not router.has_destination(dest)
                or router.count_destinations() <= 1):
            return
        self.log.clients("Removing client %s:%d:%s to router" % tuple(dest))
        router.remove_destination(dest)
        points = client.take_all()
        self.log.clients("Re-injecting %d metrics from %s" % (len(points), client))
        if points:
            self.reinject(points)
