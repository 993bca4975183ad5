/* C twin of carbon.storage.whisper_writer.apply_update, called by
 * carbon.storage.whisper_backend.WhisperDatabase.write_batch: whisper updates of a
 * batch of files with the GIL released.
 *
 * update_files(items, now, lock, autoflush, fadvise_random, aggregate[, python_sums])
 *     -> list
 *
 * items: a sequence of (path: bytes, fd: int, dev: int, ino: int, check: bool,
 * points[, header]) where `points` is a buffer of doubles (array('d')) holding interleaved
 * timestamp, value pairs as the metric cache keeps them; `header` (bytes or None) is
 * given for a file this process made and has not written since: the header as written,
 * every archive empty, so nothing is read before the update. `fd` is an open read-write
 * descriptor of `path` or -1 (then the file is opened for this write and closed after
 * it; posix_fadvise(RANDOM) if `fadvise_random`). With `check`, stat(path) must still
 * name (dev, ino), else the item is left to Python (the file was replaced or deleted).
 *
 * Each item is written exactly as whisper 1.1.10's update_many would (and as
 * carbon.storage.whisper_writer.apply_update does) in the common case, which this
 * module handles whole: timestamps in [0, 2**32), strictly increasing truncated to
 * integers once sorted (points given out of time order are sorted first, the later
 * arrival of a repeated timestamp winning, as the cache's dedupe_sorted hands them to
 * whisper), all of them within the first archive's retention
 * of `now`, no aligned interval 0, no run longer than the archive, a header whisper
 * can read. Archive 0 is written run by run; each lower archive is aggregated interval
 * by interval as whisper's __propagate does (the same reads, the same float operations
 * in the same order), in the iteration order of the same Python set whenever that
 * order could change the result (an empty lower archive, or more intervals than it has
 * slots). Sum-based aggregations go through `aggregate(method, known, neighbors)`
 * (with the GIL) when `python_sums` is true, by default on Pythons whose sum() is not a
 * plain left-to-right addition (3.12 on; the module's PLAIN_SUM is 0 there).
 *
 * The format comes from carbon/storage/whisper_format.py, the one home of the whisper
 * layout: read_header() below mirrors whisper_format.parse_header (METADATA, ARCHIVE_INFO,
 * POINT and AGGREGATION_TYPES are the constants here) and aggregate() mirrors
 * whisper_format.aggregate. tests/storage/test_whisper_batch.py::test_batch_byte_identity
 * binds them: the files this module writes must equal, byte for byte, those of whisper
 * 1.1.10, which whisper_writer.apply_update (built on whisper_format) also equals
 * (tests/storage/test_whisper_identity.py).
 *
 * flock(LOCK_EX) around the update if `lock`; fsync before the unlock if `autoflush`.
 *
 * Returns one (status, seconds) per item: status 0 means written; any other value
 * means nothing may be assumed and Python must do the whole update again (which is
 * idempotent: the same points land in the same slots, the same aggregates are
 * recomputed): 1 points outside the common case, 2 an unusual or corrupt header,
 * 3 a stale or missing file, 4 a failed or short read or write.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "_fileio.h"

#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif

#define POINT_SIZE 12
#define METADATA_SIZE 16
#define ARCHIVE_INFO_SIZE 12
#define MAX_ARCHIVES 64
#define HEADER_GUESS (METADATA_SIZE + 6 * ARCHIVE_INFO_SIZE)

#if PY_VERSION_HEX >= 0x030C0000
#define PLAIN_SUM 0 /* sum() of floats is compensated (Neumaier) from 3.12 on */
#else
#define PLAIN_SUM 1
#endif

enum { DONE = 0, PY_POINTS = 1, PY_HEADER = 2, PY_STALE = 3, PY_IO = 4 };

enum { AVERAGE = 1, SUM, LAST, MAX, MIN, AVG_ZERO, ABSMAX, ABSMIN };

static const char *METHOD_NAMES[] = {
    NULL, "average", "sum", "last", "max", "min", "avg_zero", "absmax", "absmin",
};

typedef struct {
    int64_t offset, step, points, size;
} Archive;

typedef struct {
    PyObject *path_obj;
    const char *path;
    int fd;
    int check;
    unsigned long long dev, ino;
    PyObject *header_obj; /* the header of a file known empty, or NULL (read it) */
    Py_buffer view;
    int has_view;
    int status;
    double seconds;
} Item;

