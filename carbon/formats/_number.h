/* Number text as float() reads it, shared by the plaintext parser (_plaintext.c) and the
 * relay's whole-read router (carbon/relay/_route.c). Include after Python.h. */
#ifndef CARBON_NUMBER_H
#define CARBON_NUMBER_H

#include <stdint.h>
#include <string.h>

static const double POW10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                               1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* Eight ASCII digits at s as their value, or -1 if any is not a digit. */
static inline int64_t
eight_digits(const char *s)
{
    uint64_t v;
    memcpy(&v, s, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    if ((v & 0xF0F0F0F0F0F0F0F0ULL) != 0x3030303030303030ULL ||
        ((v + 0x0606060606060606ULL) & 0xF0F0F0F0F0F0F0F0ULL) != 0x3030303030303030ULL)
        return -1;
    v -= 0x3030303030303030ULL; /* the first digit in the low byte */
    v = v * 10 + (v >> 8);
    v = (((v & 0x000000FF000000FFULL) * (100 + (1000000ULL << 32))) +
         (((v >> 16) & 0x000000FF000000FFULL) * (1 + (10000ULL << 32)))) >> 32;
    return (int64_t)(uint32_t)v;
}

/* Digits from s[*i] on (8 at a time, then at most 7 one by one) into *v, at most `room`
 * of them (more returns -1). Returns how many were read and leaves *i after them. */
static inline int
read_digits(const char *s, Py_ssize_t len, Py_ssize_t *i, uint64_t *v, int room)
{
    Py_ssize_t j = *i;
    uint64_t x = *v;
    int64_t eight;
    while (j + 8 <= len && (eight = eight_digits(s + j)) >= 0) {
        if ((j += 8) - *i > room)
            return -1;
        x = x * 100000000u + (uint64_t)eight;
    }
    for (unsigned d; j < len && (d = (unsigned char)s[j] - '0') <= 9; j++)
        x = x * 10 + d; /* fewer than 8 digits: the loop above took every 8 */
    int digits = (int)(j - *i);
    if (digits > room)
        return -1;
    *i = j;
    *v = x;
    return digits;
}

#ifdef __SIZEOF_INT128__
static const uint64_t POW10_U64[] = {
    1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL, 10000000ULL,
    100000000ULL, 1000000000ULL, 10000000000ULL, 100000000000ULL, 1000000000000ULL,
    10000000000000ULL, 100000000000000ULL, 1000000000000000ULL, 10000000000000000ULL,
    100000000000000000ULL, 1000000000000000000ULL, 10000000000000000000ULL};

/* mantissa / 10^fraction correctly rounded (to nearest, ties to even), for
 * 0 < mantissa < 2^64 and 0 <= fraction <= 19: the values a 16-19 digit repr of a double
 * writes when its digits are more than 2^53, which Clinger's fast path cannot take.
 * Exact integer arithmetic: the mantissa shifted to the top of 128 bits, divided by
 * 10^fraction (< 2^64), leaves a quotient of 64-128 bits and a remainder; the quotient
 * is cut to 53 bits, rounded on the first bit cut off with the rest and the remainder
 * as the sticky part. The result is always a normal double (2^-64 .. 2^64), built
 * from its bits. */
static inline double
fraction_to_double(uint64_t mantissa, int fraction)
{
    int shift = 64 + __builtin_clzll(mantissa);
    unsigned __int128 n = (unsigned __int128)mantissa << (shift - 64) << 64;
    uint64_t d = POW10_U64[fraction];
    unsigned __int128 q = n / d;
    int sticky = (uint64_t)(n - q * d) != 0;
    uint64_t hi = (uint64_t)(q >> 64);
    int bits = hi ? 128 - __builtin_clzll(hi) : 64 - __builtin_clzll((uint64_t)q);
    int cut = bits - 53; /* >= 11: the quotient has at least 64 bits */
    uint64_t top = (uint64_t)(q >> cut);
    int half = (int)(q >> (cut - 1)) & 1;
    int below = (q & (((unsigned __int128)1 << (cut - 1)) - 1)) != 0;
    if (half && (below || sticky || (top & 1))) {
        if (++top == (1ULL << 53)) {
            top >>= 1;
            cut++;
        }
    }
    /* value = top x 2^(cut - shift), top in [2^52, 2^53) */
    uint64_t word = ((uint64_t)(cut - shift + 52 + 1023) << 52) | (top & ((1ULL << 52) - 1));
    double value;
    memcpy(&value, &word, sizeof value);
    return value;
}
#endif

/* [+-]digits with at most 19 digits, or [+-]digits[.digits] with at most 19 digits
 * after any leading zeros, as float() reads it: up to 19 digits are exact in a uint64 and
 * its conversion to double is correctly rounded; with a fraction of k <= 22 digits, a
 * mantissa <= 2^53 is exact in a double and so is 10^k, so one IEEE division is correctly
 * rounded (Clinger's fast path); a larger mantissa with at most 19 fraction digits is
 * divided exactly in 128-bit integers (fraction_to_double). Leading zeros
 * of an all-zero integer part and of the fraction add no significant digit. Digits are
 * read 8 at a time. Returns 0 when it applied. */
static inline int
fast_decimal(const char *s, Py_ssize_t len, double *out)
{
    Py_ssize_t i = 0;
    uint64_t mantissa = 0;
    int digits = read_digits(s, len, &i, &mantissa, 19);
    if (i == len && digits > 0) { /* the usual timestamp: digits only */
        *out = (double)mantissa;
        return 0;
    }
    int negative = 0;
    if (i == 0 && len > 1 && (s[0] == '-' || s[0] == '+')) {
        negative = s[0] == '-';
        i = 1;
        digits = read_digits(s, len, &i, &mantissa, 19);
    }
    if (digits < 0)
        return -1;
    double value;
    if (i == len) {
        if (digits == 0)
            return -1;
        value = (double)mantissa;
    }
    else {
        if (s[i] != '.')
            return -1;
        i++;
        int room = 19 - digits, zeros = 0;
        if (mantissa == 0) { /* 0.000123...: the zeros only move the point */
            room = 19;
            while (i < len && s[i] == '0')
                i++, zeros++;
        }
        int fraction = read_digits(s, len, &i, &mantissa, room);
        if (fraction < 0 || i != len || digits + zeros + fraction == 0)
            return -1;
        fraction += zeros;
        if (mantissa <= (1ULL << 53) && fraction <= 22)
            value = (double)mantissa / POW10[fraction];
#ifdef __SIZEOF_INT128__
        else if (fraction <= 19)
            value = fraction_to_double(mantissa, fraction);
#endif
        else
            return -1;
    }
    *out = negative ? -value : value;
    return 0;
}

/* After a conversion that failed with an exception set: -1 when it is float()'s
 * ValueError (cleared: the text is not a number), else -2 (left set). */
static int
not_a_number(void)
{
    if (!PyErr_ExceptionMatches(PyExc_ValueError))
        return -2;
    PyErr_Clear();
    return -1;
}

/* simple_to_double past the fast path: PyOS_string_to_double of the whole text (kept
 * out of line: the callers' loops stay small). */
static __attribute__((noinline)) int
string_to_double(const char *s, Py_ssize_t len, double *out)
{
    char buf[64];
    if (len >= (Py_ssize_t)sizeof(buf))
        return -3;
    for (Py_ssize_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+' || c == 'e' ||
              c == 'E'))
            return -3;
    }
    char *end;
    memcpy(buf, s, len);
    buf[len] = '\0';
    double value = PyOS_string_to_double(buf, &end, NULL);
    if (value == -1.0 && PyErr_Occurred())
        return not_a_number();
    if (end != buf + len)
        return -1;
    *out = value;
    return 0;
}

