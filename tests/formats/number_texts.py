"""Number texts at the edges of the C number reader (carbon/formats/_number.h): digit
counts around its 8-at-a-time steps and its 19-digit limit, decimals around the fast
path's mantissa bound 2**53 and 10**22, leading zeros, signs, exponents, and texts it
leaves to float() (overflow to the slow path)."""

from __future__ import annotations

from hypothesis import strategies as st

NUMBER_EDGES = [
    # 8, 9, 10, 16, 19, 20 and more digits
    b"12345678", b"99999999", b"123456789", b"1700000000", b"9999999999",
    b"1234567812345678", b"9007199254740993", b"1234567890123456789", b"9999999999999999999",
    b"12345678901234567890", b"18446744073709551615", b"18446744073709551616",
    b"1234567890123456789012345", b"9" * 30, b"1" + b"0" * 400,
    # around 2**63 (the unsigned conversion) and its ties: 2**63 + 1024 is half-way
    b"9223372036854775807", b"9223372036854775808", b"9223372036854776832",
    b"9223372036854776833", b"9223372036854778880", b"9007199254740992999",
    # leading zeros
    b"00000000", b"000000001", b"0000000012345678", b"0000000000000000001",
    b"00000000000000000001", b"0000000000000000001.5", b"000000000000001.5", b"-00000001700000000",
    # signs
    b"+12345678", b"-12345678", b"+1700000000", b"-1700000000", b"+", b"-", b"+-1", b"-+1",
    b"++1", b"--1", b"+.5", b"-.5", b"-0", b"+0", b"-00000000", b"-9999999999999999999",
    # decimals
    b"0.12345678", b"12345678.12345678", b"1234567.12345678", b"0.123456789012345",
    b"0.1234567890123456", b"12345678.", b".12345678", b"123456789012345.", b"1234567812345678.5",
    b"0.7362519846152", b"-0.7362519846152", b"1700000000.5", b"1.2.3", b".", b"-.", b"..5",
    b"12345678.1234567a", b"0.00000000", b"-0.00000000", b"99999999.9999999",
    # not digits inside an 8-byte step: ':' and '/' border '0'-'9'; high bytes
    b"1234567a", b"12345678a", b"1234567:", b"1234567/", b"123456:8", b"1234567\xb0",
    b"\xb01234567", b"12345678 ",
    # exponents
    b"12345678e1", b"1.5e10", b"1E+5", b"12345678E-8", b"1e400", b"-1e400", b"1e-400",
    b"1234567890123456789e0", b"5e",
] + [
    # decimals around 2**53 (the fast path's mantissa bound) with the point in every place
    sign + digits[:point] + b"." + digits[point:] + tail
    for digits in (b"9007199254740991", b"9007199254740992", b"9007199254740993",
                   b"9007199254740994", b"90071992547409921", b"12345678901234567",
                   b"99999999999999999")
    for point in range(len(digits) + 1)
    for sign, tail in ((b"", b""), (b"-", b""), (b"+", b"0"))
] + [
    # leading zeros before significant digits, 10**22 and 10**23 as the divisor
    b"0.0001234567890123456", b"0.00012345678901234567", b"-0.0009007199254740993",
    b"000.9007199254740992", b"0." + b"0" * 6 + b"9007199254740992", b"0." + b"0" * 7 +
    b"9007199254740992", b".0000009007199254740993", b"0.0000000000000000000001",
    b"0.00000000000000000000001", b"0.0000000000000000000000", b"-.0", b"0.",
    b"73.62519846152341", b"-0.7362519846152341", b"99.99999999999999", b"1.0000000000000002",
    b"4503599627370495.5", b"9007199254740992.0", b"9007199254740992.00",
]


@st.composite
def number_text(draw: st.DrawFn) -> bytes:
    """[sign] digits [. digits] [exponent], 0 to 25 digits a part, as bytes."""
    digits = st.text("0123456789", max_size=25)
    text = draw(st.sampled_from(["", "", "-", "+"])) + draw(digits)
    if draw(st.booleans()):
        text += "." + draw(digits)
    if draw(st.integers(0, 4)) == 0:
        text += draw(st.sampled_from(["e", "E"])) + draw(st.sampled_from(["", "-", "+"])) + str(
            draw(st.integers(0, 400)))
    return text.encode()


@st.composite
def float_repr(draw: st.DrawFn) -> bytes:
    """repr of a float of any magnitude from 1e-25 to 1e25 (its shortest round trip, as
    carbon senders write values), with as many significant digits as it needs."""
    mantissa = draw(st.floats(min_value=1.0, max_value=10.0, exclude_max=True))
    value = mantissa * 10.0 ** draw(st.integers(-25, 25))
    return repr(-value if draw(st.booleans()) else value).encode()