/* What one update needs besides its item; scratch buffers grow as needed. */
typedef struct {
    PyThreadState *save;  /* the released thread state (the GIL is taken back briefly);
                             NULL: the GIL is held throughout */
    PyObject *aggregate;
    int64_t now;
    int lock, autoflush, fadvise_random;
    int python_sums; /* sum-based aggregations through `aggregate` */
    /* the file */
    int fd;
    /* with `image`: the file is this memory (an empty file's first update, computed
       before the file is made): reads past `image_cap` (up to `total`) see zeroes, a
       write past it fails; `image_end` is the end of the bytes written */
    unsigned char *image;
    int64_t image_cap, image_end, total;
    int method;
    double xff;
    int count;
    Archive arch[MAX_ARCHIVES];
    int64_t bases[MAX_ARCHIVES];
    int known[MAX_ARCHIVES];
    /* scratch */
    int64_t *intervals;
    double *values;
    int64_t *lower;
    Py_ssize_t capacity;
    unsigned char *bytes;
    size_t bytes_capacity;
    double *slot_values;
    char *present;
    size_t slot_capacity;
    /* points not in time order: sorted (stable) and deduplicated here first */
    struct Arrival *arrivals;
    double *ordered;
    Py_ssize_t ordered_capacity;
} Ctx;

/* A point and where it came in the cache's order (ties: the later one wins). */
struct Arrival {
    double t, v;
    Py_ssize_t index;
};

/* -- small helpers --------------------------------------------------------------- */

static inline int64_t
floordiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q -= 1;
    return q;
}

static inline int64_t
pymod(int64_t a, int64_t b)
{
    int64_t r = a % b;
    if (r != 0 && ((r < 0) != (b < 0)))
        r += b;
    return r;
}

static inline uint32_t
get_u32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline void
put_u32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static inline double
get_f64(const unsigned char *p)
{
    uint64_t bits = 0;
    double d;
    for (int i = 0; i < 8; i++)
        bits = (bits << 8) | p[i];
    memcpy(&d, &bits, sizeof d);
    return d;
}

static inline void
put_f64(unsigned char *p, double d)
{
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    for (int i = 7; i >= 0; i--) {
        p[i] = (unsigned char)bits;
        bits >>= 8;
    }
}

