"""The Store: the local whisper finder plus every cluster server, queried in parallel.

Remote hosts run in worker threads while the local finder runs in the caller's thread;
a host that fails or misses its deadline (FIND_TIMEOUT / FETCH_TIMEOUT) is logged and
its name appended to ``context['failedHosts']`` (the app reports it in a response
header) instead of failing the request. Series with the same name from several
sources are merged point by point, finest step first, so a local file never hides
data a remote copy has.
"""

from __future__ import annotations

import logging
import socket
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, Callable, Optional

from webapp.cpu_gate import NO_GATE
from webapp.storage.nodes import Node
from webapp.storage.packed import to_list
from webapp.storage.remote import RemoteFinder

log = logging.getLogger("webapp.storage")


class FindLimitError(ValueError):
    """A find matched more leaves than METRICS_FIND_FAILURE_THRESHOLD."""


def merge_results(first: tuple, second: tuple) -> tuple:
    """Merge two ((start, end, step), values): finer step wins, gaps filled from the other."""
    (s1, e1, st1), v1 = first
    (s2, e2, st2), v2 = second
    v1, v2 = to_list(v1), to_list(v2)
    if (s1, e1, st1) == (s2, e2, st2) and len(v1) == len(v2):
        return first[0], [a if a is not None else b for a, b in zip(v1, v2, strict=False)]
    if st1 > st2:
        (s1, e1, st1), v1, (s2, e2, st2), v2 = (s2, e2, st2), v2, (s1, e1, st1), v1
    start, end, step = min(s1, s2), max(e1, e2), st1
    values = []
    n1, n2 = len(v1), len(v2)
    for t in range(start, end, step):
        i = (t - s1) // st1
        value = v1[i] if 0 <= i < n1 else None
        if value is None:
            j = (t - s2) // st2
            value = v2[j] if 0 <= j < n2 else None
        values.append(value)
    return (start, end, step), values


def is_local_interface(host: str) -> bool:
    """True when ``host`` (``name[:port]``) names an address of this machine."""
    name = host.rsplit(':', 1)[0].strip('[]') if host.count(':') <= 1 or ']' in host else host
    family = socket.AF_INET6 if ':' in name else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM)
    try:
        sock.bind((name, 0))
    except OSError:
        return False
    finally:
        sock.close()
    return True


def make_remotes(settings: Any, reuse: Optional[list[RemoteFinder]] = None
                 ) -> list[RemoteFinder]:
    """A RemoteFinder per CLUSTER_SERVERS entry (local ones left out under
    REMOTE_EXCLUDE_LOCAL); a finder in ``reuse`` for the same host is kept as it is."""
    known = {finder.host: finder for finder in reuse or ()}
    remotes = []
    for host in settings.CLUSTER_SERVERS:
        finder = RemoteFinder(host, settings)
        if settings.REMOTE_EXCLUDE_LOCAL and is_local_interface(finder.host):
            continue
        remotes.append(known.get(finder.host, finder))
    return remotes


