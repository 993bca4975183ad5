"""Length-prefixed frame splitting shared by the pickle receiver and carbonlink."""

from __future__ import annotations

from carbon.formats.pickled import frame, split_frames


def test_complete_frames_and_the_unfinished_rest():
    data = frame(b"one") + frame(b"") + frame(b"three")[:5]
    assert split_frames(data, 100) == ([b"one", b""], frame(b"three")[:5], None)
    assert split_frames(b"\x00\x00", 100) == ([], b"\x00\x00", None)


def test_an_oversized_frame_stops_splitting():
    data = frame(b"ok") + frame(b"x" * 11) + frame(b"after")
    assert split_frames(data, 10) == ([b"ok"], b"", 11)