static inline float
get_f32(const unsigned char *p)
{
    uint32_t bits = get_u32(p);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static int
grow_points(Ctx *ctx, Py_ssize_t n)
{
    if (n <= ctx->capacity)
        return 0;
    int64_t *intervals = realloc(ctx->intervals, (size_t)n * sizeof(int64_t));
    if (intervals == NULL)
        return -1;
    ctx->intervals = intervals;
    double *values = realloc(ctx->values, (size_t)n * sizeof(double));
    if (values == NULL)
        return -1;
    ctx->values = values;
    int64_t *lower = realloc(ctx->lower, (size_t)n * sizeof(int64_t));
    if (lower == NULL)
        return -1;
    ctx->lower = lower;
    ctx->capacity = n;
    return 0;
}

static int
grow_bytes(Ctx *ctx, size_t n)
{
    if (n <= ctx->bytes_capacity)
        return 0;
    unsigned char *bytes = realloc(ctx->bytes, n);
    if (bytes == NULL)
        return -1;
    ctx->bytes = bytes;
    ctx->bytes_capacity = n;
    return 0;
}

static int
grow_slots(Ctx *ctx, size_t n)
{
    if (n <= ctx->slot_capacity)
        return 0;
    double *values = realloc(ctx->slot_values, n * sizeof(double));
    if (values == NULL)
        return -1;
    ctx->slot_values = values;
    char *present = realloc(ctx->present, n);
    if (present == NULL)
        return -1;
    ctx->present = present;
    ctx->slot_capacity = n;
    return 0;
}

/* -- header ---------------------------------------------------------------------- */

/* -- the file: on disk, or an empty file's image in memory ---------------------- */

/* Exactly `len` bytes at `offset`: 0, or an errno (EIO past the end). */
static int
ctx_read(Ctx *ctx, void *data, size_t len, int64_t offset)
{
    if (ctx->image == NULL)
        return read_exact(ctx->fd, data, len, (off_t)offset);
    if (offset < 0 || offset + (int64_t)len > ctx->total)
        return EIO;
    size_t inside = offset >= ctx->image_cap ? 0
        : (size_t)(ctx->image_cap - offset) < len ? (size_t)(ctx->image_cap - offset) : len;
    if (inside)
        memcpy(data, ctx->image + offset, inside);
    memset((char *)data + inside, 0, len - inside); /* the rest of an empty file: zeroes */
    return 0;
}

static int
ctx_write(Ctx *ctx, const void *data, size_t len, int64_t offset)
{
    if (ctx->image == NULL)
        return write_all(ctx->fd, data, len, (off_t)offset);
    if (offset < 0 || offset + (int64_t)len > ctx->image_cap)
        return EFBIG; /* beyond the image: the update is left to the file */
    memcpy(ctx->image + offset, data, len);
    if (offset + (int64_t)len > ctx->image_end)
        ctx->image_end = offset + (int64_t)len;
    return 0;
}

/* Check the header in `raw` (`got` bytes read from offset 0; archive 0's base point is
 * taken when it follows the header and was read). */
static int
parse_header_bytes(Ctx *ctx, const unsigned char *raw, size_t got)
{
    if (got < METADATA_SIZE)
        return PY_HEADER;
    uint32_t method = get_u32(raw);
    double xff = (double)get_f32(raw + 8);
    uint32_t count = get_u32(raw + 12);
    if (count == 0 || count > MAX_ARCHIVES || method < AVERAGE || method > ABSMIN)
        return PY_HEADER;
    if (!(xff >= 0.0 && xff <= 1.0))
        return PY_HEADER;
    size_t size = METADATA_SIZE + (size_t)count * ARCHIVE_INFO_SIZE;
    if (got < size)
        return PY_HEADER;
    ctx->method = (int)method;
    ctx->xff = xff;
    ctx->count = (int)count;
    for (uint32_t i = 0; i < count; i++) {
        const unsigned char *p = raw + METADATA_SIZE + i * ARCHIVE_INFO_SIZE;
        Archive *a = &ctx->arch[i];
        a->offset = get_u32(p);
        a->step = get_u32(p + 4);
        a->points = get_u32(p + 8);
        a->size = a->points * POINT_SIZE;
        if (a->step == 0 || a->points == 0)
            return PY_HEADER;
        ctx->known[i] = 0;
    }
    if (ctx->arch[0].offset == (int64_t)size && got >= size + POINT_SIZE) {
        ctx->bases[0] = get_u32(raw + size);
        ctx->known[0] = 1;
    }
    return DONE;
}

/* Read and check the header (and archive 0's base point when it follows the header). */
static int
read_header(Ctx *ctx)
{
    unsigned char raw[METADATA_SIZE + MAX_ARCHIVES * ARCHIVE_INFO_SIZE + POINT_SIZE];
    size_t want = HEADER_GUESS + POINT_SIZE;
    ssize_t got;
    do {
        got = pread(ctx->fd, raw, want, 0);
    } while (got < 0 && errno == EINTR);
    if (got >= METADATA_SIZE) {
        uint32_t count = get_u32(raw + 12);
        size_t size = METADATA_SIZE + (size_t)count * ARCHIVE_INFO_SIZE;
        if (count <= MAX_ARCHIVES && (size_t)got < size + POINT_SIZE && (size_t)got == want) {
            do {
                got = pread(ctx->fd, raw, size + POINT_SIZE, 0);
            } while (got < 0 && errno == EINTR);
        }
    }
    return got < 0 ? PY_HEADER : parse_header_bytes(ctx, raw, (size_t)got);
}

/* The header of a file known to be empty (just made, nothing written since): parsed from
 * `header` (its bytes as written), every archive's base point 0, nothing read. */
static int
known_empty(Ctx *ctx, PyObject *header)
{
    int status = parse_header_bytes(ctx, (const unsigned char *)PyBytes_AS_STRING(header),
                                    (size_t)PyBytes_GET_SIZE(header));
    if (status != DONE)
        return status;
    for (int i = 0; i < ctx->count; i++) {
        ctx->bases[i] = 0;
        ctx->known[i] = 1;
    }
    return DONE;
}

/* The timestamp in slot 0 of archive `index` as it is on disk now. */
static int
base_of(Ctx *ctx, int index, int64_t *out)
{
    if (!ctx->known[index]) {
        unsigned char raw[4];
        if (ctx_read(ctx, raw, 4, ctx->arch[index].offset))
            return -1;
        ctx->bases[index] = get_u32(raw);
        ctx->known[index] = 1;
    }
    *out = ctx->bases[index];
    return 0;
}

/* -- aggregation ----------------------------------------------------------------- */

/* `aggregate(method, known, neighbors)` in Python, for sums where sum() is not plain. */
static int
python_aggregate(Ctx *ctx, const double *values, const char *present, Py_ssize_t n,
                 double *out)
{
    int ok = -1;
    if (ctx->save != NULL)
        PyEval_RestoreThread(ctx->save);
    PyObject *known = PyList_New(0), *neighbors = PyList_New(n), *result = NULL;
    if (known == NULL || neighbors == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item;
        if (present[i]) {
            item = PyFloat_FromDouble(values[i]);
            if (item == NULL || PyList_Append(known, item)) {
                Py_XDECREF(item);
                goto done;
            }
        }
        else {
            item = Py_None;
            Py_INCREF(item);
        }
        PyList_SET_ITEM(neighbors, i, item);
    }
    result = PyObject_CallFunction(ctx->aggregate, "sOO", METHOD_NAMES[ctx->method],
                                   known, neighbors);
    if (result != NULL) {
        double value = PyFloat_AsDouble(result);
        if (!(value == -1.0 && PyErr_Occurred())) {
            *out = value;
            ok = 0;
        }
    }
done:
    if (ok)
        PyErr_Clear();
    Py_XDECREF(result);
    Py_XDECREF(known);
    Py_XDECREF(neighbors);
    if (ctx->save != NULL)
        ctx->save = PyEval_SaveThread();
    return ok;
}

/* whisper's aggregate() of one lower interval: `known` values are those present. */
static int
aggregate(Ctx *ctx, const double *values, const char *present, Py_ssize_t n,
          Py_ssize_t known, double *out)
{
    int method = ctx->method;
    if (ctx->python_sums && (method == AVERAGE || method == SUM || method == AVG_ZERO))
        return python_aggregate(ctx, values, present, n, out);
    double best = 0.0, total = 0.0;
    int first = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (method == AVG_ZERO) {
            /* `v or 0`: None and zeros count as int 0, which adds 0.0 */
            if (present[i])
                total += values[i];
            continue;
        }
        if (!present[i])
            continue;
        double v = values[i];
        if (first) {
            best = v;
            total = 0.0 + v;
            first = 0;
            continue;
        }
        total += v;
        switch (method) {
        case LAST:
            best = v;
            break;
        case MAX:
            if (v > best)
                best = v;
            break;
        case MIN:
            if (v < best)
                best = v;
            break;
        case ABSMAX:
            if (fabs(v) > fabs(best))
                best = v;
            break;
        case ABSMIN:
            if (fabs(v) < fabs(best))
                best = v;
            break;
        default:
            break;
        }
    }
    switch (method) {
    case AVERAGE:
        *out = total / (double)known;
        break;
    case SUM:
        *out = total;
        break;
    case AVG_ZERO:
        *out = total / (double)n;
        break;
    default:
        *out = best;
    }
    return 0;
}

