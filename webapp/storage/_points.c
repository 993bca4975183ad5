/* Whisper point ranges read and decoded straight into numpy rows (optional accelerator).
 *
 * read_rows(paths, first, second, from_interval, step, points, values, valid) -> list
 *
 * For row r: open paths[r], read first[r] = (offset, size) and, for a range that wraps
 * around the archive's end, second[r] = (offset, size) (size 0: none) into one buffer,
 * close; then decode its ``points`` big-endian (uint32 timestamp, float64 value)
 * records: a slot is valid when its timestamp is from_interval + i * step (whisper.fetch's
 * rule), and its value is stored in values[r][i]; an invalid slot gets 0.0.
 * ``values`` (float64) and ``valid`` (bool) are writable C-contiguous buffers of
 * len(paths) x points items. The files are read with the GIL released. Returns the
 * rows that could not be read as (row, errno) pairs (errno 0: short read); their
 * slots are left invalid. webapp/storage/packed.py's decode_block is the Python
 * equivalent used when this is not built.
 *
 * pread_many(paths, offsets, size) -> list
 *
 * For each path: open, read up to ``size`` bytes at offsets[r], close; the bytes read,
 * or the errno (an int) when the file could not be opened or read. The headers of a
 * batch of files are read with it, the GIL released file by file.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    const char *path;
    long long off1, size1, off2, size2;
    int error;
} row_plan;

static int
pair(PyObject *item, long long *offset, long long *size)
{
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
        PyErr_SetString(PyExc_TypeError, "ranges must be (offset, size) tuples");
        return -1;
    }
    *offset = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 0));
    *size = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 1));
    if (PyErr_Occurred())
        return -1;
    if (*offset < 0 || *size < 0) {
        PyErr_SetString(PyExc_ValueError, "negative offset or size");
        return -1;
    }
    return 0;
}

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

static inline uint64_t
big64(const unsigned char *p)
{
#if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return __builtin_bswap64(v);
#else
    uint64_t v = 0;
    for (int b = 0; b < 8; b++)
        v = (v << 8) | p[b];
    return v;
#endif
}

static void
decode(const unsigned char *src, Py_ssize_t points, long long from_interval,
       long long step, double *values, unsigned char *valid)
{
    long long expected = from_interval;
    for (Py_ssize_t i = 0; i < points; i++, src += 12, expected += step) {
        if ((long long)big32(src) == expected) {
            uint64_t bits = big64(src + 4);
            memcpy(&values[i], &bits, sizeof bits);
            valid[i] = 1;
        } else {
            values[i] = 0.0;
            valid[i] = 0;
        }
    }
}

static PyObject *
read_rows(PyObject *self, PyObject *args)
{
    PyObject *paths, *first, *second;
    long long from_interval, step;
    Py_ssize_t points;
    Py_buffer values, valid;
    PyObject *out = NULL;
    row_plan *plans = NULL;
    unsigned char *buffer = NULL;

    if (!PyArg_ParseTuple(args, "O!O!O!LLnw*w*", &PyList_Type, &paths, &PyList_Type, &first,
                          &PyList_Type, &second, &from_interval, &step, &points, &values,
                          &valid))
        return NULL;
    Py_ssize_t rows = PyList_GET_SIZE(paths);
    if (PyList_GET_SIZE(first) != rows || PyList_GET_SIZE(second) != rows) {
        PyErr_SetString(PyExc_ValueError, "paths, first and second differ in length");
        goto done;
    }
    if (points < 0 || values.len != rows * points * (Py_ssize_t)sizeof(double) ||
            valid.len != rows * points) {
        PyErr_SetString(PyExc_ValueError, "values/valid do not hold rows x points items");
        goto done;
    }
    plans = PyMem_Calloc(rows ? rows : 1, sizeof(row_plan));
    buffer = PyMem_Malloc(points ? points * 12 : 1);
    if (plans == NULL || buffer == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t r = 0; r < rows; r++) {
        PyObject *path = PyList_GET_ITEM(paths, r);
        if (!PyBytes_Check(path)) {
            PyErr_SetString(PyExc_TypeError, "paths must be bytes");
            goto done;
        }
        plans[r].path = PyBytes_AS_STRING(path);
        if (pair(PyList_GET_ITEM(first, r), &plans[r].off1, &plans[r].size1) < 0 ||
                pair(PyList_GET_ITEM(second, r), &plans[r].off2, &plans[r].size2) < 0)
            goto done;
        if (plans[r].size1 + plans[r].size2 != (long long)points * 12) {
            PyErr_SetString(PyExc_ValueError, "a row's ranges do not hold points records");
            goto done;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < rows; r++) {
        double *row_values = (double *)values.buf + r * points;
        unsigned char *row_valid = (unsigned char *)valid.buf + r * points;
        int fd = open(plans[r].path, O_RDONLY | O_CLOEXEC);
        int error = fd < 0 ? (errno ? errno : EIO) : 0;
        if (!error)
            error = read_all(fd, (char *)buffer, plans[r].size1, plans[r].off1);
        if (!error && plans[r].size2)
            error = read_all(fd, (char *)buffer + plans[r].size1, plans[r].size2,
                             plans[r].off2);
        if (fd >= 0)
            close(fd);
        if (error) {
            plans[r].error = error < 0 ? 0 : error;
            memset(row_valid, 0, (size_t)points);
            memset(row_values, 0, (size_t)points * sizeof(double));
            plans[r].path = NULL;
            continue;
        }
        decode(buffer, points, from_interval, step, row_values, row_valid);
    }
    Py_END_ALLOW_THREADS
    out = PyList_New(0);
    for (Py_ssize_t r = 0; out != NULL && r < rows; r++) {
        if (plans[r].path != NULL)
            continue;
        PyObject *failed = Py_BuildValue("(ni)", r, plans[r].error);
        if (failed == NULL || PyList_Append(out, failed) < 0)
            Py_CLEAR(out);
        Py_XDECREF(failed);
    }
done:
    PyMem_Free(plans);
    PyMem_Free(buffer);
    PyBuffer_Release(&values);
    PyBuffer_Release(&valid);
    return out;
}

static PyObject *
pread_many(PyObject *self, PyObject *args)
{
    PyObject *paths, *offsets;
    Py_ssize_t size;
    if (!PyArg_ParseTuple(args, "O!O!n", &PyList_Type, &paths, &PyList_Type, &offsets, &size))
        return NULL;
    Py_ssize_t rows = PyList_GET_SIZE(paths);
    if (PyList_GET_SIZE(offsets) != rows || size < 0) {
        PyErr_SetString(PyExc_ValueError, "paths and offsets differ in length");
        return NULL;
    }
    PyObject *out = PyList_New(rows);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t r = 0; r < rows; r++) {
        PyObject *path = PyList_GET_ITEM(paths, r);
        long long offset = PyLong_AsLongLong(PyList_GET_ITEM(offsets, r));
        if (!PyBytes_Check(path) || (offset == -1 && PyErr_Occurred()) || offset < 0) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "paths must be bytes, offsets >= 0");
            Py_DECREF(out);
            return NULL;
        }
        PyObject *data = PyBytes_FromStringAndSize(NULL, size);
        if (data == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        const char *name = PyBytes_AS_STRING(path);
        char *dst = PyBytes_AS_STRING(data);
        ssize_t got = -1;
        int error = 0;
        Py_BEGIN_ALLOW_THREADS
        int fd = open(name, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            error = errno ? errno : EIO;
        } else {
            do {
                got = pread(fd, dst, (size_t)size, (off_t)offset);
            } while (got < 0 && errno == EINTR);
            if (got < 0)
                error = errno ? errno : EIO;
            close(fd);
        }
        Py_END_ALLOW_THREADS
        if (error) {
            Py_DECREF(data);
            data = PyLong_FromLong(error);
        } else if (got < size && _PyBytes_Resize(&data, got) < 0) {
            Py_DECREF(out);
            return NULL;
        }
        if (data == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, r, data);
    }
    return out;
}

static PyMethodDef methods[] = {
    {"read_rows", read_rows, METH_VARARGS,
     "read_rows(paths, first, second, from_interval, step, points, values, valid) -> "
     "[(row, errno), ...]"},
    {"pread_many", pread_many, METH_VARARGS,
     "pread_many(paths, offsets, size) -> [bytes (up to size bytes at offset) or errno]"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_points", "Whisper point ranges read into numpy rows.", -1,
    methods,
};

PyMODINIT_FUNC
PyInit__points(void)
{
    return PyModule_Create(&module);
}
