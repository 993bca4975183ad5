/* Whisper point ranges read straight from the files into numpy arrays (optional accelerator).
 *
 * read_heads(paths, limit, sizes) -> list
 *
 * For each path: open, fstat, read up to ``limit`` bytes at offset 0, close. The item is
 * the header's bytes (cut to the header's size, 16 + 12 x archive count, when all of it
 * was read; else everything read) or the errno (an int) when the file could not be
 * opened or read; sizes[r] (a writable int64 buffer) gets the file's size.
 *
 * scan(mode, paths, offsets, sizes, targets, from_interval, until_interval, step, points,
 *      drop, vpp, compensated, out1, out2, out3[, xff]) -> list
 *
 * For row r: open paths[r], read the chosen archive's first point (at offsets[r]; the
 * archive is sizes[r] bytes), and, unless that point's timestamp is 0 (an empty archive:
 * every slot empty), the ``points`` records from from_interval to until_interval
 * (whisper.fetch's offsets, in two pieces when the range wraps around the archive's end),
 * close. Record i is a value when its timestamp is from_interval + i * step
 * (whisper.fetch's rule). What happens with the values depends on ``mode``:
 *
 *   0 (rows):   out1[r][i] = value or 0.0 (float64), out2[r][i] = 1 or 0 (bool);
 *               len(paths) x points items each.
 *   1 (sum):    out1[g][i] += value for g = targets[r], rows added in order, with
 *               out2 the running corrections of Python 3.12's sum() when ``compensated``,
 *               out3[g][i] (int64) counts the values; groups x points items each.
 *   2 (consolidate): as sum, into bucket (i - drop) // vpp of row r for i >= drop;
 *               len(paths) x ceil((points - drop) / vpp) items each.
 *   3 (means):  mode 2's buckets finished in place: out1[r][b] = the bucket's sum (plus
 *               its correction where that is non-zero and finite) / its count of values,
 *               NaN where it has none or count / vpp < xff (the optional last argument,
 *               default 0); out2 and out3 are not used. What webapp.pysum.finish
 *               gives from mode 2's arrays, without them.
 *
 * Nothing but the sums and counts is kept for modes 1 and 2: a request summing or
 * consolidating many files never holds all their points. Returns the rows that could
 * not be read as (row, errno) pairs (errno 0: short read); in mode 0 their slots are
 * left empty, in modes 1 and 2 they add nothing (a file changed while it is read may
 * add part of its points).
 *
 * list_dirs(paths) -> list
 *
 * For each directory path: None when it cannot be listed, else (names, kinds): the
 * entries' names (str, as os.scandir gives them, '.' and '..' left out) and a bytes
 * object of one flag set per entry: 1 a directory, 2 a regular file (both after following
 * a symlink, as DirEntry.is_dir() / is_file() answer), 4 a symlink. The finder's
 * wildcard levels list every matching directory of a level in one call.
 *
 * path_kinds(paths) -> bytes
 *
 * The same flags for each path (lstat, then stat for a symlink; 0 when it does not
 * exist): the finder's literal levels.
 *
 * All run with the GIL released. A scan of SHARED_RECORDS records or more, and headers
 * or kinds of SHARED_FILES paths or more, are shared by two threads when the machine
 * has two processors: sums have one thread load the files into a ring of buffers while
 * the other adds them (each column still adds its rows in the given order, so the
 * floats do not change), everything else splits the rows.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#define RECORD 12

static int
read_all(int fd, char *dst, long long size, long long offset)
{
    while (size > 0) {
        ssize_t n = pread(fd, dst, (size_t)size, (off_t)offset);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno ? errno : EIO;
        }
        if (n == 0)
            return -1;  /* short read */
        dst += n;
        size -= n;
        offset += n;
    }
    return 0;
}

static inline uint32_t
big32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
#if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return __builtin_bswap32(v);
#else
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
#endif
}

static inline double
big_double(const unsigned char *p)
{
    uint64_t v;
    double d;
    memcpy(&v, p, sizeof v);
#if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = __builtin_bswap64(v);
#else
    v = 0;
    for (int b = 0; b < 8; b++)
        v = (v << 8) | p[b];
#endif
    memcpy(&d, &v, sizeof d);
    return d;
}