/* -- propagation ----------------------------------------------------------------- */

/* whisper's __propagate of lower interval `start` from archive `hi` into `lo`:
 * 1 if a point was written, 0 if not, -1 on a failed or short read or write. */
static int
propagate(Ctx *ctx, int hi, int lo, int64_t start)
{
    const Archive *high = &ctx->arch[hi], *low = &ctx->arch[lo];
    int64_t h_base;
    if (base_of(ctx, hi, &h_base))
        return -1;
    int64_t first;
    if (h_base == 0)
        first = high->offset;
    else
        first = high->offset
            + pymod(floordiv(start - h_base, high->step) * POINT_SIZE, high->size);
    int64_t wanted = low->step / high->step * POINT_SIZE;
    int64_t relative_last = pymod(first - high->offset + wanted, high->size);
    int64_t last = relative_last + high->offset;
    size_t length, head;
    if (first < last) {
        length = head = (size_t)(last - first);
    }
    else {
        head = (size_t)(high->offset + high->size - first);
        length = head + (size_t)(last - high->offset);
    }
    if (grow_bytes(ctx, length) || grow_slots(ctx, length / POINT_SIZE + 1))
        return -1;
    if (ctx_read(ctx, ctx->bytes, head, first))
        return -1;
    if (length > head && ctx_read(ctx, ctx->bytes + head, length - head, high->offset))
        return -1;
    Py_ssize_t n = (Py_ssize_t)(length / POINT_SIZE), known = 0;
    int64_t expected = start;
    for (Py_ssize_t i = 0; i < n; i++) {
        const unsigned char *p = ctx->bytes + i * POINT_SIZE;
        ctx->present[i] = (int64_t)get_u32(p) == expected;
        if (ctx->present[i]) {
            ctx->slot_values[i] = get_f64(p + 4);
            known++;
        }
        expected += high->step;
    }
    if (!known)
        return 0;
    if (!((double)known / (double)n >= ctx->xff))
        return 0;
    double value;
    if (aggregate(ctx, ctx->slot_values, ctx->present, n, known, &value))
        return -1;
    int64_t l_base;
    if (base_of(ctx, lo, &l_base))
        return -1;
    int64_t offset = low->offset;
    if (l_base != 0)
        offset += pymod(floordiv(start - l_base, low->step) * POINT_SIZE, low->size);
    unsigned char point[POINT_SIZE];
    put_u32(point, (uint32_t)start);
    put_f64(point + 4, value);
    if (ctx_write(ctx, point, POINT_SIZE, offset))
        return -1;
    if (offset == low->offset)
        ctx->bases[lo] = start;
    return 1;
}

/* Reorder `values` (distinct) into the iteration order of a Python set built by adding
 * them in the given order. -1 on failure. */
static int
set_order(Ctx *ctx, int64_t *values, Py_ssize_t n)
{
    int ok = -1;
    Py_ssize_t k = 0;
    if (ctx->save != NULL)
        PyEval_RestoreThread(ctx->save);
    PyObject *set = PySet_New(NULL), *iterator = NULL, *item;
    if (set == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        item = PyLong_FromLongLong(values[i]);
        if (item == NULL || PySet_Add(set, item)) {
            Py_XDECREF(item);
            goto done;
        }
        Py_DECREF(item);
    }
    iterator = PyObject_GetIter(set);
    if (iterator == NULL)
        goto done;
    while (k < n && (item = PyIter_Next(iterator)) != NULL) {
        values[k++] = PyLong_AsLongLong(item);
        Py_DECREF(item);
    }
    if (k == n && !PyErr_Occurred())
        ok = 0;
done:
    if (ok)
        PyErr_Clear();
    Py_XDECREF(iterator);
    Py_XDECREF(set);
    if (ctx->save != NULL)
        ctx->save = PyEval_SaveThread();
    return ok;
}

