/* The relay's whole-read line path: split, check, look up, place, and write each
 * destination's bytes in one C call (carbon.relay.chunks drives it).
 *
 * RouteTable(destinations, size)
 *   .route(chunk, max_length, items=False) -> None | list[bytes] |
 *                                       (payloads, counts, nowhere, example, lines)
 *       chunk: complete lines, each ending in '\n'.  None: some line is not one this
 *       path writes exactly as parse_lines + encode_line would (a bad line, inf/nan, a
 *       timestamp meaning "now", an overlong line, a number float() reads but this does
 *       not): the caller takes the general path for the whole read.  A list: names
 *       neither known nor placeable here (placed by the caller, then .learn()).  A tuple:
 *       payloads[k] is destination k's bytes (None if nothing) or with `items` its
 *       pickle message items (name, (timestamp, value)), counts[k] its lines,
 *       nowhere the lines without a destination, example the first such name and
 *       lines the datapoints read.
 *   .learn(names, codes)        remember names -> route codes (one byte a name)
 *   .set_code(code, positions)  the destinations (indexes) of a route code
 *   .set_ring(kind, positions, codes)   place unknown names here: kind 1 carbon_ch,
 *       2 fnv1a_ch, 3 mmh3_ch; positions the ring's sorted positions, codes the route
 *       code of each position's owner and then the first one's again (the reference
 *       ring walk, one replica); kind 4 jump_fnv1a_ch: positions the buckets' indexes,
 *       codes each bucket's code (one more, unused).
 *       kind 0 turns it off.
 *   .clear()  forget every name (placement changed)
 *   .known, .memory  names held, bytes allocated for them
 *
 * Names are held in two generations like RouteIndex: when the current one holds
 * `size` names it is retired (the previous retired one is freed); a name found in the
 * retired generation is copied to the current one.  At most 2 * size names are known.
 *
 * A line's output is `name SP value SP stamp CRLF`: the name's bytes, the value as
 * "%.10f" without trailing zeros and dot (computed exactly from the double, the
 * same digits as Python's formatting), the timestamp as "%d" of the float.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "../formats/_lines.h"
#include "../formats/_number.h"

#define MAX_CODES 256
#ifndef SLOTS_AHEAD
#define SLOTS_AHEAD 32
#endif
#ifndef ENTRY_AHEAD
#define ENTRY_AHEAD 16
#endif
#define TEN10 10000000000ULL

/* ---------- number parsing ----------------------------------------------------------- */

/* float(field) for fields of digits, '.', '-', '+', 'e', 'E'. 0 ok, -1 not handled here
 * (the caller falls back, no exception set), -2 error set. */
static int
parse_number(const char *s, Py_ssize_t len, double *out)
{
    int rc = simple_to_double(s, len, out);
    return rc == -3 ? -1 : rc;
}

/* ---------- value and timestamp text ------------------------------------------------ */

static const char DIGIT_PAIRS[] = "00010203040506070809101112131415161718192021222324"
                                  "25262728293031323334353637383940414243444546474849"
                                  "50515253545556575859606162636465666768697071727374"
                                  "75767778798081828384858687888990919293949596979899";

/* The `width` low decimal digits of v, zero-padded, at p (two at a time). */
static inline void
put_digits(char *p, uint64_t v, int width)
{
    char *q = p + width;
    for (; width >= 2; width -= 2) {
        q -= 2;
        memcpy(q, DIGIT_PAIRS + 2 * (v % 100), 2);
        v /= 100;
    }
    if (width)
        *--q = (char)('0' + v % 10);
}

static char *
write_u64(char *p, uint64_t v)
{
    int width = 1;
    for (uint64_t rest = v; rest >= 10; rest /= 10)
        width++;
    put_digits(p, v, width);
    return p + width;
}

/* round-half-even(v * 10**10) for a finite v with |v| < 2**53 (what a correctly
 * rounded "%.10f" prints): v is m * 2**e exactly, so v * 10**10 = m * 10**10 * 2**e is
 * rounded in 128-bit integers. */
static unsigned __int128
scaled_value(double v)
{
    double a = fabs(v);
    int e;
    double fr = frexp(a, &e);
    uint64_t m = (uint64_t)ldexp(fr, 53);
    e -= 53; /* a == m * 2**e, e <= 0 since a < 2**53 */
    unsigned __int128 scaled = (unsigned __int128)m * TEN10, q;
    int shift = -e;
    if (shift == 0)
        q = scaled;
    else if (shift >= 120)
        q = 0; /* scaled < 2**87 <= half of 2**shift: rounds to zero */
    else {
        unsigned __int128 one = 1;
        q = scaled >> shift;
        unsigned __int128 rem = scaled & ((one << shift) - 1), half = one << (shift - 1);
        if (rem > half || (rem == half && (q & 1)))
            q++;
    }
    return q;
}

/* 2**(p-53) * 10**10 for p = 0..19: a whole ulp below 2**p, in units of 10**-10 */
static const double MARGIN[20] = {
    0x1p-53 * 1e10, 0x1p-52 * 1e10, 0x1p-51 * 1e10, 0x1p-50 * 1e10, 0x1p-49 * 1e10,
    0x1p-48 * 1e10, 0x1p-47 * 1e10, 0x1p-46 * 1e10, 0x1p-45 * 1e10, 0x1p-44 * 1e10,
    0x1p-43 * 1e10, 0x1p-42 * 1e10, 0x1p-41 * 1e10, 0x1p-40 * 1e10, 0x1p-39 * 1e10,
    0x1p-38 * 1e10, 0x1p-37 * 1e10, 0x1p-36 * 1e10, 0x1p-35 * 1e10, 0x1p-34 * 1e10};

