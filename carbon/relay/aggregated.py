"""aggregated-consistent-hashing and fast-aggregated-hashing: route a metric to where
the aggregates it feeds are computed (or by its own name when it feeds none).

The aggregation rules are any object answering ``get_aggregate_metrics(name)`` (names
or ``(rule, name)`` pairs, as ``carbon.aggregator.rules.RuleSet`` returns), or having a
``rules`` list of objects with ``get_aggregate_metric(name)`` (the reference's
RuleManager), or answering ``get_aggregate_metric(name) -> str | None`` itself. An
object with a ``ruleset`` attribute and a ``check()`` method (``RulesFile``) is
followed as it reloads: ``check_rules()`` polls it and clears the route cache.
"""

from __future__ import annotations

import os
from typing import Any

from carbon.config.errors import ConfigError
from carbon.plugins import ROUTERS
from carbon.relay.destinations import Destination
from carbon.relay.routing import (ConsistentHashingRouter, DatapointRouter, FastHashingRouter,
                                  _configured, _setting)


@ROUTERS.register('aggregated-consistent-hashing')
class AggregatedConsistentHashingRouter(DatapointRouter):
    """RELAY_METHOD = aggregated-consistent-hashing."""

    plugin_name = "aggregated-consistent-hashing"
    rechecks_rules = True  # the reference re-reads aggregation-rules.conf every 10 s
    hash_router_class: type[ConsistentHashingRouter] = ConsistentHashingRouter

    def __init__(self, settings: Any, aggregation_rules: Any = None) -> None:
        super().__init__(settings)
        if aggregation_rules is None:
            aggregation_rules = load_aggregation_rules(settings)
        self.aggregation_rules = aggregation_rules
        self.hash_router = self.hash_router_class(settings)

    @property
    def agg_rules_manager(self) -> Any:
        """The reference's attribute name for the rules (carbonate assigns it)."""
        return self.aggregation_rules

    @agg_rules_manager.setter
    def agg_rules_manager(self, rules: Any) -> None:
        self.aggregation_rules = rules
        self.clear_cache()

    def check_rules(self) -> ConfigError | None:
        """Reload changed aggregation rules (if they can); returns an error to log."""
        # drop-in: agg_rules_manager may be set to carbon 1.1.10's rules object
        check = getattr(self.aggregation_rules, "check", None)
        if check is None:
            return None
        changed, error = check()
        if changed:
            self.clear_cache()
        return error

    def _aggregates(self, metric: str) -> list[str]:
        # drop-in: our RuleSet, its file, or carbon 1.1.10's rules manager
        rules = getattr(self.aggregation_rules, "ruleset", self.aggregation_rules)
        if rules is None:
            return []
        many = getattr(rules, "get_aggregate_metrics", None)  # (the same drop-in objects)
        if many is not None:
            names = [item[1] if isinstance(item, tuple) else item for item in many(metric)]
            return [name for name in names if name is not None]
        rule_list = getattr(rules, "rules", None)  # (the same drop-in objects)
        if rule_list is not None:
            names = [rule.get_aggregate_metric(metric) for rule in rule_list]
            return [name for name in names if name is not None]
        name = rules.get_aggregate_metric(metric)
        return [] if name is None else [name]

    def add_destination(self, destination: tuple) -> None:
        self.hash_router.add_destination(destination)
        self.clear_cache()

    def remove_destination(self, destination: tuple) -> None:
        self.hash_router.remove_destination(destination)
        self.clear_cache()

    def has_destination(self, destination: tuple) -> bool:
        return self.hash_router.has_destination(destination)

    def count_destinations(self) -> int:
        return self.hash_router.count_destinations()

    def compute_destinations(self, metric: str) -> list[Destination]:
        out: list[Destination] = []
        for name in self._aggregates(metric) or [metric]:
            for dest in self.hash_router.compute_destinations(name):
                if dest not in out:
                    out.append(dest)
        return out


@ROUTERS.register('fast-aggregated-hashing')
class FastAggregatedHashingRouter(AggregatedConsistentHashingRouter):
    """RELAY_METHOD = fast-aggregated-hashing."""

    plugin_name = "fast-aggregated-hashing"
    hash_router_class = FastHashingRouter


class _MissingRulesFile:
    """Like the reference, a missing aggregation-rules file means no rules until it
    appears (then it is loaded and followed)."""

    def __init__(self, path: str, cache_size: int) -> None:
        self.path = path
        self.cache_size = cache_size
        self.ruleset: Any = None
        self._file: Any = None

    def check(self) -> tuple[bool, ConfigError | None]:
        if self._file is None:
            if not os.path.exists(self.path):
                return False, None
            from carbon.aggregator.rules import RulesFile
            try:
                self._file = RulesFile(self.path, self.cache_size)
            except ConfigError as exc:
                return False, exc
            self.ruleset = self._file.ruleset
            return True, None
        changed, error = self._file.check()
        self.ruleset = self._file.ruleset
        return changed, error


def load_aggregation_rules(settings: Any) -> Any:
    """The aggregation rules a relay follows: ``settings['aggregation-rules']`` or
    CONF_DIR/AGGREGATION_RULES, reloaded when ``check()`` is called."""
    path = _setting(settings, "aggregation-rules") or os.path.join(
        _setting(settings, "CONF_DIR", "") or "",
        _configured(settings, "AGGREGATION_RULES"))
    cache_size = int(_configured(settings, "AGGREGATION_RULE_CACHE_SIZE") or 0)
    rules = _MissingRulesFile(path, cache_size)
    _, error = rules.check()
    if error is not None:
        raise error
    return rules
