"""The AMQP 0-9-1 subset carbon speaks, as a table, turned into a txAMQP spec.

txAMQP builds its frame codec and channel methods from a protocol spec but ships
none; ``load_spec()`` writes one from the table below (classes, methods, field
names and types, and which reply each synchronous method waits for) and hands it
to ``txamqp.spec.load_string``. It covers the classes carbon uses: connection,
channel, exchange, queue, basic and RabbitMQ's confirm extension.

Field tables travel as txAMQP ``longstr`` values (the ``table`` domain below): a
table on the wire is a long string of its encoded fields, and txAMQP's own table
codec knows only a few field types, so ``carbon.amqp.fields`` encodes them.
"""

from __future__ import annotations

from typing import Any
from xml.sax.saxutils import quoteattr

import txamqp.spec

Fields = tuple[tuple[str, str], ...]
# name, index, replies it waits for, carries content, fields (name, type)
MethodRow = tuple[str, int, tuple[str, ...], bool, Fields]

CLOSE_FIELDS: Fields = (("reply-code", "short"), ("reply-text", "shortstr"),
                        ("class-id", "short"), ("method-id", "short"))

CLASSES: tuple[tuple[str, int, Fields, tuple[MethodRow, ...]], ...] = (
    ("connection", 10, (), (
        ("start", 10, ("start-ok",), False, (
            ("version-major", "octet"), ("version-minor", "octet"),
            ("server-properties", "table"), ("mechanisms", "longstr"),
            ("locales", "longstr"))),
        ("start-ok", 11, (), False, (
            ("client-properties", "table"), ("mechanism", "shortstr"),
            ("response", "longstr"), ("locale", "shortstr"))),
        ("secure", 20, ("secure-ok",), False, (("challenge", "longstr"),)),
        ("secure-ok", 21, (), False, (("response", "longstr"),)),
        ("tune", 30, ("tune-ok",), False, (
            ("channel-max", "short"), ("frame-max", "long"), ("heartbeat", "short"))),
        ("tune-ok", 31, (), False, (
            ("channel-max", "short"), ("frame-max", "long"), ("heartbeat", "short"))),
        ("open", 40, ("open-ok",), False, (
            ("virtual-host", "shortstr"), ("reserved-1", "shortstr"), ("reserved-2", "bit"))),
        ("open-ok", 41, (), False, (("reserved-1", "shortstr"),)),
        ("close", 50, ("close-ok",), False, CLOSE_FIELDS),
        ("close-ok", 51, (), False, ()),
        ("blocked", 60, (), False, (("reason", "shortstr"),)),
        ("unblocked", 61, (), False, ()),
    )),
    ("channel", 20, (), (
        ("open", 10, ("open-ok",), False, (("reserved-1", "shortstr"),)),
        ("open-ok", 11, (), False, (("reserved-1", "longstr"),)),
        ("flow", 20, ("flow-ok",), False, (("active", "bit"),)),
        ("flow-ok", 21, (), False, (("active", "bit"),)),
        ("close", 40, ("close-ok",), False, CLOSE_FIELDS),
        ("close-ok", 41, (), False, ()),
    )),
    ("exchange", 40, (), (
        ("declare", 10, ("declare-ok",), False, (
            ("reserved-1", "short"), ("exchange", "shortstr"), ("type", "shortstr"),
            ("passive", "bit"), ("durable", "bit"), ("auto-delete", "bit"),
            ("internal", "bit"), ("no-wait", "bit"), ("arguments", "table"))),
        ("declare-ok", 11, (), False, ()),
    )),
    ("queue", 50, (), (
        ("declare", 10, ("declare-ok",), False, (
            ("reserved-1", "short"), ("queue", "shortstr"), ("passive", "bit"),
            ("durable", "bit"), ("exclusive", "bit"), ("auto-delete", "bit"),
            ("no-wait", "bit"), ("arguments", "table"))),
        ("declare-ok", 11, (), False, (
            ("queue", "shortstr"), ("message-count", "long"), ("consumer-count", "long"))),
        ("bind", 20, ("bind-ok",), False, (
            ("reserved-1", "short"), ("queue", "shortstr"), ("exchange", "shortstr"),
            ("routing-key", "shortstr"), ("no-wait", "bit"), ("arguments", "table"))),
        ("bind-ok", 21, (), False, ()),
        ("delete", 40, ("delete-ok",), False, (
            ("reserved-1", "short"), ("queue", "shortstr"), ("if-unused", "bit"),
            ("if-empty", "bit"), ("no-wait", "bit"))),
        ("delete-ok", 41, (), False, (("message-count", "long"),)),
    )),
    ("basic", 60, (
        ("content-type", "shortstr"), ("content-encoding", "shortstr"), ("headers", "table"),
        ("delivery-mode", "octet"), ("priority", "octet"), ("correlation-id", "shortstr"),
        ("reply-to", "shortstr"), ("expiration", "shortstr"), ("message-id", "shortstr"),
        ("timestamp", "timestamp"), ("type", "shortstr"), ("user-id", "shortstr"),
        ("app-id", "shortstr"), ("cluster-id", "shortstr"),
    ), (
        ("qos", 10, ("qos-ok",), False, (
            ("prefetch-size", "long"), ("prefetch-count", "short"), ("global", "bit"))),
        ("qos-ok", 11, (), False, ()),
        ("consume", 20, ("consume-ok",), False, (
            ("reserved-1", "short"), ("queue", "shortstr"), ("consumer-tag", "shortstr"),
            ("no-local", "bit"), ("no-ack", "bit"), ("exclusive", "bit"), ("no-wait", "bit"),
            ("arguments", "table"))),
        ("consume-ok", 21, (), False, (("consumer-tag", "shortstr"),)),
        ("cancel", 30, ("cancel-ok",), False, (("consumer-tag", "shortstr"), ("no-wait", "bit"))),
        ("cancel-ok", 31, (), False, (("consumer-tag", "shortstr"),)),
        ("publish", 40, (), True, (
            ("reserved-1", "short"), ("exchange", "shortstr"), ("routing-key", "shortstr"),
            ("mandatory", "bit"), ("immediate", "bit"))),
        ("return", 50, (), True, (
            ("reply-code", "short"), ("reply-text", "shortstr"), ("exchange", "shortstr"),
            ("routing-key", "shortstr"))),
        ("deliver", 60, (), True, (
            ("consumer-tag", "shortstr"), ("delivery-tag", "longlong"),
            ("redelivered", "bit"), ("exchange", "shortstr"), ("routing-key", "shortstr"))),
        ("ack", 80, (), False, (("delivery-tag", "longlong"), ("multiple", "bit"))),
        ("reject", 90, (), False, (("delivery-tag", "longlong"), ("requeue", "bit"))),
        ("nack", 120, (), False, (
            ("delivery-tag", "longlong"), ("multiple", "bit"), ("requeue", "bit"))),
    )),
    ("confirm", 85, (), (
        ("select", 10, ("select-ok",), False, (("nowait", "bit"),)),
        ("select-ok", 11, (), False, ()),
    )),
)

