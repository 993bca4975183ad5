"""rewrite-rules.conf: regex search-and-replace of metric names.

The file has sections such as ``[pre]`` (applied to received names before
aggregation) and ``[post]`` (applied to points that pass the aggregate stage;
in carbon 1.1.10 the aggregates themselves skip it). Each rule is
``regex = replacement`` split at the first ``=``, both sides stripped, applied
in file order with Python's ``re.sub`` (so ``\\1`` and ``\\g<name>`` work and
every occurrence is replaced). Section names are lower-cased, ``#`` lines and
blank lines are skipped, and, as in the reference, a section heading that
appears again starts that section afresh (only its last block counts).

The reference logs and skips an invalid line; ``parse_rewrite_rules`` does the
same by default, collecting a ConfigError (file, line, reason) per skipped
line in ``RewriteRules.errors``; ``strict=True`` raises the first one instead.
Invalid replacement templates are caught here too (the reference fails on
the first name they match).
"""

from __future__ import annotations

import functools
import re

from carbon.config.errors import ConfigError
from carbon.config.watched import file_mtime
from carbon.pipeline import Batch, LineBatch, Processor

PRE = "pre"
POST = "post"


class RewriteRule:
    """``regex = replacement``: ``apply(name)`` is ``regex.sub(replacement, name)``."""

    __slots__ = ("pattern", "replacement", "regex")

    def __init__(self, pattern: str, replacement: str) -> None:
        self.pattern = pattern
        self.replacement = replacement
        self.regex = re.compile(pattern)
        self.regex.sub(replacement, "")  # validates the replacement template

    def apply(self, metric: str) -> str:
        return self.regex.sub(self.replacement, metric)

    def __repr__(self) -> str:
        return "RewriteRule(%r = %r)" % (self.pattern, self.replacement)


class RewriteRules:
    """Rules by section, plus the errors of lines that were skipped."""

    def __init__(self, sections: dict[str, list[RewriteRule]] | None = None,
                 errors: list[ConfigError] | None = None, path: str | None = None) -> None:
        self.sections = {k: tuple(v) for k, v in (sections or {}).items()}
        self.errors = list(errors or [])
        self.path = path

    def rules(self, section: str) -> tuple[RewriteRule, ...]:
        return self.sections.get(section, ())

    def apply(self, section: str, metric: str) -> str:
        for rule in self.rules(section):
            metric = rule.regex.sub(rule.replacement, metric)
        return metric


def parse_rewrite_rules(text: str, path: str | None = None, strict: bool = False) -> RewriteRules:
    """Parse the text of a rewrite-rules file (see the module doc for error handling)."""
    sections: dict[str, list[RewriteRule]] = {}
    errors: list[ConfigError] = []
    section: str | None = None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].lower()
            sections[section] = []
            continue
        if "=" not in line:
            error = ConfigError("Invalid syntax: not a section heading or rule: %r" % line,
                                path, lineno)
        elif section is None:
            error = ConfigError("rule %r is outside any section ([pre] or [post])" % line,
                                path, lineno)
        else:
            pattern, replacement = (s.strip() for s in line.split("=", 1))
            try:
                sections[section].append(RewriteRule(pattern, replacement))
                continue
            except re.error as exc:
                error = ConfigError("Invalid regular expression in rewrite rule %r: %s"
                                    % (line, exc), path, lineno)
        if strict:
            raise error
        errors.append(error)
    return RewriteRules(sections, errors, path)


def load_rewrite_rules(path: str, strict: bool = False) -> RewriteRules:
    """Read a rewrite-rules file; a missing file means no rules, as in the reference."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return RewriteRules(path=path)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError("cannot read rewrite rules: %s" % exc, path) from None
    return parse_rewrite_rules(text, path, strict)


class RewriteRulesFile:
    """Polls a rewrite-rules file's mtime; ``check()`` reloads it when it changes.

    Returns the ConfigErrors to log (skipped lines, or an unreadable file, in
    which case the old rules stay).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._mtime = file_mtime(path)
        self.rules = load_rewrite_rules(path)

    def check(self, force: bool = False) -> tuple[bool, list[ConfigError]]:
        """(rules were replaced, errors to log); ``force`` (SIGHUP) reads the file
        whatever its mtime and replaces the rules only when they differ."""
        mtime = file_mtime(self.path)
        if mtime == self._mtime and not force:
            return False, []
        self._mtime = mtime
        try:
            rules = load_rewrite_rules(self.path)
        except ConfigError as exc:
            return False, [exc]
        if force and _meaning(rules) == _meaning(self.rules):
            return False, []
        self.rules = rules
        return True, list(self.rules.errors)


def _meaning(rules: RewriteRules) -> dict[str, list[tuple[str, str]]]:
    return {section: [(rule.pattern, rule.replacement) for rule in items]
            for section, items in rules.sections.items()}


class RewriteProcessor(Processor):
    """Pipeline processor applying one section's rules to every name in a batch.

    Rewritten names are cached in a bounded LRU (names repeat every interval).
    """

    handles_lines = True

    def __init__(self, rules: RewriteRules, section: str, cache_size: int = 100000) -> None:
        self.section = section
        self.cache_size = cache_size
        self.set_rules(rules)

    def set_rules(self, rules: RewriteRules) -> None:
        """Switch to reloaded rules (clears the name cache)."""
        self.rules = rules
        self._rules = rules.rules(self.section)
        self.rewrite = functools.lru_cache(maxsize=max(0, self.cache_size))(self._rewrite)

    def _rewrite(self, metric: str) -> str:
        for rule in self._rules:
            metric = rule.regex.sub(rule.replacement, metric)
        return metric

    # ``rewrite(metric)`` (set by set_rules): the cached rewritten form of one name.

    @property
    def passes_chunks(self) -> bool:
        """No rules for this section: whole reads pass untouched (``Pipeline.process_chunk``)."""
        return not self._rules

    def process_lines(self, batch: LineBatch) -> Batch | LineBatch:
        """Lines pass unchanged without rules; else the tuple form is rewritten."""
        if not self._rules:
            return batch
        return self.process(batch.points())

    def process(self, batch: Batch) -> Batch:
        if not self._rules:
            return batch
        rewrite = self.rewrite
        out = []
        for point in batch:
            metric = point[0]
            new = rewrite(metric)
            out.append(point if new == metric else (new, point[1], point[2]))
        return out