/* float(text) for text made only of digits, '.', '-', '+', 'e' and 'E' (for such text
 * float() is PyOS_string_to_double of the whole of it). Returns 0 and sets *out; -1
 * when float() would raise ValueError (no exception left set); -2 on another error
 * (set); -3 for other text (the caller asks float() itself). Inline: the fast path
 * costs no call in the callers' per-line loops. */
static inline int
simple_to_double(const char *s, Py_ssize_t len, double *out)
{
    if (fast_decimal(s, len, out) == 0)
        return 0;
    return string_to_double(s, len, out);
}

/* float(text) of one field, exactly: simple_to_double, else float() itself (inf, nan,
 * underscores, exponents past the fast path...). Returns 0 and sets *out, -1 when float()
 * would raise ValueError (no exception left set), or -2 on another error (set). Needs the
 * GIL. */
static inline int
text_to_double(const char *start, Py_ssize_t len, double *out)
{
    int rc = simple_to_double(start, len, out);
    if (rc != -3)
        return rc;
    PyObject *text = PyBytes_FromStringAndSize(start, len);
    if (text == NULL)
        return -2;
    PyObject *number = PyFloat_FromString(text);
    Py_DECREF(text);
    if (number == NULL)
        return not_a_number();
    *out = PyFloat_AS_DOUBLE(number);
    Py_DECREF(number);
    return 0;
}

#endif
