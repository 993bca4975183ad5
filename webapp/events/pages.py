"""Small HTML pages for /events (the layout of graphite-web's events.html / event.html)."""

from __future__ import annotations

from datetime import tzinfo
from html import escape

from webapp.events.store import Event

_HEAD = ('<html>\n  <head>\n    <title>%s</title>\n    <style type="text/css">\n'
         '    body { font-family: sans-serif; font-size: 16px; margin: 50px; max-width: 1200px; }\n'
         '    table { border-collapse: collapse; } td, th { border: 1px solid #ccc; '
         'padding: 4px 8px; }\n    </style>\n  </head>\n  <body>\n'
         '    <div id="title" style="text-align:center"><h1>%s</h1></div>\n'
         '    <div class="graphite"><div id="main">\n')
_TAIL = '    </div></div>\n  </body>\n</html>\n'


def display_time(event: Event, tz: tzinfo) -> str:
    """Django's ``H:i:s D d M Y`` in the server's time zone."""
    return event.when.astimezone(tz).strftime('%H:%M:%S %a %d %b %Y')


def list_page(events: list[Event], tz: tzinfo, prefix: str, base_url: str) -> str:
    """The event table, or how to post one when there are none."""
    out = [_HEAD % ('Events', 'graphite events')]
    if events:
        out.append('      <table width=100%>\n'
                   '        <tr><th>when</th><th>what</th><th>tags</th></tr>\n')
        for event in events:
            tags = ', '.join("'%s'" % t for t in event.tags.split())
            out.append('        <tr><td>%s</td><td><a href="%s/events/%d/">%s</a></td>'
                       '<td>[%s]</td></tr>\n'
                       % (escape(display_time(event, tz)), escape(prefix), event.id,
                          escape(event.what), escape(tags)))
        out.append('      </table>\n')
    else:
        example = ('curl -X POST %s/events/ -d \'{"what": "Something Interesting", '
                   '"tags" : "tag1"}\'' % base_url)
        out.append('      <br/>No events. Add events by posting (eg, %s)\n' % escape(example))
    out.append(_TAIL)
    return ''.join(out)


def detail_page(event: Event, tz: tzinfo) -> str:
    """One event: when, tags and data."""
    what = escape(event.what)
    rows = [('when', display_time(event, tz)), ('tags', event.tags), ('data', event.data)]
    body = ''.join('        <tr><td>%s</td><td>%s</td></tr>\n' % (k, escape(v)) for k, v in rows)
    return (_HEAD % (what, what) + '      <table width=100%>\n' + body + '      </table>\n'
            + _TAIL)


def not_found_page() -> str:
    """Django's 404 body (DEBUG off)."""
    return '<h1>Not Found</h1><p>The requested resource was not found on this server.</p>'