/* Every coarser archive, level by level, from the archive-0 `intervals` (ascending). */
static int
propagate_all(Ctx *ctx, Py_ssize_t m)
{
    int higher = 0;
    for (int lo = 0; lo < ctx->count; lo++) {
        const Archive *low = &ctx->arch[lo];
        if (low->step <= ctx->arch[0].step)
            continue;
        Py_ssize_t u = 0;
        for (Py_ssize_t i = 0; i < m; i++) {
            int64_t x = ctx->intervals[i] - pymod(ctx->intervals[i], low->step);
            if (u == 0 || ctx->lower[u - 1] != x)
                ctx->lower[u++] = x;
        }
        if (u > 1) {
            int64_t l_base;
            if (base_of(ctx, lo, &l_base))
                return PY_IO;
            if ((l_base == 0 || (ctx->lower[u - 1] - ctx->lower[0]) / low->step >= low->points)
                && set_order(ctx, ctx->lower, u))
                return PY_IO;
        }
        int any = 0;
        for (Py_ssize_t i = 0; i < u; i++) {
            int done = propagate(ctx, higher, lo, ctx->lower[i]);
            if (done < 0)
                return PY_IO;
            any |= done;
        }
        if (!any)
            break;
        higher = lo;
    }
    return DONE;
}

/* -- one file -------------------------------------------------------------------- */

static int
by_time_then_arrival(const void *a, const void *b)
{
    const struct Arrival *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x->index < y->index ? -1 : (x->index > y->index);
}

/* `raw`'s points in time order, the last one of a repeated timestamp kept: what the
 * writer's dedupe_sorted hands whisper (sorted(dict(pairs).items())). `raw` itself
 * when it is in order already; else ctx->ordered, with `*n` the points left. Every
 * timestamp must be in [0, 2**32) (else, NaN included: PY_POINTS), so the timestamps
 * handed back strictly increase. */
static int
in_time_order(Ctx *ctx, const double **raw, Py_ssize_t *n)
{
    const double *given = *raw;
    Py_ssize_t count = *n;
    int ordered = 1;
    for (Py_ssize_t i = 0; i < count; i++) {
        double t = given[2 * i];
        if (!(t >= 0.0 && t < 4294967296.0))
            return PY_POINTS;
        if (i > 0 && !(t > given[2 * i - 2]))
            ordered = 0;
    }
    if (ordered)
        return DONE;
    if (count > ctx->ordered_capacity) {
        struct Arrival *arrivals = realloc(ctx->arrivals, (size_t)count * sizeof *arrivals);
        if (arrivals == NULL)
            return PY_IO;
        ctx->arrivals = arrivals;
        double *pairs = realloc(ctx->ordered, (size_t)count * 2 * sizeof(double));
        if (pairs == NULL)
            return PY_IO;
        ctx->ordered = pairs;
        ctx->ordered_capacity = count;
    }
    struct Arrival *arrivals = ctx->arrivals;
    for (Py_ssize_t i = 0; i < count; i++) {
        arrivals[i].t = given[2 * i];
        arrivals[i].v = given[2 * i + 1];
        arrivals[i].index = i;
    }
    qsort(arrivals, (size_t)count, sizeof *arrivals, by_time_then_arrival);
    Py_ssize_t kept = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (i + 1 < count && arrivals[i + 1].t == arrivals[i].t)
            continue; /* a later point of the same timestamp follows: it wins */
        ctx->ordered[2 * kept] = arrivals[i].t;
        ctx->ordered[2 * kept + 1] = arrivals[i].v;
        kept++;
    }
    *raw = ctx->ordered;
    *n = kept;
    return DONE;
}

/* Aligned intervals and values of archive 0 (the newest point of an interval wins). */
static int
prepare(Ctx *ctx, const double *raw, Py_ssize_t n, Py_ssize_t *m_out)
{
    const Archive *a0 = &ctx->arch[0];
    int sorted = in_time_order(ctx, &raw, &n);
    if (sorted != DONE)
        return sorted;
    if (grow_points(ctx, n))
        return PY_IO;
    int64_t previous_int = -1;
    Py_ssize_t m = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t stamp = (int64_t)raw[2 * i]; /* in range and increasing: in_time_order */
        if (stamp <= previous_int)
            return PY_POINTS; /* two points in one second */
        previous_int = stamp;
        int64_t interval = stamp - stamp % a0->step;
        if (m > 0 && ctx->intervals[m - 1] == interval) {
            ctx->values[m - 1] = raw[2 * i + 1];
            continue;
        }
        ctx->intervals[m] = interval;
        ctx->values[m] = raw[2 * i + 1];
        m++;
    }
    if (ctx->now - (int64_t)raw[0] > a0->step * a0->points)
        return PY_POINTS; /* some point belongs to a coarser archive (or none) */
    if (ctx->intervals[0] == 0)
        return PY_POINTS; /* whisper's runs behave differently at interval 0 */
    /* no run may be longer than the archive (whisper writes those past its end) */
    Py_ssize_t run = 1;
    for (Py_ssize_t i = 1; i < m; i++) {
        run = ctx->intervals[i] == ctx->intervals[i - 1] + a0->step ? run + 1 : 1;
        if (run > a0->points)
            return PY_POINTS;
    }
    *m_out = m;
    return DONE;
}