/* The same rounding read off the decimal text itself, when the text decides it:
 * [-]digits[.digits] (no exponent), under 10**15. float(text) is within half an ulp
 * of the text, so both round alike unless the digits past the 10th decimal are within
 * that distance of a tie; then (and for other forms) returns -1 and the caller parses
 * the number. */
static int
scaled_text(const char *s, Py_ssize_t len, unsigned __int128 *q, int *negative)
{
    Py_ssize_t i = 0;
    *negative = 0;
    if (len > 0 && s[0] == '-') {
        *negative = 1;
        i = 1;
    }
    uint64_t whole = 0, frac = 0, rest = 0;
    int digits = 0, fdigits = 0, rdigits = 0;
    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
        if (++digits > 15)
            return -1;
        whole = whole * 10 + (uint64_t)(s[i] - '0');
    }
    if (i < len && s[i] == '.') {
        i++;
        int64_t eight; /* the first 8 decimals at once when they are digits */
        if (i + 8 <= len && (eight = eight_digits(s + i)) >= 0) {
            frac = (uint64_t)eight;
            fdigits = 8;
            digits += 8;
            i += 8;
        }
        for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
            digits++;
            if (fdigits < 10) {
                frac = frac * 10 + (uint64_t)(s[i] - '0');
                fdigits++;
            }
            else if (rdigits < 9) {
                rest = rest * 10 + (uint64_t)(s[i] - '0');
                rdigits++;
            }
        }
    }
    if (i != len || digits == 0)
        return -1;
    for (; fdigits < 10; fdigits++)
        frac *= 10;
    /* |v| < 2**p: an ulp is at most 2**(p-53), half of it 2**(p-54); in units of
     * 10**-10, doubled for slack. */
    int p = 64 - __builtin_clzll(whole + 1);
    if (p > 19) /* 2**(19-53) * 10**10 is 0.58 */
        return -1;
    double margin = MARGIN[p];
    int up = 0;
    if (rdigits) {
        /* the digits past the 10th decimal as a fraction of one unit: within [lo, hi] */
        double lo = (double)rest / POW10[rdigits], hi = (double)(rest + 1) / POW10[rdigits];
        if (lo > 0.5 + margin)
            up = 1;
        else if (!(hi < 0.5 - margin))
            return -1;
    }
    *q = (unsigned __int128)whole * TEN10 + frac + (unsigned)up;
    return 0;
}

/* ("%.10f" % v).rstrip("0").rstrip(".") from v's scaled value and sign. */
static char *
write_scaled(char *p, unsigned __int128 q, int negative)
{
    if (negative)
        *p++ = '-';
    uint64_t whole, frac;
    if (q >> 64) {
        whole = (uint64_t)(q / TEN10);
        frac = (uint64_t)(q % TEN10);
    }
    else {
        whole = (uint64_t)q / TEN10;
        frac = (uint64_t)q % TEN10;
    }
    p = write_u64(p, whole);
    if (frac) {
        int width = 10;
        while (frac % 10 == 0) {
            frac /= 10;
            width--;
        }
        *p++ = '.';
        put_digits(p, frac, width);
        p += width;
    }
    return p;
}

static char *
write_value(char *p, double v)
{
    return write_scaled(p, scaled_value(v), signbit(v) != 0);
}

/* ---------- hashes for placement (carbon.hashing's positions) ----------------------- */

typedef struct {
    uint32_t a, b, c, d;
} md5_state;

static const uint32_t MD5_K[64] = {
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613,
    0xfd469501, 0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193,
    0xa679438e, 0x49b40821, 0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d,
    0x02441453, 0xd8a1e681, 0xe7d3fbc8, 0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed,
    0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a, 0xfffa3942, 0x8771f681, 0x6d9d6122,
    0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70, 0x289b7ec6, 0xeaa127fa,
    0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665, 0xf4292244,
    0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb,
    0xeb86d391};

#define MD5_STEP(f, a, b, c, d, x, k, r)                                                 \
    do {                                                                                 \
        a += f(b, c, d) + (x) + (k);                                                     \
        a = ((a << (r)) | (a >> (32 - (r)))) + b;                                        \
    } while (0)
#define MD5_F(b, c, d) (((b) & (c)) | (~(b) & (d)))
#define MD5_G(b, c, d) (((d) & (b)) | (~(d) & (c)))
#define MD5_H(b, c, d) ((b) ^ (c) ^ (d))
#define MD5_I(b, c, d) ((c) ^ ((b) | ~(d)))

