/* Number text as float() reads it, shared by the plaintext parser (_plaintext.c) and the
 * relay's whole-read router (carbon/relay/_route.c). Include after Python.h. */
#ifndef CARBON_NUMBER_H
#define CARBON_NUMBER_H

#include <string.h>

static const double POW10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                               1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* [-]digits[.digits] with at most 15 digits in all: the digits as an integer are exact
 * in a double, and so is 10^k for k <= 22, so one IEEE division is correctly rounded
 * (the fast path of correct decimal conversion) and equals what float() returns.
 * Returns 0 when it applied. */
static int
fast_decimal(const char *s, Py_ssize_t len, double *out)
{
    Py_ssize_t i = 0;
    int negative = 0, digits = 0, fraction = -1;
    long long mantissa = 0;
    if (len > 0 && s[0] == '-') {
        negative = 1;
        i = 1;
    }
    if (i >= len)
        return -1;
    for (; i < len; i++) {
        char c = s[i];
        if (c >= '0' && c <= '9') {
            if (++digits > 15)
                return -1;
            mantissa = mantissa * 10 + (c - '0');
            if (fraction >= 0)
                fraction++;
        }
        else if (c == '.' && fraction < 0)
            fraction = 0;
        else
            return -1;
    }
    if (digits == 0)
        return -1;
    double value = (double)mantissa;
    if (fraction > 0)
        value /= POW10[fraction];
    *out = negative ? -value : value;
    return 0;
}

/* float(text) for text made only of digits, '.', '-', '+', 'e' and 'E' (for such text
 * float() is PyOS_string_to_double of the whole of it). Returns 0 and sets *out; -1
 * when float() would raise ValueError (no exception left set); -2 on another error
 * (set); -3 for other text (the caller asks float() itself). */
static int
simple_to_double(const char *s, Py_ssize_t len, double *out)
{
    char buf[64];
    if (fast_decimal(s, len, out) == 0)
        return 0;
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
    if (value == -1.0 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_ValueError))
            return -2;
        PyErr_Clear();
        return -1;
    }
    if (end != buf + len)
        return -1;
    *out = value;
    return 0;
}

#endif