/* Archive 0, run by run, relative to its base point as read before the first run. */
static int
write_first_archive(Ctx *ctx, Py_ssize_t m)
{
    const Archive *a0 = &ctx->arch[0];
    int64_t base;
    if (base_of(ctx, 0, &base))
        return PY_IO;
    if (base == 0)
        base = ctx->intervals[0];
    if (grow_bytes(ctx, (size_t)m * POINT_SIZE))
        return PY_IO;
    Py_ssize_t begin = 0;
    while (begin < m) {
        Py_ssize_t end = begin + 1;
        while (end < m && ctx->intervals[end] == ctx->intervals[end - 1] + a0->step)
            end++;
        unsigned char *data = ctx->bytes;
        for (Py_ssize_t i = begin; i < end; i++) {
            put_u32(data + (i - begin) * POINT_SIZE, (uint32_t)ctx->intervals[i]);
            put_f64(data + (i - begin) * POINT_SIZE + 4, ctx->values[i]);
        }
        int64_t length = (int64_t)(end - begin) * POINT_SIZE;
        int64_t offset = a0->offset
            + pymod(floordiv(ctx->intervals[begin] - base, a0->step) * POINT_SIZE, a0->size);
        int64_t beyond = offset + length - (a0->offset + a0->size);
        if (beyond > 0) {
            if (ctx_write(ctx, data, (size_t)(length - beyond), offset)
                || ctx_write(ctx, data + length - beyond, (size_t)beyond, a0->offset))
                return PY_IO;
            ctx->bases[0] = get_u32(data + length - beyond);
            ctx->known[0] = 1;
        }
        else {
            if (ctx_write(ctx, data, (size_t)length, offset))
                return PY_IO;
            if (offset == a0->offset) {
                ctx->bases[0] = get_u32(data);
                ctx->known[0] = 1;
            }
        }
        begin = end;
    }
    return DONE;
}

/* The update proper, once the header is known: archive 0, then the coarser ones. */
static int
apply_points(Ctx *ctx, const double *raw, Py_ssize_t n)
{
    Py_ssize_t m = 0;
    int status = prepare(ctx, raw, n, &m);
    if (status == DONE)
        status = write_first_archive(ctx, m);
    if (status == DONE)
        status = propagate_all(ctx, m);
    return status;
}

static double
wall_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
update_one(Ctx *ctx, Item *item)
{
    double started = wall_clock();
    const double *raw = item->view.buf;
    Py_ssize_t n = item->view.len / (Py_ssize_t)(2 * sizeof(double));
    int opened = 0, locked = 0, status;
    item->seconds = 0.0;
    if (n == 0) {
        item->status = DONE;
        return;
    }
    if (item->fd >= 0) {
        ctx->fd = item->fd;
        if (item->check) {
            struct stat st;
            if (stat(item->path, &st) != 0 || (unsigned long long)st.st_dev != item->dev
                || (unsigned long long)st.st_ino != item->ino) {
                item->status = PY_STALE;
                return;
            }
        }
    }
    else {
        do {
            ctx->fd = open(item->path, O_RDWR | O_CLOEXEC);
        } while (ctx->fd < 0 && errno == EINTR);
        if (ctx->fd < 0) {
            item->status = PY_STALE;
            return;
        }
        opened = 1;
#ifdef POSIX_FADV_RANDOM
        if (ctx->fadvise_random)
            posix_fadvise(ctx->fd, 0, 0, POSIX_FADV_RANDOM);
#endif
    }
    if (ctx->lock) {
        if (flock_retry(ctx->fd, LOCK_EX)) {
            status = PY_IO;
            goto out;
        }
        locked = 1;
    }
    status = item->header_obj != NULL ? known_empty(ctx, item->header_obj) : read_header(ctx);
    if (status == DONE)
        status = apply_points(ctx, raw, n);
    if (status == DONE && ctx->autoflush && fsync(ctx->fd) != 0)
        status = PY_IO;
out:
    if (locked)
        flock_retry(ctx->fd, LOCK_UN);
    if (opened)
        close(ctx->fd);
    item->status = status;
    item->seconds = wall_clock() - started;
}

/* -- module ---------------------------------------------------------------------- */