static void
md5_block(md5_state *s, const unsigned char *block)
{
    uint32_t w[16];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)block[4 * i] | ((uint32_t)block[4 * i + 1] << 8) |
               ((uint32_t)block[4 * i + 2] << 16) | ((uint32_t)block[4 * i + 3] << 24);
    uint32_t a = s->a, b = s->b, c = s->c, d = s->d;
    for (int i = 0; i < 16; i += 4) {
        MD5_STEP(MD5_F, a, b, c, d, w[i], MD5_K[i], 7);
        MD5_STEP(MD5_F, d, a, b, c, w[i + 1], MD5_K[i + 1], 12);
        MD5_STEP(MD5_F, c, d, a, b, w[i + 2], MD5_K[i + 2], 17);
        MD5_STEP(MD5_F, b, c, d, a, w[i + 3], MD5_K[i + 3], 22);
    }
    for (int i = 16; i < 32; i += 4) {
        MD5_STEP(MD5_G, a, b, c, d, w[(5 * i + 1) & 15], MD5_K[i], 5);
        MD5_STEP(MD5_G, d, a, b, c, w[(5 * i + 6) & 15], MD5_K[i + 1], 9);
        MD5_STEP(MD5_G, c, d, a, b, w[(5 * i + 11) & 15], MD5_K[i + 2], 14);
        MD5_STEP(MD5_G, b, c, d, a, w[(5 * i + 16) & 15], MD5_K[i + 3], 20);
    }
    for (int i = 32; i < 48; i += 4) {
        MD5_STEP(MD5_H, a, b, c, d, w[(3 * i + 5) & 15], MD5_K[i], 4);
        MD5_STEP(MD5_H, d, a, b, c, w[(3 * i + 8) & 15], MD5_K[i + 1], 11);
        MD5_STEP(MD5_H, c, d, a, b, w[(3 * i + 11) & 15], MD5_K[i + 2], 16);
        MD5_STEP(MD5_H, b, c, d, a, w[(3 * i + 14) & 15], MD5_K[i + 3], 23);
    }
    for (int i = 48; i < 64; i += 4) {
        MD5_STEP(MD5_I, a, b, c, d, w[(7 * i) & 15], MD5_K[i], 6);
        MD5_STEP(MD5_I, d, a, b, c, w[(7 * i + 7) & 15], MD5_K[i + 1], 10);
        MD5_STEP(MD5_I, c, d, a, b, w[(7 * i + 14) & 15], MD5_K[i + 2], 15);
        MD5_STEP(MD5_I, b, c, d, a, w[(7 * i + 21) & 15], MD5_K[i + 3], 21);
    }
    s->a += a;
    s->b += b;
    s->c += c;
    s->d += d;
}

/* The first two bytes of md5(data), big-endian: carbon_ch's position. */
static long
carbon_position(const unsigned char *data, size_t len)
{
    md5_state s = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476};
    size_t done = 0;
    while (len - done >= 64) {
        md5_block(&s, data + done);
        done += 64;
    }
    unsigned char tail[128];
    size_t rest = len - done;
    memcpy(tail, data + done, rest);
    tail[rest] = 0x80;
    size_t total = rest + 1 + 8 <= 64 ? 64 : 128;
    memset(tail + rest + 1, 0, total - rest - 1);
    uint64_t bits = (uint64_t)len * 8;
    for (int i = 0; i < 8; i++)
        tail[total - 8 + i] = (unsigned char)(bits >> (8 * i));
    md5_block(&s, tail);
    if (total == 128)
        md5_block(&s, tail + 64);
    return (long)(((s.a & 0xff) << 8) | ((s.a >> 8) & 0xff));
}

static long
fnv1a_position(const unsigned char *data, size_t len)
{
    uint32_t h = 0x811C9DC5u;
    for (size_t i = 0; i < len; i++)
        h = (h ^ data[i]) * 0x01000193u;
    return (long)((h >> 16) ^ (h & 0xFFFF));
}

/* murmur3 x86 32-bit, seed 0, as a signed int (mmh3.hash). */
static long
mmh3_position(const unsigned char *data, size_t len)
{
    uint32_t h = 0, k;
    const uint32_t c1 = 0xcc9e2d51, c2 = 0x1b873593;
    size_t blocks = len / 4;
    for (size_t i = 0; i < blocks; i++) {
        k = (uint32_t)data[4 * i] | ((uint32_t)data[4 * i + 1] << 8) |
            ((uint32_t)data[4 * i + 2] << 16) | ((uint32_t)data[4 * i + 3] << 24);
        k *= c1;
        k = (k << 15) | (k >> 17);
        k *= c2;
        h ^= k;
        h = (h << 13) | (h >> 19);
        h = h * 5 + 0xe6546b64;
    }
    const unsigned char *tail = data + blocks * 4;
    k = 0;
    switch (len & 3) {
    case 3:
        k ^= (uint32_t)tail[2] << 16; /* fall through */
    case 2:
        k ^= (uint32_t)tail[1] << 8; /* fall through */
    case 1:
        k ^= tail[0];
        k *= c1;
        k = (k << 15) | (k >> 17);
        k *= c2;
        h ^= k;
    }
    h ^= (uint32_t)len;
    h ^= h >> 16;
    h *= 0x85ebca6b;
    h ^= h >> 13;
    h *= 0xc2b2ae35;
    h ^= h >> 16;
    return (long)(int32_t)h;
}

/* carbon-c-relay's jump_fnv1a_ch: fnv1a-64 over signed chars, then the jump bucket. */
static long
jump_bucket(const unsigned char *data, size_t len, Py_ssize_t buckets)
{
    uint64_t key = 0xCBF29CE484222325ULL;
    for (size_t i = 0; i < len; i++)
        key = (key ^ (uint64_t)(int64_t)(signed char)data[i]) * 0x100000001B3ULL;
    long long b = -1, j = 0;
    while (j < buckets) {
        b = j;
        key = key * 2862933555777941757ULL + 1;
        j = (long long)((double)(b + 1) * ((double)(1LL << 31) / (double)((key >> 33) + 1)));
    }
    return (long)b;
}

/* ---------- the name table ------------------------------------------------------------ */

static uint64_t
name_hash(const unsigned char *s, size_t len, uint64_t seed)
{
    uint64_t h = seed ^ (len * 0x9E3779B97F4A7C15ULL);
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdULL;
        h ^= h >> 29;
    }
    uint64_t w = 0;
    memcpy(&w, s + i, len - i);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 32;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 29;
    return h;
}