# Frame types and the frame-end octet, under the names txAMQP looks them up by.
CONSTANTS = (("frame-method", 1), ("frame-header", 2), ("frame-body", 3),
             ("frame-heartbeat", 8), ("frame-min-size", 4096), ("frame-end", 206),
             ("reply-success", 200))


def _fields(fields: Fields) -> str:
    return "".join("<field name=%s type=%s/>" % (quoteattr(name), quoteattr(kind))
                   for name, kind in fields)


def spec_xml() -> str:
    """The table as txAMQP's spec XML."""
    out = ['<?xml version="1.0"?>', '<amqp major="0" minor="9" revision="1" port="5672">']
    out += ['<constant name="%s" value="%d"/>' % item for item in CONSTANTS]
    out.append('<domain name="table" type="longstr"/>')
    for klass, index, properties, methods in CLASSES:
        out.append('<class name="%s" index="%d" handler="%s">%s' % (
            klass, index, klass, _fields(properties)))
        for name, method_index, replies, content, fields in methods:
            # The element's text becomes the generated method's docstring.
            out.append('<method name="%s" index="%d" content="%d" synchronous="%d">%s.%s%s%s'
                       '</method>' % (
                           name, method_index, content, bool(replies), klass, name,
                           "".join('<response name="%s"/>' % reply for reply in replies),
                           _fields(fields)))
        out.append("</class>")
    out.append("</amqp>")
    return "\n".join(out)


def load_spec() -> Any:
    """A txAMQP spec of the table (build it once per client factory)."""
    return txamqp.spec.load_string(spec_xml(), specfilename="carbon-amqp0-9-1")