/* A buffer of interleaved (timestamp, value) doubles, as the metric cache holds them;
 * -1 with an exception set. `*has_view` says whether `view` must be released. */
static int
get_points(PyObject *points, Py_buffer *view, int *has_view)
{
    if (PyObject_GetBuffer(points, view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS))
        return -1;
    *has_view = 1;
    if (view->itemsize != sizeof(double) || view->format == NULL
        || strcmp(view->format, "d") != 0 || view->len % (2 * sizeof(double))) {
        PyErr_SetString(PyExc_TypeError, "points must be an array('d') of pairs");
        return -1;
    }
    return 0;
}

static void
free_scratch(Ctx *ctx)
{
    free(ctx->intervals);
    free(ctx->values);
    free(ctx->lower);
    free(ctx->bytes);
    free(ctx->slot_values);
    free(ctx->present);
    free(ctx->arrivals);
    free(ctx->ordered);
}

static void
release_items(Item *items, Py_ssize_t count)
{
    for (Py_ssize_t i = 0; i < count; i++) {
        if (items[i].has_view)
            PyBuffer_Release(&items[i].view);
        Py_XDECREF(items[i].path_obj);
        Py_XDECREF(items[i].header_obj);
    }
    PyMem_Free(items);
}

static int
fill_item(Item *item, PyObject *entry)
{
    PyObject *path, *points, *header = Py_None;
    int fd, check;
    unsigned long long dev, ino;
    if (!PyTuple_Check(entry)) {
        PyErr_SetString(PyExc_TypeError, "items must be tuples");
        return -1;
    }
    if (!PyArg_ParseTuple(entry, "O!iKKpO|O", &PyBytes_Type, &path, &fd, &dev, &ino, &check,
                          &points, &header))
        return -1;
    if (header != Py_None) {
        if (!PyBytes_Check(header)) {
            PyErr_SetString(PyExc_TypeError, "header must be bytes or None");
            return -1;
        }
        Py_INCREF(header);
        item->header_obj = header;
    }
    if (get_points(points, &item->view, &item->has_view))
        return -1;
    if (PyBytes_GET_SIZE(path) == 0 || strlen(PyBytes_AS_STRING(path))
        != (size_t)PyBytes_GET_SIZE(path)) {
        PyErr_SetString(PyExc_ValueError, "path must be non-empty, without NUL bytes");
        return -1;
    }
    Py_INCREF(path);
    item->path_obj = path;
    item->path = PyBytes_AS_STRING(path);
    item->fd = fd;
    item->dev = dev;
    item->ino = ino;
    item->check = check;
    return 0;
}

static PyObject *
update_files(PyObject *module, PyObject *args)
{
    PyObject *sequence, *aggregate_fn, *fast, *result = NULL;
    long long now;
    int lock, autoflush, fadvise_random, python_sums = !PLAIN_SUM;
    Py_ssize_t count, i;
    Item *items;
    Ctx ctx;

    (void)module;
    if (!PyArg_ParseTuple(args, "OLpppO|p", &sequence, &now, &lock, &autoflush,
                          &fadvise_random, &aggregate_fn, &python_sums))
        return NULL;
    fast = PySequence_Fast(sequence, "items must be a sequence");
    if (fast == NULL)
        return NULL;
    count = PySequence_Fast_GET_SIZE(fast);
    items = PyMem_Calloc(count ? (size_t)count : 1, sizeof(Item));
    if (items == NULL) {
        Py_DECREF(fast);
        return PyErr_NoMemory();
    }
    for (i = 0; i < count; i++) {
        if (fill_item(&items[i], PySequence_Fast_GET_ITEM(fast, i))) {
            release_items(items, count);
            Py_DECREF(fast);
            return NULL;
        }
    }
    Py_DECREF(fast);

    memset(&ctx, 0, sizeof ctx);
    ctx.aggregate = aggregate_fn;
    ctx.now = now;
    ctx.lock = lock;
    ctx.autoflush = autoflush;
    ctx.fadvise_random = fadvise_random;
    ctx.python_sums = python_sums;
    ctx.save = PyEval_SaveThread();
    for (i = 0; i < count; i++)
        update_one(&ctx, &items[i]);
    PyEval_RestoreThread(ctx.save);
    free_scratch(&ctx);

    result = PyList_New(count);
    if (result != NULL) {
        for (i = 0; i < count; i++) {
            PyObject *entry = Py_BuildValue("(id)", items[i].status, items[i].seconds);
            if (entry == NULL) {
                Py_CLEAR(result);
                break;
            }
            PyList_SET_ITEM(result, i, entry);
        }
    }
    release_items(items, count);
    return result;
}

/* first_images(items, now, aggregate[, python_sums]) -> list
 *
 * items: (header: bytes, total: int, points) of files not made yet. Per item, the bytes
 * from offset 0 the file holds once created (header, zeroes) and updated with `points`
 * as update_files would update it, up to the end of the last byte the update wrote: so
 * a create can write the header and the first points in one write (the rest of the file
 * is zeroes). None where update_files would leave the points to Python, or where the
 * update writes beyond IMAGE_CAP bytes (or the file's end). */