typedef struct {
    uint32_t tag; /* high hash bits | 1; 0 = empty */
    uint32_t offset;
} Slot;

/* *data (PyMem, *cap bytes) made to hold `need` bytes, its size doubling from 64 KiB.
 * 0, or -1 with MemoryError (also when it would pass `limit`: a generation's names,
 * whose offsets are 32-bit). */
static int
reserve_bytes(unsigned char **data, size_t *cap, size_t need, size_t limit)
{
    if (need <= *cap)
        return 0;
    size_t grown = *cap ? *cap : 65536;
    while (need > grown)
        grown *= 2;
    if (grown > limit) {
        PyErr_SetString(PyExc_MemoryError, "RouteTable: generation over 4 GB");
        return -1;
    }
    unsigned char *more = PyMem_Realloc(*data, grown);
    if (!more) {
        PyErr_NoMemory();
        return -1;
    }
    *data = more;
    *cap = grown;
    return 0;
}

typedef struct {
    Slot *slots;
    size_t mask, count;
    unsigned char *arena; /* entries: u32 length, u8 code, name */
    size_t used, capacity;
} Generation;

static void
generation_free(Generation *g)
{
    PyMem_Free(g->slots);
    PyMem_Free(g->arena);
    memset(g, 0, sizeof(*g));
}

static size_t
generation_memory(const Generation *g)
{
    return (g->slots ? (g->mask + 1) * sizeof(Slot) : 0) + g->capacity;
}

/* The code of a name, or -1. */
static int
generation_find(const Generation *g, const unsigned char *name, uint32_t len, uint64_t h)
{
    if (!g->slots)
        return -1;
    uint32_t tag = (uint32_t)(h >> 32) | 1;
    for (size_t i = (size_t)h & g->mask;; i = (i + 1) & g->mask) {
        const Slot *slot = &g->slots[i];
        if (!slot->tag)
            return -1;
        if (slot->tag == tag) {
            const unsigned char *entry = g->arena + slot->offset;
            uint32_t elen;
            memcpy(&elen, entry, 4);
            if (elen == len && memcmp(entry + 5, name, len) == 0)
                return entry[4];
        }
    }
}

/* Twice the slots (1024 at first), filled again from the arena: its entries, one a
 * slot, are read in order rather than where the old slots point, and each entry's new
 * slot is asked for GROW_AHEAD entries before it is filled. */
#define GROW_AHEAD 16
static int
generation_grow(Generation *g, uint64_t seed)
{
    size_t size = g->slots ? 2 * (g->mask + 1) : 1024;
    Slot *slots = PyMem_Calloc(size, sizeof(Slot));
    if (!slots) {
        PyErr_NoMemory();
        return -1;
    }
    uint64_t hashes[GROW_AHEAD];
    uint32_t offsets[GROW_AHEAD];
    size_t offset = 0, taken = 0, placed = 0;
    while (placed < g->count) {
        if (offset < g->used) { /* hash the next entry and ask for its slot */
            const unsigned char *entry = g->arena + offset;
            uint32_t elen;
            memcpy(&elen, entry, 4);
            uint64_t h = name_hash(entry + 5, elen, seed);
            __builtin_prefetch(&slots[(size_t)h & (size - 1)], 1);
            hashes[taken % GROW_AHEAD] = h;
            offsets[taken % GROW_AHEAD] = (uint32_t)offset;
            taken++;
            offset += 5 + (size_t)elen;
            if (taken - placed < GROW_AHEAD && offset < g->used)
                continue;
        }
        uint64_t h = hashes[placed % GROW_AHEAD];
        size_t i = (size_t)h & (size - 1);
        while (slots[i].tag)
            i = (i + 1) & (size - 1);
        slots[i].tag = (uint32_t)(h >> 32) | 1;
        slots[i].offset = offsets[placed % GROW_AHEAD];
        placed++;
    }
    PyMem_Free(g->slots);
    g->slots = slots;
    g->mask = size - 1;
    return 0;
}

/* Add a name known to be absent. */
static int
generation_add(Generation *g, const unsigned char *name, uint32_t len, uint64_t h, int code,
               uint64_t seed)
{
    if (!g->slots || (g->count + 1) * 10 > (g->mask + 1) * 7) {
        if (generation_grow(g, seed) < 0)
            return -1;
    }
    size_t need = 5 + (size_t)len;
    if (reserve_bytes(&g->arena, &g->capacity, g->used + need, UINT32_MAX) < 0)
        return -1;
    unsigned char *entry = g->arena + g->used;
    memcpy(entry, &len, 4);
    entry[4] = (unsigned char)code;
    memcpy(entry + 5, name, len);
    size_t i = (size_t)h & g->mask;
    while (g->slots[i].tag)
        i = (i + 1) & g->mask;
    g->slots[i].tag = (uint32_t)(h >> 32) | 1;
    g->slots[i].offset = (uint32_t)g->used;
    g->used += need;
    g->count++;
    return 0;
}

/* ---------- the object ---------------------------------------------------------------- */

typedef struct {
    unsigned char *data;
    size_t len, cap;
    Py_ssize_t lines;
} OutBuf;

typedef struct {
    const unsigned char *name;
    uint32_t name_len;
    int code;
    int negative;
    uint64_t hash;
    unsigned __int128 value; /* round-half-even(|value| * 10**10) */
    double value_d, stamp_d; /* the parsed numbers (pickle items) */
    long long stamp;
} LineRecord;

