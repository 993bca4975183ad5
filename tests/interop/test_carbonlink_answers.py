"""Every carbonlink answer, with cached points in every state, is loaded by graphite-web
1.1.10's own unpickler (its carbonlink client refuses any class but a few of its own)."""

from __future__ import annotations

import pickle
import pickletools
from pathlib import Path

from carbon.carbonlink.server import CarbonLinkConfig, CarbonLinkHandler
from tests.writer.test_writer_creator import NOW, Harness
from tests.interop.reference import reference_unpickle

# Opcodes that name or build a class: a plain answer has none of them.
CLASS_OPCODES = {"GLOBAL", "STACK_GLOBAL", "REDUCE", "BUILD", "NEWOBJ", "NEWOBJ_EX", "INST",
                 "OBJ", "EXT1", "EXT2", "EXT4"}


def points(count: int, base: float = 0.0, start: int = NOW - 3600) -> list[tuple[float, float]]:
    return [(float(start + 60 * k), base + k) for k in range(count)]


def last_wins(sent: list[tuple[float, float]]) -> list[tuple[float, float]]:
    return sorted(dict(sent).items())


def has_points(answer: dict) -> bool:
    lists = [answer.get("datapoints", [])] + list(answer.get("datapointsByMetric", {}).values())
    return any(lists)


def collect_answers(h: Harness) -> list[tuple[str, dict, object]]:
    """(state, request, expected answer or None for an error) through the cache states a
    running carbon-cache goes through."""
    handler = CarbonLinkHandler(h.cache, h.database, CarbonLinkConfig.from_settings(h.settings),
                                h.stats, h.log)
    sent: dict[str, list[tuple[float, float]]] = {}
    answers: list[tuple[str, dict, object]] = []

    def add(metric: str, pts: list[tuple[float, float]]) -> None:
        h.cache.add_batch([(metric, t, v) for t, v in pts])
        sent.setdefault(metric, []).extend(pts)

    def ask(state: str, metrics: list[str]) -> None:
        for metric in metrics:
            request = {"type": "cache-query", "metric": metric}
            answers.append((state, request, handler.respond(request),
                            {"datapoints": last_wins(sent.get(metric, []))}))
        request = {"type": "cache-query-bulk", "metrics": metrics + ["state.unknown"]}
        expected = {m: last_wins(sent.get(m, [])) for m in metrics + ["state.unknown"]}
        answers.append((state, request, handler.respond(request),
                        {"datapointsByMetric": expected}))

    # waiting for its file: the writer handed it to the creator, which has not run yet
    add("state.creating", points(30))
    assert h.writer.write_some(1) and h.writer.creator.busy == {"state.creating"}
    ask("waiting for create", ["state.creating"])
    add("state.ordered", points(30, 1.5))
    add("state.shuffled", points(30, 2.5)[::-1])
    dupes = points(10, 3.0)
    add("state.dupes", dupes + [(dupes[4][0], -7.25), (dupes[4][0], 8.125)] + points(5, 9.0))
    ask("time-ordered, out of order, duplicates",
        ["state.ordered", "state.shuffled", "state.dupes"])
    # popped by a writer thread (not yet on disk), with newer points arriving meanwhile
    add("state.popped", points(20, 4.0))
    h.cache.pop_raw_for_write(["state.popped"])
    add("state.popped", points(3, 40.0, start=NOW - 300))
    ask("popped for writing", ["state.popped", "state.ordered"])
    h.cache.restore_raw("state.popped", h.cache.writing["state.popped"])
    h.cache.written("state.popped")
    assert h.writer.drain(timeout=60)
    sent.clear()
    ask("after a drain", ["state.ordered", "state.creating", "state.popped"])
    add("state.ordered", points(2, 5.0, start=NOW - 120))
    ask("new points after a drain", ["state.ordered"])
    metadata = [({"type": "get-metadata", "metric": "state.ordered", "key": "aggregationMethod"},
                 {"value": "average"}),
                ({"type": "set-metadata", "metric": "state.ordered", "key": "aggregationMethod",
                  "value": "max"}, {"old_value": "average", "new_value": "max"}),
                ({"type": "get-metadata", "metric": "state.ordered", "key": "aggregationMethod"},
                 {"value": "max"}),
                ({"type": "get-metadata", "metric": "state.none", "key": "aggregationMethod"},
                 None),
                ({"type": "set-metadata", "metric": "state.ordered", "key": "nope",
                  "value": 1}, None),
                ({"type": "nope"}, {"error": 'Invalid request type "nope"'}),
                ({"metric": "no type"}, {"error": "Invalid request"})]
    for request, expected in metadata:
        answers.append(("metadata and errors", request, handler.respond(request), expected))
    return answers


def test_every_answer_is_plain_and_graphite_web_loads_it(tmp_path: Path) -> None:
    h = Harness(tmp_path / "cache", LOG_CREATES=False)
    try:
        answers = collect_answers(h)
    finally:
        h.close()
    assert len(answers) >= 20
    for state, request, payload, expected in answers:
        opcodes = {op.name for op, _arg, _pos in pickletools.genops(payload)}
        assert not opcodes & CLASS_OPCODES, (state, request, opcodes & CLASS_OPCODES)
        loaded = pickle.loads(payload)
        if expected is None:
            assert list(loaded) == ["error"] and isinstance(loaded["error"], str), loaded
        else:
            assert loaded == expected, (state, request)
    # at least one answer of each cache state carried points (the test is not vacuous)
    carrying = {state for state, _r, payload, _e in answers if has_points(pickle.loads(payload))}
    assert {"waiting for create", "popped for writing",
            "time-ordered, out of order, duplicates"} <= carrying
    # graphite-web 1.1.10's unpickler, in its own venv, loads every one of them alike
    loaded_by_reference = reference_unpickle(tmp_path / "gw", [a[2] for a in answers])
    for (state, request, payload, _expected), (status, text) in zip(
            answers, loaded_by_reference, strict=True):
        assert status == "ok", (state, request, text)
        assert text == repr(pickle.loads(payload)), (state, request)
