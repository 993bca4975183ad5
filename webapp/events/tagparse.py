"""Tag strings as django-tagging 0.4.3 (graphite-web's events) reads them.

An event's ``tags`` column holds the text it was posted with; django-tagging turns it
into tag names with :func:`parse_tag_input` (space separated, or comma separated once
a loose comma appears; double quotes group words). Names are case-sensitive, as with
graphite-web's default SQLite database.
"""

from __future__ import annotations


def split_strip(text: str, delimiter: str = ',') -> list[str]:
    """``text`` split on ``delimiter``, each piece stripped, empty pieces dropped."""
    words = (w.strip() for w in text.split(delimiter))
    return [w for w in words if w]


def parse_tag_input(text: str | None) -> list[str]:
    """The sorted, unique tag names in ``text`` (django-tagging's parser)."""
    if not text:
        return []
    if ',' not in text and '"' not in text:
        return sorted(set(split_strip(text, ' ')))
    words: list[str] = []
    unquoted: list[str] = []
    buffer: list[str] = []
    loose_comma = False
    in_quote = False
    chars = iter(text)
    for c in chars:
        if c != '"':
            loose_comma = loose_comma or c == ','
            buffer.append(c)
            continue
        if buffer:
            unquoted.append(''.join(buffer))
            buffer = []
        in_quote = True
        for q in chars:
            if q == '"':
                in_quote = False
                break
            buffer.append(q)
        if in_quote:               # unterminated quote: the rest is unquoted text
            break
        word = ''.join(buffer).strip()
        if word:
            words.append(word)
        buffer = []
    if buffer:
        if in_quote and ',' in buffer:
            loose_comma = True
        unquoted.append(''.join(buffer))
    delimiter = ',' if loose_comma else ' '
    for chunk in unquoted:
        words.extend(split_strip(chunk, delimiter))
    return sorted(set(words))