typedef struct {
    PyObject_HEAD
    Generation current, retired;
    LineRecord *records; /* one a line of the read being routed */
    size_t records_cap;
    size_t size;
    uint64_t seed;
    int destinations;
    int member_count[MAX_CODES];
    int *members; /* MAX_CODES * destinations */
    int ring_kind;
    long *ring_positions;
    unsigned char *ring_codes; /* one more than positions: the wrap-around */
    Py_ssize_t ring_size;
    OutBuf *out;
} RouteTable;


static int
table_add(RouteTable *t, const unsigned char *name, uint32_t len, uint64_t h, int code)
{
    if (t->current.count >= t->size) {
        /* the new generation starts at the full one's size: no rehashing as it fills */
        size_t slots = t->current.slots ? t->current.mask + 1 : 0;
        size_t capacity = t->current.capacity;
        generation_free(&t->retired);
        t->retired = t->current;
        memset(&t->current, 0, sizeof(t->current));
        if (slots) {
            t->current.slots = PyMem_Calloc(slots, sizeof(Slot));
            t->current.arena = PyMem_Malloc(capacity);
            if (!t->current.slots || !t->current.arena) {
                generation_free(&t->current);
                PyErr_NoMemory();
                return -1;
            }
            t->current.mask = slots - 1;
            t->current.capacity = capacity;
        }
    }
    return generation_add(&t->current, name, len, h, code, t->seed);
}

/* The code of a name: current, else retired (copied over), else the ring, else -1.
 * -2 on error. */
static int
table_lookup(RouteTable *t, const unsigned char *name, uint32_t len, uint64_t h)
{
    int code = generation_find(&t->current, name, len, h);
    if (code >= 0)
        return code;
    code = generation_find(&t->retired, name, len, h);
    if (code < 0 && t->ring_kind == 4 && t->ring_size)
        code = t->ring_codes[jump_bucket(name, len, t->ring_size)];
    else if (code < 0 && t->ring_kind && t->ring_size) {
        long position = t->ring_kind == 1   ? carbon_position(name, len)
                        : t->ring_kind == 2 ? fnv1a_position(name, len)
                                            : mmh3_position(name, len);
        Py_ssize_t lo = 0, hi = t->ring_size; /* bisect_left */
        while (lo < hi) {
            Py_ssize_t mid = (lo + hi) / 2;
            if (t->ring_positions[mid] < position)
                lo = mid + 1;
            else
                hi = mid;
        }
        code = t->ring_codes[lo];
    }
    if (code >= 0 && table_add(t, name, len, h, code) < 0)
        return -2;
    return code;
}

static void
RouteTable_dealloc(RouteTable *t)
{
    generation_free(&t->current);
    generation_free(&t->retired);
    PyMem_Free(t->members);
    PyMem_Free(t->ring_positions);
    PyMem_Free(t->ring_codes);
    PyMem_Free(t->records);
    if (t->out) {
        for (int k = 0; k < t->destinations; k++)
            PyMem_Free(t->out[k].data);
        PyMem_Free(t->out);
    }
    Py_TYPE(t)->tp_free((PyObject *)t);
}

static int
RouteTable_init(RouteTable *t, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"destinations", "size", NULL};
    int destinations;
    Py_ssize_t size;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "in:RouteTable", keywords, &destinations,
                                     &size))
        return -1;
    if (destinations < 0 || destinations > 65536) {
        PyErr_SetString(PyExc_ValueError, "RouteTable: destinations out of range");
        return -1;
    }
    if (t->members) { /* __init__ called twice */
        PyErr_SetString(PyExc_RuntimeError, "RouteTable already initialised");
        return -1;
    }
    t->destinations = destinations;
    t->size = size > 0 ? (size_t)size : 0;
    t->seed = ((uint64_t)(uintptr_t)t * 0x9E3779B97F4A7C15ULL) ^ 0x2545F4914F6CDD1DULL;
    t->members = PyMem_Calloc((size_t)MAX_CODES * (destinations ? destinations : 1),
                              sizeof(int));
    t->out = PyMem_Calloc(destinations ? destinations : 1, sizeof(OutBuf));
    if (!t->members || !t->out) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static PyObject *
RouteTable_set_code(RouteTable *t, PyObject *args)
{
    int code;
    PyObject *positions;
    if (!PyArg_ParseTuple(args, "iO:set_code", &code, &positions))
        return NULL;
    PyObject *seq = PySequence_Fast(positions, "positions must be a sequence");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (code < 0 || code >= MAX_CODES || n > t->destinations) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "set_code: code or positions out of range");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long k = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
        if (k < 0 || k >= t->destinations) {
            Py_DECREF(seq);
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "set_code: position out of range");
            return NULL;
        }
        t->members[code * t->destinations + i] = (int)k;
    }
    t->member_count[code] = (int)n;
    Py_DECREF(seq);
    Py_RETURN_NONE;
}

static PyObject *
RouteTable_set_ring(RouteTable *t, PyObject *args)
{
    int kind;
    PyObject *positions, *codes;
    if (!PyArg_ParseTuple(args, "iOS:set_ring", &kind, &positions, &codes))
        return NULL;
    PyObject *seq = PySequence_Fast(positions, "positions must be a sequence");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (kind < 0 || kind > 4 || PyBytes_GET_SIZE(codes) != n + 1) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "set_ring: bad kind or codes length");
        return NULL;
    }
    long *ring_positions = PyMem_Malloc((n + 1) * sizeof(long));
    unsigned char *ring_codes = PyMem_Malloc(n + 1);
    if (!ring_positions || !ring_codes) {
        PyMem_Free(ring_positions);
        PyMem_Free(ring_codes);
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        ring_positions[i] = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
        if (ring_positions[i] == -1 && PyErr_Occurred()) {
            PyMem_Free(ring_positions);
            PyMem_Free(ring_codes);
            Py_DECREF(seq);
            return NULL;
        }
    }
    Py_DECREF(seq);
    memcpy(ring_codes, PyBytes_AS_STRING(codes), n + 1);
    PyMem_Free(t->ring_positions);
    PyMem_Free(t->ring_codes);
    t->ring_positions = ring_positions;
    t->ring_codes = ring_codes;
    t->ring_size = n;
    t->ring_kind = kind;
    Py_RETURN_NONE;
}