/* Python's a // b and a % b for b > 0 */
static inline long long
floor_div(long long a, long long b)
{
    long long q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

static inline long long
floor_mod(long long a, long long b)
{
    long long r = a % b;
    return r < 0 ? r + b : r;
}

typedef struct {
    long long from_interval, until_interval, step;
    Py_ssize_t points;
} span;

/* Records [first, first + count) of one file's range into ``buffer``: 0, an errno, or -1
 * (short read, or ranges that do not hold ``points`` records); *empty set when the
 * archive holds no point at all. */
static int
load_records(int dir_fd, const char *path, long long offset, long long size,
             const span *range, Py_ssize_t first, Py_ssize_t count, unsigned char *buffer,
             int *empty)
{
    unsigned char base_point[RECORD];
    int fd = openat(dir_fd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno ? errno : EIO;
    int error = read_all(fd, (char *)base_point, RECORD, offset);
    *empty = 0;
    if (!error) {
        long long base = big32(base_point);
        if (base == 0) {
            *empty = 1;
        } else {
            long long from = floor_mod(
                floor_div(range->from_interval - base, range->step) * RECORD, size);
            long long until = floor_mod(
                floor_div(range->until_interval - base, range->step) * RECORD, size);
            /* whisper.fetch reads from..until, wrapping at the archive's end */
            long long held = from < until ? until - from : size - from + until;
            if (held != (long long)range->points * RECORD) {
                error = -1;
            } else {
                long long start = from + (long long)first * RECORD;
                long long want = (long long)count * RECORD;
                if (start >= size)
                    start -= size;
                long long head = size - start < want ? size - start : want;
                error = read_all(fd, (char *)buffer, head, offset + start);
                if (!error && want > head)
                    error = read_all(fd, (char *)buffer + head, want - head, offset);
            }
        }
    }
    close(fd);
    return error;
}

/* one value into a running sum (and correction, as Python 3.12's sum() keeps one) */
static inline void
add_value(double *acc, double *comp, double x, int compensated)
{
    double total = *acc + x;
    if (compensated)
        *comp += fabs(*acc) >= fabs(x) ? (*acc - total) + x : (x - total) + *acc;
    *acc = total;
}

typedef struct {
    const char *path;
    long long offset, size;
    Py_ssize_t target;
} file_row;

typedef struct {
    int mode, compensated;
    int dir_fd;                    /* paths are relative to it (names_of) */
    Py_ssize_t drop, vpp, width;   /* width: items per output row */
    double xff;                    /* mode 3 */
    double *out1, *out2;
    unsigned char *valid;
    long long *count;
    span range;
    file_row *rows;
} sink;

/* One thread's share: rows [row_from, row_to), columns [first, first + columns). */
typedef struct {
    const sink *to;
    Py_ssize_t row_from, row_to, first, columns;
    unsigned char *buffer;
    int *errors;                   /* per row: 0, or errno + 1 (1: short read) */
} share;

static void
sum_columns(const share *job, Py_ssize_t row, const unsigned char *src)
{
    const sink *to = job->to;
    Py_ssize_t target = to->rows[row].target;
    double *acc = to->out1 + target * to->width + job->first;
    double *comp = to->out2 + target * to->width + job->first;
    long long *count = to->count + target * to->width + job->first;
    long long step = to->range.step;
    long long expected = to->range.from_interval + job->first * step;
    for (Py_ssize_t i = 0; i < job->columns; i++, src += RECORD, expected += step) {
        if ((long long)big32(src) != expected)
            continue;
        add_value(&acc[i], &comp[i], big_double(src + 4), to->compensated);
        count[i]++;
    }
}

/* a bucket's mean, or NaN where it has no value or too few for the xFilesFactor */
static inline double
bucket_mean(double sum, double correction, long long seen, Py_ssize_t slots, double xff)
{
    if (correction != 0.0 && isfinite(correction))
        sum += correction;
    if (seen <= 0 || !((double)seen / (double)slots >= xff))
        return NAN;
    return sum / (double)seen;
}

static void
sum_buckets(const share *job, Py_ssize_t row, const unsigned char *src)
{
    const sink *to = job->to;
    int means = to->mode == 3;
    double *acc = to->out1 + row * to->width;
    double *comp = means ? NULL : to->out2 + row * to->width;
    long long *count = means ? NULL : to->count + row * to->width;
    long long step = to->range.step;
    long long expected = to->range.from_interval + to->drop * step;
    Py_ssize_t points = to->range.points;
    src += to->drop * RECORD;
    /* a bucket's sum, correction and count stay in locals while its points are added
     * (through the pointers every add waited for the previous store) */
    for (Py_ssize_t i = to->drop, bucket = 0; i < points; bucket++) {
        Py_ssize_t end = i + to->vpp < points ? i + to->vpp : points;
        double sum = means ? 0.0 : acc[bucket], correction = means ? 0.0 : comp[bucket];
        long long seen = means ? 0 : count[bucket];
        for (; i < end; i++, src += RECORD, expected += step) {
            if ((long long)big32(src) != expected)
                continue;
            add_value(&sum, &correction, big_double(src + 4), to->compensated);
            seen++;
        }
        if (means) {
            acc[bucket] = bucket_mean(sum, correction, seen, to->vpp, to->xff);
            continue;
        }
        acc[bucket] = sum;
        comp[bucket] = correction;
        count[bucket] = seen;
    }
}

static void
copy_values(const share *job, Py_ssize_t row, const unsigned char *src)
{
    const sink *to = job->to;
    Py_ssize_t points = to->range.points;
    double *values = to->out1 + row * points;
    unsigned char *valid = to->valid + row * points;
    long long step = to->range.step;
    long long expected = to->range.from_interval;
    for (Py_ssize_t i = 0; i < points; i++, src += RECORD, expected += step) {
        if ((long long)big32(src) == expected) {
            values[i] = big_double(src + 4);
            valid[i] = 1;
        } else {
            values[i] = 0.0;
            valid[i] = 0;
        }
    }
}

static void *
run_share(void *arg)
{
    const share *job = arg;
    const sink *to = job->to;
    for (Py_ssize_t r = job->row_from; r < job->row_to; r++) {
        int empty = 0;
        const file_row *row = &to->rows[r];
        int error = load_records(to->dir_fd, row->path, row->offset, row->size, &to->range,
                                 job->first, job->columns, job->buffer, &empty);
        if (error || (empty && to->mode == 3)) {
            if (error)
                job->errors[r] = error < 0 ? 1 : error + 1;
            if (to->mode == 3) {
                for (Py_ssize_t b = 0; b < to->width; b++)
                    to->out1[r * to->width + b] = NAN;
            }
            if (to->mode == 0) {
                memset(to->valid + r * to->range.points, 0, (size_t)to->range.points);
                memset(to->out1 + r * to->range.points, 0,
                       (size_t)to->range.points * sizeof(double));
            }
            continue;
        }
        if (to->mode == 0) {
            if (empty) {
                memset(to->valid + r * to->range.points, 0, (size_t)to->range.points);
                memset(to->out1 + r * to->range.points, 0,
                       (size_t)to->range.points * sizeof(double));
            } else {
                copy_values(job, r, job->buffer);
            }
        } else if (!empty) {
            if (to->mode == 1)
                sum_columns(job, r, job->buffer);
            else
                sum_buckets(job, r, job->buffer);
        }
    }
    return NULL;
}

/* Runs work(first) and work(second): on two threads when ``shared`` and the machine has
 * two processors, else in turn (the halves are disjoint, so either order gives the same
 * result). Called without the GIL. */
static void
run_pair(void *(*work)(void *), void *first, void *second, int shared)
{
    if (shared && sysconf(_SC_NPROCESSORS_ONLN) > 1) {
        pthread_t helper;
        if (pthread_create(&helper, NULL, work, second) == 0) {
            work(first);
            pthread_join(helper, NULL);
            return;
        }
    }
    work(first);
    work(second);
}

/* Sums on two threads: a reader loads the files, in row order, into a ring of buffers
 * while the caller's thread adds each row, in that order, as it arrives, and loads
 * every ADDER_LOADS-th row itself (adding is the smaller half of the work). Each file
 * is opened once (splitting the columns opened it on both threads), and each column
 * still adds its rows in order. The threads wake each other a batch of rows at a time. */
#define RING_BYTES (4 << 20)
#define RING_MAX 32
#define RING_BATCH 8
#define ADDER_LOADS 3

typedef struct {
    const sink *to;
    Py_ssize_t count, slots;
    size_t slot_bytes;
    unsigned char *buffers;
    int *loaded, *empty;           /* per slot: load_records' answer, empty archive */
    Py_ssize_t produced, consumed; /* rows loaded (or left to the adder), rows added */
    Py_ssize_t wanted;             /* the adder sleeps until this many are loaded */
    pthread_mutex_t lock;
    pthread_cond_t filled, freed;
} ring;

static void *
ring_reader(void *arg)
{
    ring *q = arg;
    const sink *to = q->to;
    for (Py_ssize_t r = 0; r < q->count; r++) {
        pthread_mutex_lock(&q->lock);
        while (r - q->consumed >= q->slots)
            pthread_cond_wait(&q->freed, &q->lock);
        pthread_mutex_unlock(&q->lock);
        if (r % ADDER_LOADS != ADDER_LOADS - 1) {
            Py_ssize_t slot = r % q->slots;
            const file_row *row = &to->rows[r];
            q->loaded[slot] = load_records(to->dir_fd, row->path, row->offset, row->size,
                                           &to->range, 0, to->range.points,
                                           q->buffers + slot * q->slot_bytes,
                                           &q->empty[slot]);
        }
        pthread_mutex_lock(&q->lock);
        q->produced = r + 1;
        if (q->produced >= q->wanted)
            pthread_cond_signal(&q->filled);
        pthread_mutex_unlock(&q->lock);
    }
    return NULL;
}

/* 0, or -1 when the ring cannot be set up (the caller sums some other way) */
static int
run_ring(const sink *to, Py_ssize_t count, unsigned char *own, int *errors)
{
    size_t slot_bytes = (size_t)to->range.points * RECORD;
    Py_ssize_t slots = (Py_ssize_t)(RING_BYTES / (slot_bytes ? slot_bytes : 1));
    slots = slots < 2 ? 2 : slots > RING_MAX ? RING_MAX : slots;
    ring q = {to, count, slots, slot_bytes, malloc((size_t)slots * slot_bytes),
              malloc(slots * sizeof(int)), malloc(slots * sizeof(int)), 0, 0, 0};
    int ready = q.buffers && q.loaded && q.empty;
    int locks = ready && pthread_mutex_init(&q.lock, NULL) == 0;
    int filled = locks && pthread_cond_init(&q.filled, NULL) == 0;
    int freed = filled && pthread_cond_init(&q.freed, NULL) == 0;
    /* the reader gets at most ``slots`` rows ahead: wait for no more than that */
    Py_ssize_t batch = RING_BATCH < slots ? RING_BATCH : slots;
    pthread_t reader;
    int started = freed && pthread_create(&reader, NULL, ring_reader, &q) == 0;
    if (started) {
        share adder = {to, 0, count, 0, to->range.points, own, errors};
        for (Py_ssize_t r = 0; r < count; r++) {
            int error, empty = 0;
            const unsigned char *records = own;
            if (r % ADDER_LOADS == ADDER_LOADS - 1) {
                const file_row *row = &to->rows[r];
                error = load_records(to->dir_fd, row->path, row->offset, row->size,
                                     &to->range, 0, to->range.points, own, &empty);
            } else {
                pthread_mutex_lock(&q.lock);
                while (q.produced <= r) {
                    q.wanted = r + batch < count ? r + batch : count;
                    pthread_cond_wait(&q.filled, &q.lock);
                }
                pthread_mutex_unlock(&q.lock);
                Py_ssize_t slot = r % slots;
                error = q.loaded[slot];
                empty = q.empty[slot];
                records = q.buffers + slot * slot_bytes;
            }
            if (error)
                errors[r] = error < 0 ? 1 : error + 1;
            else if (!empty)
                sum_columns(&adder, r, records);
            pthread_mutex_lock(&q.lock);
            q.consumed = r + 1;
            pthread_cond_signal(&q.freed);
            pthread_mutex_unlock(&q.lock);
        }
        pthread_join(reader, NULL);
    }
    if (freed)
        pthread_cond_destroy(&q.freed);
    if (filled)
        pthread_cond_destroy(&q.filled);
    if (locks)
        pthread_mutex_destroy(&q.lock);
    free(q.buffers);
    free(q.loaded);
    free(q.empty);
    return started ? 0 : -1;
}

/* Work of this size or more is shared by two threads: sums go through the ring (each
 * column still adds its rows in order), the other modes split the rows. */
#define SHARED_RECORDS (1 << 15)

static void
run_all(const sink *to, Py_ssize_t count, unsigned char *buffers, int *errors)
{
    Py_ssize_t points = to->range.points;
    share jobs[2] = {
        {to, 0, count, 0, points, buffers, errors},
        {to, 0, 0, 0, points, buffers + (size_t)points * RECORD, errors + count},
    };
    int shared = (double)count * (double)points >= SHARED_RECORDS && count > 1 &&
        sysconf(_SC_NPROCESSORS_ONLN) > 1;
    if (shared && to->mode == 1 && run_ring(to, count, buffers, errors) == 0)
        return;
    if (shared && to->mode != 1) {
        jobs[0].row_to = count / 2;
        jobs[1].row_from = count / 2;
        jobs[1].row_to = count;
    }
    run_pair(run_share, &jobs[0], &jobs[1], shared && to->mode != 1);
}

/* Paths of at least this many files are opened relative to their shared directory */
#define SHARED_DIR_FILES 16

/* The length of the longest directory prefix (up to a '/') that all ``count`` names
 * share, and in *dir_fd a descriptor of that directory (AT_FDCWD and 0 when there is
 * none, the batch is small or it cannot be opened). The kernel then walks only the rest
 * of each path: a wildcard's 10,000 files share six of their nine parts. */
static size_t
shared_dir(const char **names, Py_ssize_t count, int *dir_fd)
{
    *dir_fd = AT_FDCWD;
    if (count < SHARED_DIR_FILES)
        return 0;
    const char *first = names[0];
    size_t length = strlen(first);
    for (Py_ssize_t r = 1; r < count && length; r++) {
        const char *other = names[r];
        size_t i = 0;
        while (i < length && first[i] == other[i])
            i++;
        length = i;
    }
    while (length && first[length - 1] != '/')
        length--;
    if (length == 0)
        return 0;
    char *dir = PyMem_Malloc(length + 1);
    if (dir == NULL)
        return 0;
    memcpy(dir, first, length);
    dir[length] = 0;
    int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    PyMem_Free(dir);
    if (fd < 0)
        return 0;
    *dir_fd = fd;
    return length;
}

/* The C strings of a list of bytes paths (which must stay alive), relative to *dir_fd
 * (see shared_dir; the caller closes it when it is not AT_FDCWD). */
static const char **
names_of(PyObject *keep, Py_ssize_t count, int *dir_fd)
{
    *dir_fd = AT_FDCWD;
    const char **names = PyMem_Malloc((count ? count : 1) * sizeof(char *));
    if (names == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t r = 0; r < count; r++) {
        PyObject *path = PyList_GET_ITEM(keep, r);
        if (!PyBytes_Check(path)) {
            PyErr_SetString(PyExc_TypeError, "paths must be bytes");
            PyMem_Free(names);
            return NULL;
        }
        names[r] = PyBytes_AS_STRING(path);
    }
    size_t shared = shared_dir(names, count, dir_fd);
    for (Py_ssize_t r = 0; shared && r < count; r++) {
        if (names[r][shared])          /* a name that is the directory itself stays whole */
            names[r] += shared;
    }
    return names;
}

static void
close_dir(int dir_fd)
{
    if (dir_fd != AT_FDCWD)
        close(dir_fd);
}

static int
long_item(PyObject *list, Py_ssize_t i, long long *out)
{
    *out = PyLong_AsLongLong(PyList_GET_ITEM(list, i));
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

static PyObject *
scan(PyObject *self, PyObject *args)
{
    int mode, compensated;
    PyObject *paths, *offsets, *sizes, *targets;
    span range;
    Py_ssize_t drop, vpp;
    Py_buffer out1, out2, out3;
    PyObject *out = NULL, *keep = NULL;
    file_row *rows = NULL;
    const char **names = NULL;
    unsigned char *buffer = NULL;
    int *errors = NULL;

    double xff = 0.0;

    if (!PyArg_ParseTuple(args, "iO!O!O!O!LLLnnnpw*w*w*|d", &mode, &PyList_Type, &paths,
                          &PyList_Type, &offsets, &PyList_Type, &sizes, &PyList_Type,
                          &targets, &range.from_interval, &range.until_interval, &range.step,
                          &range.points, &drop, &vpp, &compensated, &out1, &out2, &out3,
                          &xff))
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(paths);
    int dir_fd = AT_FDCWD;
    sink to = {mode, compensated, AT_FDCWD, drop, vpp, 0, xff, out1.buf, out2.buf, out2.buf,
               out3.buf, range, NULL};
    Py_ssize_t groups = 0;
    if (PyList_GET_SIZE(offsets) != count || PyList_GET_SIZE(sizes) != count ||
            (mode == 1 && PyList_GET_SIZE(targets) != count)) {
        PyErr_SetString(PyExc_ValueError, "paths, offsets, sizes and targets differ in length");
        goto done;
    }
    if (range.points < 0 || range.step <= 0 || drop < 0 || vpp < 1 || mode < 0 || mode > 3) {
        PyErr_SetString(PyExc_ValueError, "bad points, step, drop, vpp or mode");
        goto done;
    }
    keep = PyList_GetSlice(paths, 0, count);   /* the names stay alive without the GIL */
    if (keep == NULL || (names = names_of(keep, count, &dir_fd)) == NULL)
        goto done;
    to.dir_fd = dir_fd;
    rows = PyMem_Calloc(count ? count : 1, sizeof(file_row));
    buffer = PyMem_Malloc(range.points ? 2 * range.points * RECORD : 1);   /* 2 threads */
    errors = PyMem_Calloc(count ? 2 * count : 1, sizeof(int));
    if (rows == NULL || buffer == NULL || errors == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t r = 0; r < count; r++) {
        long long target = r;
        rows[r].path = names[r];
        if (long_item(offsets, r, &rows[r].offset) < 0 || long_item(sizes, r, &rows[r].size) < 0 ||
                (mode == 1 && long_item(targets, r, &target) < 0))
            goto done;
        if (rows[r].offset < 0 || rows[r].size <= 0 || target < 0) {
            PyErr_SetString(PyExc_ValueError, "negative offset or target, or an empty archive");
            goto done;
        }
        rows[r].target = (Py_ssize_t)target;
        if (target >= groups)
            groups = (Py_ssize_t)target + 1;
    }
    Py_ssize_t out_rows;
    if (mode == 0) {
        to.width = range.points;
        out_rows = count;
    } else if (mode == 1) {
        to.width = range.points;
        out_rows = to.width ? out1.len / (to.width * (Py_ssize_t)sizeof(double)) : 0;
        if (groups > out_rows && to.width) {
            PyErr_SetString(PyExc_ValueError, "a target is past the output's groups");
            goto done;
        }
    } else {
        Py_ssize_t kept = range.points > drop ? range.points - drop : 0;
        to.width = (kept + vpp - 1) / vpp;
        out_rows = count;
    }
    Py_ssize_t cells = out_rows * to.width;
    int fits = mode == 0 ?
        out1.len == cells * (Py_ssize_t)sizeof(double) && out2.len == cells :
        mode == 3 ? out1.len == cells * (Py_ssize_t)sizeof(double) :
        out1.len == cells * (Py_ssize_t)sizeof(double) &&
        out2.len == cells * (Py_ssize_t)sizeof(double) &&
        out3.len == cells * (Py_ssize_t)sizeof(long long);
    if (!fits) {
        PyErr_SetString(PyExc_ValueError, "output buffers do not fit the rows and points");
        goto done;
    }
    to.valid = out2.buf;
    to.rows = rows;
    Py_BEGIN_ALLOW_THREADS
    run_all(&to, count, buffer, errors);
    Py_END_ALLOW_THREADS
    out = PyList_New(0);
    for (Py_ssize_t r = 0; out != NULL && r < count; r++) {
        int error = errors[r] ? errors[r] : errors[count + r];
        if (!error)
            continue;
        PyObject *failed = Py_BuildValue("(ni)", r, error - 1);
        if (failed == NULL || PyList_Append(out, failed) < 0)
            Py_CLEAR(out);
        Py_XDECREF(failed);
    }
done:
    close_dir(dir_fd);
    Py_XDECREF(keep);
    PyMem_Free(names);
    PyMem_Free(rows);
    PyMem_Free(buffer);
    PyMem_Free(errors);
    PyBuffer_Release(&out1);
    PyBuffer_Release(&out2);
    PyBuffer_Release(&out3);
    return out;
}

/* Calls each(context, i) for i in [0, count): on two threads (halves) when count is at
 * least ``shared`` and the machine has two processors. Called without the GIL. */
typedef struct {
    void (*each)(void *, Py_ssize_t);
    void *context;
    Py_ssize_t from, to;
} range_job;

static void *
run_range(void *arg)
{
    range_job *job = arg;
    for (Py_ssize_t i = job->from; i < job->to; i++)
        job->each(job->context, i);
    return NULL;
}

static void
parallel_for(Py_ssize_t count, Py_ssize_t shared, void (*each)(void *, Py_ssize_t),
             void *context)
{
    range_job jobs[2] = {{each, context, 0, count / 2}, {each, context, count / 2, count}};
    run_pair(run_range, &jobs[0], &jobs[1], count >= shared);
}

/* batches of this many files or more are looked at by two threads */
#define SHARED_FILES 512

typedef struct {
    const char **names;
    int dir_fd;
    Py_ssize_t limit;
    char *heads;             /* limit bytes a file */
    Py_ssize_t *got;         /* bytes read, or -errno */
    long long *sizes;
} head_batch;

static void
read_head(void *context, Py_ssize_t r)
{
    head_batch *batch = context;
    char *dst = batch->heads + r * batch->limit;
    batch->sizes[r] = 0;
    int fd = openat(batch->dir_fd, batch->names[r], O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        batch->got[r] = -(errno ? errno : EIO);
        return;
    }
    struct stat info;
    if (fstat(fd, &info) == 0)
        batch->sizes[r] = (long long)info.st_size;
    ssize_t got;
    do {
        got = pread(fd, dst, (size_t)batch->limit, 0);
    } while (got < 0 && errno == EINTR);
    batch->got[r] = got < 0 ? -(errno ? errno : EIO) : got;
    close(fd);
}

static PyObject *
read_heads(PyObject *self, PyObject *args)
{
    PyObject *paths, *keep = NULL, *out = NULL;
    Py_ssize_t limit;
    Py_buffer sizes;
    head_batch batch = {NULL, AT_FDCWD, 0, NULL, NULL, NULL};
    if (!PyArg_ParseTuple(args, "O!nw*", &PyList_Type, &paths, &limit, &sizes))
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(paths);
    if (limit < 16 || sizes.len != count * (Py_ssize_t)sizeof(long long)) {
        PyErr_SetString(PyExc_ValueError, "limit under 16, or sizes do not hold a row each");
        goto done;
    }
    keep = PyList_GetSlice(paths, 0, count);   /* the names stay alive without the GIL */
    if (keep == NULL || (batch.names = names_of(keep, count, &batch.dir_fd)) == NULL)
        goto done;
    batch.limit = limit;
    batch.heads = PyMem_Malloc((size_t)(count ? count : 1) * (size_t)limit);
    batch.got = PyMem_Malloc((count ? count : 1) * sizeof(Py_ssize_t));
    batch.sizes = sizes.buf;
    if (batch.heads == NULL || batch.got == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    parallel_for(count, SHARED_FILES, read_head, &batch);
    Py_END_ALLOW_THREADS
    out = PyList_New(count);
    for (Py_ssize_t r = 0; out != NULL && r < count; r++) {
        Py_ssize_t got = batch.got[r];
        const char *head = batch.heads + r * limit;
        PyObject *item;
        if (got < 0) {
            item = PyLong_FromSsize_t(-got);
        } else {
            Py_ssize_t kept = got;
            if (got >= 16) {
                long long header = 16 + 12LL * big32((const unsigned char *)head + 12);
                if (header <= got)
                    kept = (Py_ssize_t)header;
            }
            item = PyBytes_FromStringAndSize(head, kept);
        }
        if (item == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, r, item);
    }
done:
    close_dir(batch.dir_fd);
    Py_XDECREF(keep);
    PyMem_Free(batch.names);
    PyMem_Free(batch.heads);
    PyMem_Free(batch.got);
    PyBuffer_Release(&sizes);
    return out;
}

#define KIND_DIR 1
#define KIND_FILE 2
#define KIND_LINK 4

static int
kind_of_mode(mode_t mode)
{
    return S_ISDIR(mode) ? KIND_DIR : S_ISREG(mode) ? KIND_FILE : 0;
}

/* flags of ``name`` in the directory ``dir_fd`` (AT_FDCWD: a path): lstat, and stat
 * through a symlink */
static int
entry_kind(int dir_fd, const char *name)
{
    struct stat info;
    if (fstatat(dir_fd, name, &info, AT_SYMLINK_NOFOLLOW) != 0)
        return 0;
    if (!S_ISLNK(info.st_mode))
        return kind_of_mode(info.st_mode);
    if (fstatat(dir_fd, name, &info, 0) != 0)
        return KIND_LINK;
    return KIND_LINK | kind_of_mode(info.st_mode);
}

typedef struct {
    const char **names;
    int dir_fd;
    char *kinds;
} kind_batch;

static void
kind_at(void *context, Py_ssize_t r)
{
    kind_batch *batch = context;
    batch->kinds[r] = (char)entry_kind(batch->dir_fd, batch->names[r]);
}

static PyObject *
path_kinds(PyObject *self, PyObject *args)
{
    PyObject *paths, *keep, *out = NULL;
    if (!PyArg_ParseTuple(args, "O!", &PyList_Type, &paths))
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(paths);
    keep = PyList_GetSlice(paths, 0, count);   /* the names stay alive without the GIL */
    kind_batch batch = {NULL, AT_FDCWD, NULL};
    if (keep == NULL || (batch.names = names_of(keep, count, &batch.dir_fd)) == NULL)
        goto done;
    out = PyBytes_FromStringAndSize(NULL, count);
    if (out == NULL)
        goto done;
    batch.kinds = PyBytes_AS_STRING(out);
    Py_BEGIN_ALLOW_THREADS
    parallel_for(count, SHARED_FILES, kind_at, &batch);
    Py_END_ALLOW_THREADS
done:
    close_dir(batch.dir_fd);
    Py_XDECREF(keep);
    PyMem_Free(batch.names);
    return out;
}

typedef struct {
    char *names;          /* NUL-separated */
    size_t used, room;
    unsigned char *kinds;
    size_t count, kinds_room;
} listing;

static int
grow(void **buffer, size_t *room, size_t need)
{
    if (need <= *room)
        return 0;
    size_t size = *room ? *room : 4096;
    while (size < need)
        size *= 2;
    void *bigger = realloc(*buffer, size);
    if (bigger == NULL)
        return -1;
    *buffer = bigger;
    *room = size;
    return 0;
}

/* the entries of one directory into ``into``: 0, an errno, or -1 out of memory */
static int
list_one(const char *path, listing *into)
{
    DIR *dir = opendir(path);
    if (dir == NULL)
        return errno ? errno : EIO;
    int dir_fd = dirfd(dir);
    int error = 0;
    struct dirent *entry;
    errno = 0;
    while ((entry = readdir(dir)) != NULL) {
        const char *name = entry->d_name;
        if (name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0)))
            continue;
        int kind;
        switch (entry->d_type) {
        case DT_DIR: kind = KIND_DIR; break;
        case DT_REG: kind = KIND_FILE; break;
        case DT_LNK:
        case DT_UNKNOWN: kind = entry_kind(dir_fd, name); break;
        default: kind = 0;
        }
        size_t length = strlen(name) + 1;
        if (grow((void **)&into->names, &into->room, into->used + length) < 0 ||
                grow((void **)&into->kinds, &into->kinds_room, into->count + 1) < 0) {
            error = -1;
            break;
        }
        memcpy(into->names + into->used, name, length);
        into->used += length;
        into->kinds[into->count++] = (unsigned char)kind;
        errno = 0;
    }
    if (!error && entry == NULL && errno)
        error = errno;
    closedir(dir);
    return error;
}

static PyObject *
list_dirs(PyObject *self, PyObject *args)
{
    PyObject *paths;
    if (!PyArg_ParseTuple(args, "O!", &PyList_Type, &paths))
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(paths);
    PyObject *out = PyList_New(count);
    listing into = {NULL, 0, 0, NULL, 0, 0};
    if (out == NULL)
        return NULL;
    for (Py_ssize_t r = 0; r < count; r++) {
        PyObject *path = PyList_GET_ITEM(paths, r);
        if (!PyBytes_Check(path)) {
            PyErr_SetString(PyExc_TypeError, "paths must be bytes");
            goto fail;
        }
        Py_INCREF(path);
        into.used = into.count = 0;
        int error;
        Py_BEGIN_ALLOW_THREADS
        error = list_one(PyBytes_AS_STRING(path), &into);
        Py_END_ALLOW_THREADS
        Py_DECREF(path);
        if (error < 0) {
            PyErr_NoMemory();
            goto fail;
        }
        if (error) {
            Py_INCREF(Py_None);
            PyList_SET_ITEM(out, r, Py_None);
            continue;
        }
        PyObject *names = PyList_New((Py_ssize_t)into.count);
        PyObject *kinds = PyBytes_FromStringAndSize((const char *)into.kinds,
                                                    (Py_ssize_t)into.count);
        PyObject *pair = names && kinds ? PyTuple_Pack(2, names, kinds) : NULL;
        const char *name = into.names;
        for (size_t i = 0; pair != NULL && i < into.count; i++) {
            size_t length = strlen(name);
            PyObject *text = PyUnicode_DecodeFSDefaultAndSize(name, (Py_ssize_t)length);
            if (text == NULL)
                Py_CLEAR(pair);
            else
                PyList_SET_ITEM(names, (Py_ssize_t)i, text);
            name += length + 1;
        }
        Py_XDECREF(names);
        Py_XDECREF(kinds);
        if (pair == NULL)
            goto fail;
        PyList_SET_ITEM(out, r, pair);
    }
    free(into.names);
    free(into.kinds);
    return out;
fail:
    free(into.names);
    free(into.kinds);
    Py_DECREF(out);
    return NULL;
}

static PyMethodDef methods[] = {
    {"list_dirs", list_dirs, METH_VARARGS,
     "list_dirs(paths) -> [(names, kinds) or None for each directory]"},
    {"path_kinds", path_kinds, METH_VARARGS,
     "path_kinds(paths) -> bytes of kind flags (1 dir, 2 file, 4 symlink)"},
    {"scan", scan, METH_VARARGS,
     "scan(mode, paths, offsets, sizes, targets, from_interval, until_interval, step, "
     "points, drop, vpp, compensated, out1, out2, out3[, xff]) -> [(row, errno), ...]"},
    {"read_heads", read_heads, METH_VARARGS,
     "read_heads(paths, limit, sizes) -> [header bytes or errno]"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_points", "Whisper point ranges read into numpy arrays.", -1,
    methods,
};

PyMODINIT_FUNC
PyInit__points(void)
{
    return PyModule_Create(&module);
}
