/* Plaintext line fields as bytes.split() sees them, shared by the C readers of whole
 * reads (carbon/relay/_route.c, carbon/cache/_journal.c). Include after Python.h. */
#ifndef CARBON_LINES_H
#define CARBON_LINES_H

#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* bytes.split()'s ASCII whitespace */
static const unsigned char SPACE[256] = {[' '] = 1, ['\t'] = 1, ['\n'] = 1, ['\r'] = 1,
                                         ['\x0b'] = 1, ['\x0c'] = 1};
#define is_space(c) (SPACE[(unsigned char)(c)])

/* The first whitespace byte at or after j, or end when none comes before it.  s[end]
 * is a line's '\n' and the buffer holds n bytes: with SSE2, 16 bytes at a time are
 * screened for bytes <= 0x20 (every whitespace byte is one) and only those are
 * looked up. */
static inline Py_ssize_t
find_space(const unsigned char *s, Py_ssize_t j, Py_ssize_t end, Py_ssize_t n)
{
#if defined(__SSE2__)
    const __m128i limit = _mm_set1_epi8(0x20);
    while (j < end && j + 16 <= n) {
        __m128i x = _mm_loadu_si128((const __m128i *)(s + j));
        unsigned mask = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_min_epu8(x, limit), x));
        while (mask) {
            Py_ssize_t p = j + __builtin_ctz(mask);
            if (p >= end)
                return end;
            if (is_space(s[p]))
                return p;
            mask &= mask - 1;
        }
        if (j + 16 >= end)
            return end;
        j += 16;
    }
#endif
    while (j < end && !is_space(s[j]))
        j++;
    return j;
}

/* The whitespace-separated fields of the line s[start:end] (s[end] is its '\n', the
 * buffer holds n bytes) into field/flen: how many (0 for a blank line), or -1 when
 * there are more than three (not a plaintext point). */
static inline int
line_fields(const unsigned char *s, Py_ssize_t start, Py_ssize_t end, Py_ssize_t n,
            const unsigned char *field[3], Py_ssize_t flen[3])
{
    int fields = 0;
    Py_ssize_t j = start;
    while (j < end) {
        while (j < end && is_space(s[j]))
            j++;
        if (j >= end)
            break;
        Py_ssize_t begin = j;
        j = find_space(s, j, end, n);
        if (fields == 3)
            return -1;
        field[fields] = s + begin;
        flen[fields] = j - begin;
        fields++;
    }
    return fields;
}

/* The fields of the line that starts at s[*start] (as line_fields gives them), moving
 * *start past its '\n': how many, or -1 when the read must take the general path (no
 * '\n' ends the line, the line is over max_length when that is > 0, or it has more
 * than three fields). */
static inline int
next_line_fields(const unsigned char *s, Py_ssize_t n, Py_ssize_t *start,
                 Py_ssize_t max_length, const unsigned char *field[3], Py_ssize_t flen[3])
{
    const unsigned char *nl = memchr(s + *start, '\n', (size_t)(n - *start));
    if (!nl)
        return -1;
    Py_ssize_t end = nl - s;
    if (max_length > 0 && end - *start > max_length)
        return -1;
    int fields = line_fields(s, *start, end, n, field, flen);
    *start = end + 1;
    return fields;
}

#endif