static PyObject *
RouteTable_learn(RouteTable *t, PyObject *args)
{
    PyObject *names;
    Py_buffer codes;
    if (!PyArg_ParseTuple(args, "O!y*:learn", &PyList_Type, &names, &codes))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(names);
    if (codes.len != n) {
        PyBuffer_Release(&codes);
        PyErr_SetString(PyExc_ValueError, "learn: one code a name");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *name = PyList_GET_ITEM(names, i);
        if (!PyBytes_Check(name) || PyBytes_GET_SIZE(name) > UINT32_MAX / 2) {
            PyBuffer_Release(&codes);
            PyErr_SetString(PyExc_TypeError, "learn: names must be bytes");
            return NULL;
        }
        const unsigned char *s = (const unsigned char *)PyBytes_AS_STRING(name);
        uint32_t len = (uint32_t)PyBytes_GET_SIZE(name);
        uint64_t h = name_hash(s, len, t->seed);
        if (generation_find(&t->current, s, len, h) >= 0)
            continue;
        if (table_add(t, s, len, h, ((unsigned char *)codes.buf)[i]) < 0) {
            PyBuffer_Release(&codes);
            return NULL;
        }
    }
    PyBuffer_Release(&codes);
    Py_RETURN_NONE;
}

static PyObject *
RouteTable_clear(RouteTable *t, PyObject *unused)
{
    generation_free(&t->current);
    generation_free(&t->retired);
    Py_RETURN_NONE;
}

static int
out_reserve(OutBuf *b, size_t more)
{
    return reserve_bytes(&b->data, &b->cap, b->len + more, SIZE_MAX);
}

/* Split and check every line; fills records. Returns the number of records, -1 if the
 * read must take the general path, -2 on error. */
static Py_ssize_t
read_lines(const unsigned char *s, Py_ssize_t n, Py_ssize_t max_length, LineRecord *records,
           int items)
{
    Py_ssize_t count = 0, start = 0;
    while (start < n) {
        const unsigned char *field[3];
        Py_ssize_t flen[3];
        int fields = next_line_fields(s, n, &start, max_length, field, flen);
        if (fields < 0)
            return -1; /* no final '\n', overlong, or over three fields */
        if (fields == 0)
            continue; /* parse_lines skips a blank line */
        if (fields != 3 || flen[0] > UINT32_MAX / 2)
            return -1;
        LineRecord *r = &records[count];
        double stamp;
        if (items) { /* pickle items carry the parsed doubles */
            int rc = parse_number((const char *)field[1], flen[1], &r->value_d);
            if (rc == -2)
                return -2;
            if (rc < 0 || !isfinite(r->value_d))
                return -1;
        }
        else if (scaled_text((const char *)field[1], flen[1], &r->value, &r->negative) < 0) {
            double value;
            int rc = parse_number((const char *)field[1], flen[1], &value);
            if (rc == -2)
                return -2;
            if (rc < 0 || !isfinite(value) || fabs(value) >= 9.0e15)
                return -1;
            r->value = scaled_value(value);
            r->negative = signbit(value) != 0;
        }
        int rc = parse_number((const char *)field[2], flen[2], &stamp);
        if (rc == -2)
            return -2;
        /* a timestamp meaning now, and ones past what this writes exactly */
        if (rc < 0 || !isfinite(stamp) || (-2.0 < stamp && stamp <= -1.0) ||
            fabs(stamp) >= 9.0e18)
            return -1;
        for (Py_ssize_t i = 0; i < flen[0]; i++) {
            if (field[0][i] >= 0x80) {
                PyObject *text =
                    PyUnicode_DecodeUTF8((const char *)field[0], flen[0], "strict");
                if (!text) {
                    if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
                        return -2;
                    PyErr_Clear();
                    return -1;
                }
                Py_DECREF(text);
                break;
            }
        }
        r->name = field[0];
        r->name_len = (uint32_t)flen[0];
        r->stamp = (long long)stamp;
        r->stamp_d = stamp;
        count++;
    }
    return count;
}

/* Pickle destinations: lists[k] = destination k's message items (name, (timestamp,
 * value)), as items_from_lines / wire_items make them, or None. 0, or -1 on error. */