class Store:
    """Finds, fetches, indexes and tag look-ups over all configured sources."""

    def __init__(self, settings: Any, local_finder: Any, tagdb: Any = None,
                 remotes: Optional[list[RemoteFinder]] = None, events: Any = None) -> None:
        self.settings = settings
        self.local_finder = local_finder
        self.tagdb = tagdb
        self.events = events  # webapp.events.store.EventStore, or None
        self.remotes = make_remotes(settings) if remotes is None else remotes
        self.gate = NO_GATE  # the app's CpuGate: released while waiting on remotes
        self.executor = ThreadPoolExecutor(max_workers=max(2, int(settings.POOL_MAX_WORKERS)),
                                           thread_name_prefix='store')

    def close(self) -> None:
        self.executor.shutdown(wait=False)

    def _parallel(self, remote_call: Callable[[RemoteFinder], Any],
                  local_call: Optional[Callable[[], Any]], timeout: float,
                  context: dict[str, Any], local_only: bool, what: str) -> list[Any]:
        """Results of ``local_call`` (first) and ``remote_call`` on each usable remote."""
        failed = context.setdefault('failedHosts', [])
        futures: list[tuple[RemoteFinder, Future]] = []
        if not local_only:
            for remote in self.remotes:
                if remote.disabled:
                    log.info("%s: skipping %s (failed recently)", what, remote.host)
                    failed.append(remote.host)
                    continue
                futures.append((remote, self.executor.submit(remote_call, remote)))
        deadline = time.monotonic() + timeout
        results = []
        if local_call is not None:
            results.append(local_call())
        if futures:
            with self.gate.released():
                wait([f for _, f in futures], timeout=max(0.0, deadline - time.monotonic()))
        for remote, fut in futures:
            if not fut.done():
                log.warning("%s: %s gave no answer within %.3fs", what, remote.host, timeout)
                remote.fail()
                failed.append(remote.host)
                continue
            err = fut.exception()
            if err is not None:
                log.warning("%s: %s failed: %s", what, remote.host, err)
                failed.append(remote.host)
                continue
            results.append(fut.result())
        return results

    # --- find ------------------------------------------------------------------------------
    def find(self, pattern: str, start: Optional[int] = None, end: Optional[int] = None,
             local: bool = False, leaves_only: bool = False,
             context: Optional[dict[str, Any]] = None) -> list[Node]:
        """Nodes matching ``pattern`` from every source; one node per (path, kind)."""
        context = context if context is not None else {}
        headers = context.get('forwardHeaders')
        results = self._parallel(
            lambda r: r.find_nodes(pattern, start, end, headers),
            lambda: self.local_finder.find_nodes(pattern, leaves_only),
            self.settings.FIND_TIMEOUT, context, local, 'find %s' % pattern)
        merged: dict[tuple[str, bool], Node] = {}
        for nodes in results:
            for node in nodes:
                if leaves_only and not node.is_leaf:
                    continue
                key = (node.path, node.is_leaf)
                if key in merged:
                    merged[key].merge(node)
                else:
                    merged[key] = node
        leaves = sum(1 for n in merged.values() if n.is_leaf)
        if leaves > self.settings.METRICS_FIND_FAILURE_THRESHOLD:
            raise FindLimitError("Query %s yields too many results and failed (failure "
                                 "threshold is %d)" % (pattern,
                                                       self.settings.METRICS_FIND_FAILURE_THRESHOLD))
        if leaves > self.settings.METRICS_FIND_WARNING_THRESHOLD:
            log.warning("Query %s yields large number of results up to %d", pattern, leaves)
        return list(merged.values())

    # --- fetch -----------------------------------------------------------------------------
    def fetch(self, patterns: list[str], start: int, end: int, now: Optional[int],
              context: dict[str, Any]) -> list[dict[str, Any]]:
        """Series for every pattern (and ``seriesByTag(...)`` call text), merged by name."""
        patterns = sorted(set(patterns))
        if not patterns:
            return []
        local_only = bool(context.get('localOnly'))
        resolved, aliases = self._tag_patterns(patterns, context)

        def local() -> list[dict[str, Any]]:
            return self.local_finder.fetch(resolved, start, end, now, context) if resolved \
                else []
        results = self._parallel(lambda r: r.fetch(patterns, start, end, now, context), local,
                                 self.settings.FETCH_TIMEOUT, context, local_only,
                                 'fetch %s' % ', '.join(patterns))
        if len(results) == 1 and not aliases:
            return results[0]    # one source: its (pathExpression, name) pairs are distinct
        merged: dict[tuple[str, str], dict[str, Any]] = {}
        for batch in results:
            for result in batch:
                expanded = [result]
                if result['name'] == result['pathExpression'] and \
                        result['pathExpression'] in aliases:
                    expanded += [dict(result, pathExpression=alias)
                                 for alias in aliases[result['pathExpression']]]
                for item in expanded:
                    key = (item['pathExpression'], item['name'])
                    known = merged.get(key)
                    if known is None:
                        merged[key] = item
                    else:
                        known['time_info'], known['values'] = merge_results(
                            (known['time_info'], known['values']),
                            (item['time_info'], item['values']))
        return list(merged.values())

    def _tag_patterns(self, patterns: list[str],
                      context: dict[str, Any]) -> tuple[list[str], dict[str, list[str]]]:
        """Replace ``seriesByTag(...)`` patterns with the series the local TagDB names."""
        resolved: list[str] = []
        aliases: dict[str, list[str]] = {}
        for pattern in patterns:
            if not pattern.startswith('seriesByTag('):
                resolved.append(pattern)
                continue
            if self.tagdb is None:
                continue
            from webapp.render.grammar import Call, Const, parse_target
            node = parse_target(pattern)
            exprs = [a.value for a in node.args if isinstance(a, Const) and a.kind == 'string'] \
                if isinstance(node, Call) else []
            for series in self.tagdb.find_series(exprs):
                aliases.setdefault(series, []).append(pattern)
                resolved.append(series)
        return sorted(set(resolved)), aliases

    # --- index and tags -------------------------------------------------------------------
    def get_index(self, context: dict[str, Any]) -> list[str]:
        results = self._parallel(lambda r: r.get_index(context), self.local_finder.get_index,
                                 self.settings.FIND_TIMEOUT, context,
                                 bool(context.get('localOnly')), 'index')
        return sorted({m for batch in results for m in batch})

    def auto_complete_tags(self, exprs: list[str], tag_prefix: Optional[str],
                           limit: Optional[int], context: dict[str, Any]) -> list[str]:
        limit = int(limit) if limit is not None else int(self.settings.TAGDB_AUTOCOMPLETE_LIMIT)
        local = (lambda: self.tagdb.auto_complete_tags(exprs, tag_prefix, limit)) \
            if self.tagdb is not None else None
        results = self._parallel(
            lambda r: r.auto_complete_tags(exprs, tag_prefix, limit, context) if r.tags else [],
            local, self.settings.FIND_TIMEOUT, context, bool(context.get('localOnly')),
            'autocomplete tags')
        return sorted({t for batch in results for t in batch})[:limit]

    def auto_complete_values(self, exprs: list[str], tag: str, value_prefix: Optional[str],
                             limit: Optional[int], context: dict[str, Any]) -> list[str]:
        limit = int(limit) if limit is not None else int(self.settings.TAGDB_AUTOCOMPLETE_LIMIT)
        local = (lambda: self.tagdb.auto_complete_values(exprs, tag, value_prefix, limit)) \
            if self.tagdb is not None else None
        results = self._parallel(
            lambda r: r.auto_complete_values(exprs, tag, value_prefix, limit, context)
            if r.tags else [],
            local, self.settings.FIND_TIMEOUT, context, bool(context.get('localOnly')),
            'autocomplete values')
        return sorted({v for batch in results for v in batch})[:limit]
