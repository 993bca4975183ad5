/* The journal's point form (carbon.cache.journal), read by carbon.cache._journal (decode)
 * and carbon.cache._store (add_encoded): per point a uint32 name length (native order),
 * the UTF-8 name, then its timestamp and value as native doubles. */
#ifndef CARBON_POINT_FORM_H
#define CARBON_POINT_FORM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define POINT_TAIL (2 * sizeof(double)) /* a point's timestamp and value */

/* The point at *cursor, which must end by `end`: its name (*name, *length bytes; the
 * timestamp and value follow it) and *cursor moved past it. 0, or -1 when the bytes end
 * inside the point (nothing set). */
static inline int
point_form_next(const char **cursor, const char *end, const char **name, uint32_t *length)
{
    const char *at = *cursor;
    uint32_t n;
    if (end - at < (ptrdiff_t)sizeof n)
        return -1;
    memcpy(&n, at, sizeof n);
    at += sizeof n;
    if ((size_t)(end - at) < (size_t)n + POINT_TAIL)
        return -1;
    *name = at;
    *length = n;
    *cursor = at + n + POINT_TAIL;
    return 0;
}

#endif