static int
items_out(RouteTable *t, LineRecord *records, Py_ssize_t count, PyObject *lists,
          PyObject *counts)
{
    int D = t->destinations;
    for (int k = 0; k < D; k++) {
        PyObject *list = PyList_New(0);
        if (!list)
            return -1;
        PyList_SET_ITEM(lists, k, list);
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        LineRecord *r = &records[i];
        int members = t->member_count[r->code];
        if (!members)
            continue;
        PyObject *metric = PyUnicode_DecodeUTF8((const char *)r->name, r->name_len, "strict");
        PyObject *stamp = PyFloat_FromDouble(r->stamp_d);
        PyObject *value = PyFloat_FromDouble(r->value_d);
        PyObject *point = NULL, *item = NULL;
        if (metric && stamp && value && (point = PyTuple_Pack(2, stamp, value)))
            item = PyTuple_Pack(2, metric, point);
        Py_XDECREF(metric);
        Py_XDECREF(stamp);
        Py_XDECREF(value);
        Py_XDECREF(point);
        if (!item)
            return -1;
        for (int m = 0; m < members; m++) {
            if (PyList_Append(PyList_GET_ITEM(lists, t->members[r->code * D + m]), item) < 0) {
                Py_DECREF(item);
                return -1;
            }
        }
        Py_DECREF(item);
    }
    for (int k = 0; k < D; k++) {
        Py_ssize_t size = PyList_GET_SIZE(PyList_GET_ITEM(lists, k));
        PyObject *number = PyLong_FromSsize_t(size);
        if (!number)
            return -1;
        PyList_SET_ITEM(counts, k, number);
        if (!size)
            PyList_SetItem(lists, k, Py_NewRef(Py_None));
    }
    return 0;
}

/* Line destinations: payloads[k] = destination k's lines, or None. 0, or -1. */
static int
lines_out(RouteTable *t, LineRecord *records, Py_ssize_t count, PyObject *payloads,
          PyObject *counts)
{
    int D = t->destinations;
    for (int k = 0; k < D; k++) {
        t->out[k].len = 0;
        t->out[k].lines = 0;
    }
    char line[512];
    for (Py_ssize_t i = 0; i < count; i++) {
        LineRecord *r = &records[i];
        int members = t->member_count[r->code];
        if (!members)
            continue;
        char *p = write_scaled(line, r->value, r->negative);
        *p++ = ' ';
        if (r->stamp < 0) {
            *p++ = '-';
            p = write_u64(p, (uint64_t)0 - (uint64_t)r->stamp);
        }
        else
            p = write_u64(p, (uint64_t)r->stamp);
        *p++ = '\r';
        *p++ = '\n';
        size_t tail = p - line, total = r->name_len + 1 + tail;
        for (int m = 0; m < members; m++) {
            OutBuf *b = &t->out[t->members[r->code * D + m]];
            if (out_reserve(b, total) < 0)
                return -1;
            memcpy(b->data + b->len, r->name, r->name_len);
            b->data[b->len + r->name_len] = ' ';
            memcpy(b->data + b->len + r->name_len + 1, line, tail);
            b->len += total;
            b->lines++;
        }
    }
    for (int k = 0; k < D; k++) {
        OutBuf *b = &t->out[k];
        PyObject *payload = b->lines
                                ? PyBytes_FromStringAndSize((const char *)b->data, b->len)
                                : Py_NewRef(Py_None);
        if (!payload)
            return -1;
        PyList_SET_ITEM(payloads, k, payload);
        PyObject *number = PyLong_FromSsize_t(b->lines);
        if (!number)
            return -1;
        PyList_SET_ITEM(counts, k, number);
        if (b->cap > (1 << 22)) { /* do not keep a huge buffer around */
            PyMem_Free(b->data);
            b->data = NULL;
            b->cap = 0;
        }
    }
    return 0;
}

static PyObject *
RouteTable_route(RouteTable *t, PyObject *args)
{
    Py_buffer chunk;
    Py_ssize_t max_length;
    int items = 0;
    if (!PyArg_ParseTuple(args, "y*n|p:route", &chunk, &max_length, &items))
        return NULL;
    const unsigned char *s = chunk.buf;
    Py_ssize_t n = chunk.len, lines = n / 6 + 1; /* a line with 3 fields: >= 6 bytes */
    PyObject *result = NULL, *unknown = NULL, *payloads = NULL, *counts = NULL;
    if ((size_t)lines > t->records_cap) { /* kept between calls: reads are alike */
        LineRecord *grown = PyMem_Realloc(t->records, lines * sizeof(LineRecord));
        if (!grown) {
            PyErr_NoMemory();
            goto done;
        }
        t->records = grown;
        t->records_cap = (size_t)lines;
    }
    LineRecord *records = t->records;
    Py_ssize_t count = read_lines(s, n, max_length, records, items);
    if (count == -2)
        goto done;
    if (count == -1) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    for (Py_ssize_t i = 0; i < count; i++)
        records[i].hash = name_hash(records[i].name, records[i].name_len, t->seed);
    for (Py_ssize_t i = 0; i < count; i++) {
        LineRecord *r = &records[i];
        /* The table is far bigger than the caches: ask for a name's slots
         * SLOTS_AHEAD lines ahead, and ENTRY_AHEAD lines ahead for the entry its first
         * slot points to when that slot's tag is the name's. */
        if (i + SLOTS_AHEAD < count) {
            uint64_t ahead = records[i + SLOTS_AHEAD].hash;
            if (t->current.slots)
                __builtin_prefetch(&t->current.slots[ahead & t->current.mask]);
            if (t->retired.slots)
                __builtin_prefetch(&t->retired.slots[ahead & t->retired.mask]);
        }
        if (i + ENTRY_AHEAD < count && t->current.slots) {
            uint64_t ahead = records[i + ENTRY_AHEAD].hash;
            const Slot *slot = &t->current.slots[ahead & t->current.mask];
            if (slot->tag == ((uint32_t)(ahead >> 32) | 1))
                __builtin_prefetch(t->current.arena + slot->offset);
        }
        r->code = table_lookup(t, r->name, r->name_len, r->hash);
        if (r->code == -2)
            goto done;
        if (r->code < 0) {
            if (!unknown && !(unknown = PyList_New(0)))
                goto done;
            PyObject *name = PyBytes_FromStringAndSize((const char *)r->name, r->name_len);
            if (!name || PyList_Append(unknown, name) < 0) {
                Py_XDECREF(name);
                goto done;
            }
            Py_DECREF(name);
        }
    }
    if (unknown) {
        result = unknown;
        unknown = NULL;
        goto done;
    }
    Py_ssize_t nowhere = 0, example = -1;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (!t->member_count[records[i].code]) {
            if (example < 0)
                example = i;
            nowhere++;
        }
    }
    if (!(payloads = PyList_New(t->destinations)) || !(counts = PyList_New(t->destinations)))
        goto done;
    if ((items ? items_out : lines_out)(t, records, count, payloads, counts) < 0)
        goto done;
    PyObject *name = example < 0 ? Py_NewRef(Py_None)
                                 : PyBytes_FromStringAndSize((const char *)records[example].name,
                                                             records[example].name_len);
    if (name) {
        result = Py_BuildValue("(NNnNn)", payloads, counts, nowhere, name, count);
        payloads = counts = NULL; /* stolen */
    }