#define IMAGE_CAP (16384 + 4096) /* _whisper_create.c writes files up to this in one go */

typedef struct {
    PyObject *header; /* borrowed: the items sequence holds it */
    long long total;
    Py_buffer view;
    int has_view;
    int status;
    long long cap; /* bytes of the image kept: the file's, at most IMAGE_CAP */
    Py_ssize_t end; /* bytes of the image written (from offset 0) */
    unsigned char *image; /* `cap` bytes of the batch's arena */
} ImageItem;

static PyObject *
first_images(PyObject *module, PyObject *args)
{
    PyObject *sequence, *aggregate_fn, *fast, *result = NULL;
    long long now;
    int python_sums = !PLAIN_SUM;
    Py_ssize_t count, i;
    Ctx ctx;
    ImageItem *items = NULL;
    unsigned char *arena = NULL;

    (void)module;
    if (!PyArg_ParseTuple(args, "OLO|p", &sequence, &now, &aggregate_fn, &python_sums))
        return NULL;
    fast = PySequence_Fast(sequence, "items must be a sequence");
    if (fast == NULL)
        return NULL;
    count = PySequence_Fast_GET_SIZE(fast);
    items = PyMem_Calloc(count ? (size_t)count : 1, sizeof(ImageItem));
    if (items == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    size_t arena_size = 0;
    for (i = 0; i < count; i++) {
        ImageItem *item = &items[i];
        PyObject *points;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fast, i), "O!LO", &PyBytes_Type,
                              &item->header, &item->total, &points)
            || get_points(points, &item->view, &item->has_view))
            goto done;
        item->status = PY_POINTS;
        item->cap = item->total < IMAGE_CAP ? item->total : IMAGE_CAP;
        arena_size += item->cap > 0 ? (size_t)item->cap : 0;
    }
    arena = malloc(arena_size ? arena_size : 1);
    if (arena == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    arena_size = 0;
    for (i = 0; i < count; i++) {
        items[i].image = arena + arena_size;
        arena_size += items[i].cap > 0 ? (size_t)items[i].cap : 0;
    }
    /* with the GIL held (ctx.save NULL): memory work of well under a microsecond a file,
       less than taking the GIL back after releasing it would cost a busy thread */
    memset(&ctx, 0, sizeof ctx);
    ctx.aggregate = aggregate_fn;
    ctx.now = now;
    ctx.python_sums = python_sums;
    ctx.fd = -1;
    for (i = 0; i < count; i++) {
        ImageItem *item = &items[i];
        Py_ssize_t header_len = PyBytes_GET_SIZE(item->header);
        Py_ssize_t n = item->view.len / (Py_ssize_t)(2 * sizeof(double));
        if (n == 0 || header_len > item->cap)
            continue;
        ctx.image = item->image;
        ctx.total = item->total;
        ctx.image_cap = item->cap;
        ctx.image_end = header_len;
        memcpy(item->image, PyBytes_AS_STRING(item->header), (size_t)header_len);
        memset(item->image + header_len, 0, (size_t)(ctx.image_cap - header_len));
        item->status = known_empty(&ctx, item->header);
        if (item->status == DONE)
            item->status = apply_points(&ctx, item->view.buf, n);
        item->end = (Py_ssize_t)ctx.image_end;
    }
    free_scratch(&ctx);
    result = PyList_New(count);
    if (result == NULL)
        goto done;
    for (i = 0; i < count; i++) {
        PyObject *made;
        if (items[i].status == DONE)
            made = PyBytes_FromStringAndSize((const char *)items[i].image, items[i].end);
        else
            made = Py_NewRef(Py_None);
        if (made == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, i, made);
    }
done:
    if (items != NULL) {
        for (i = 0; i < count; i++) {
            if (items[i].has_view)
                PyBuffer_Release(&items[i].view);
        }
    }
    PyMem_Free(items);
    free(arena);
    Py_DECREF(fast);
    return result;
}

static PyMethodDef methods[] = {
    {"update_files", update_files, METH_VARARGS,
     "update_files(items, now, lock, autoflush, fadvise_random, aggregate[, python_sums])"
     " -> list\n\n"
     "Write cached points into whisper files with the GIL released, as whisper's\n"
     "update_many would; per item (status, seconds), status 0 when written."},
    {"first_images", first_images, METH_VARARGS,
     "first_images(items, now, aggregate[, python_sums]) -> list\n\n"
     "Per (header, total, points) of a file not made yet: its first bytes once made\n"
     "and updated with the points (up to the last byte written), or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "carbon.storage._whisper_writer",
    "Batch whisper updates with the GIL released.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__whisper_writer(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "PLAIN_SUM", PLAIN_SUM)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