done:
    Py_XDECREF(unknown);
    Py_XDECREF(payloads);
    Py_XDECREF(counts);
    if (t->records_cap > (1 << 16)) { /* not a huge one, though */
        PyMem_Free(t->records);
        t->records = NULL;
        t->records_cap = 0;
    }
    PyBuffer_Release(&chunk);
    return result;
}

static PyObject *
RouteTable_get_known(RouteTable *t, void *closure)
{
    return PyLong_FromSize_t(t->current.count + t->retired.count);
}

static PyObject *
RouteTable_get_memory(RouteTable *t, void *closure)
{
    return PyLong_FromSize_t(generation_memory(&t->current) + generation_memory(&t->retired));
}

static PyObject *
format_value(PyObject *module, PyObject *arg)
{
    double v = PyFloat_AsDouble(arg);
    if (v == -1.0 && PyErr_Occurred())
        return NULL;
    if (!isfinite(v) || fabs(v) >= 9.0e15) {
        PyErr_SetString(PyExc_ValueError, "format_value: finite, under 9e15");
        return NULL;
    }
    char buf[64];
    char *end = write_value(buf, v);
    return PyBytes_FromStringAndSize(buf, end - buf);
}

static PyObject *
format_text(PyObject *module, PyObject *arg)
{
    char *text;
    Py_ssize_t len;
    if (PyBytes_AsStringAndSize(arg, &text, &len) < 0)
        return NULL;
    unsigned __int128 q;
    int negative;
    if (scaled_text(text, len, &q, &negative) < 0)
        Py_RETURN_NONE;
    char buf[64];
    char *end = write_scaled(buf, q, negative);
    return PyBytes_FromStringAndSize(buf, end - buf);
}

static PyObject *
position(PyObject *module, PyObject *args)
{
    int kind;
    Py_buffer data;
    if (!PyArg_ParseTuple(args, "iy*:position", &kind, &data))
        return NULL;
    const unsigned char *s = data.buf;
    long result = kind == 1   ? carbon_position(s, data.len)
                  : kind == 2 ? fnv1a_position(s, data.len)
                  : kind == 3 ? mmh3_position(s, data.len)
                              : jump_bucket(s, data.len, 1 << 20);
    PyBuffer_Release(&data);
    return PyLong_FromLong(result);
}

static PyMethodDef RouteTable_methods[] = {
    {"route", (PyCFunction)RouteTable_route, METH_VARARGS, "route(chunk, max_length)"},
    {"learn", (PyCFunction)RouteTable_learn, METH_VARARGS, "learn(names, codes)"},
    {"set_code", (PyCFunction)RouteTable_set_code, METH_VARARGS, "set_code(code, positions)"},
    {"set_ring", (PyCFunction)RouteTable_set_ring, METH_VARARGS,
     "set_ring(kind, positions, codes)"},
    {"clear", (PyCFunction)RouteTable_clear, METH_NOARGS, "forget every name"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef RouteTable_getset[] = {
    {"known", (getter)RouteTable_get_known, NULL, "names held", NULL},
    {"memory", (getter)RouteTable_get_memory, NULL, "bytes held for names", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject RouteTableType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "carbon.relay._route.RouteTable",
    .tp_basicsize = sizeof(RouteTable),
    .tp_dealloc = (destructor)RouteTable_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Name -> route code table and whole-read line router (see the module).",
    .tp_methods = RouteTable_methods,
    .tp_getset = RouteTable_getset,
    .tp_init = (initproc)RouteTable_init,
    .tp_new = PyType_GenericNew,
};

static PyMethodDef module_methods[] = {
    {"format_value", format_value, METH_O,
     "format_value(v) -> bytes: ('%.10f' % v).rstrip('0').rstrip('.') for |v| < 9e15"},
    {"format_text", format_text, METH_O,
     "format_text(text) -> bytes | None: format_value(float(text)) read off the decimal "
     "text, or None when the text does not decide it"},
    {"position", position, METH_VARARGS,
     "position(kind, data) -> int: 1 carbon_ch, 2 fnv1a_ch, 3 mmh3_ch ring position, "
     "4 jump_fnv1a_ch bucket among 2**20"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "carbon.relay._route",
    "The relay's whole-read line router (see carbon.relay.chunks).", -1, module_methods,
};

PyMODINIT_FUNC
PyInit__route(void)
{
    if (PyType_Ready(&RouteTableType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    if (PyModule_AddObjectRef(m, "RouteTable", (PyObject *)&RouteTableType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
