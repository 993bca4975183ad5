/* C accelerator for carbon.cache.journal: a batch to and from the journal's point form.
 *
 * encode(batch) -> bytes
 *
 * batch: a sequence of (metric: str, timestamp, value), timestamp and value float (or
 * int). Per point, in native byte order: the UTF-8 name's length (uint32), the name,
 * the timestamp and the value (two doubles). Exactly what the pure-Python
 * carbon.cache.journal.encode_py returns; raises TypeError for an item that is not
 * such a triple.
 *
 * decode(payload, count) -> list
 *
 * The `count` points of an encoded payload back as (metric, timestamp, value) tuples;
 * ValueError when the payload does not hold exactly `count` well-formed points (what
 * carbon.cache.journal.decode_py does).
 *
 * encode_lines(chunk, max_length, now) -> (payload, count) | None
 *
 * A socket read of plaintext lines straight to the point form (what
 * carbon.cache.journal.encode_lines_py returns): chunk holds complete lines, each
 * ending in '\n'. Each line is read with parse_lines' rules (fields split on ASCII
 * whitespace, a blank line skipped, a UTF-8 name, value and timestamp as float() reads
 * them, a timestamp in (-2, -1] is `now`). None when the read must take the general
 * path instead, so that every bad-input rule stays there: a line over max_length (when
 * max_length > 0), a bad line, a non-finite number, a name carbon's tag parser would
 * rewrite or reject (carbon.tags.needs_normalizing), or no final '\n'. No object is
 * made a point; the scan runs without the GIL, and once more with it when the read
 * holds a number past the fast path (an exponent, inf...) or a non-ASCII name (one
 * hand-off a read, not one a field).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../formats/_lines.h"
#include "../formats/_number.h"
#include "_point_form.h"


static int
point_parts(PyObject *item, const char **name, Py_ssize_t *name_len, double *stamp,
            double *value)
{
    if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 3
        || !PyUnicode_CheckExact(PyTuple_GET_ITEM(item, 0))) {
        PyErr_SetString(PyExc_TypeError, "batch items must be (str, float, float)");
        return -1;
    }
    *name = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(item, 0), name_len);
    if (*name == NULL)
        return -1;
    if (*name_len > (Py_ssize_t)UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "metric name too long");
        return -1;
    }
    PyObject *stamp_obj = PyTuple_GET_ITEM(item, 1), *value_obj = PyTuple_GET_ITEM(item, 2);
    *stamp = PyFloat_CheckExact(stamp_obj) ? PyFloat_AS_DOUBLE(stamp_obj)
                                           : PyFloat_AsDouble(stamp_obj);
    if (*stamp == -1.0 && PyErr_Occurred())
        return -1;
    *value = PyFloat_CheckExact(value_obj) ? PyFloat_AS_DOUBLE(value_obj)
                                           : PyFloat_AsDouble(value_obj);
    if (*value == -1.0 && PyErr_Occurred())
        return -1;
    return 0;
}

static PyObject *
encode(PyObject *module, PyObject *batch)
{
    PyObject *fast, *out = NULL;
    Py_ssize_t count, i, total = 0;
    const char *name;
    Py_ssize_t name_len;
    double stamp, value;

    (void)module;
    fast = PySequence_Fast(batch, "batch must be a sequence");
    if (fast == NULL)
        return NULL;
    count = PySequence_Fast_GET_SIZE(fast);
    for (i = 0; i < count; i++) {
        if (point_parts(PySequence_Fast_GET_ITEM(fast, i), &name, &name_len, &stamp, &value))
            goto done;
        total += (Py_ssize_t)sizeof(uint32_t) + name_len + (Py_ssize_t)POINT_TAIL;
    }
    out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL)
        goto done;
    char *cursor = PyBytes_AS_STRING(out);
    for (i = 0; i < count; i++) {
        point_parts(PySequence_Fast_GET_ITEM(fast, i), &name, &name_len, &stamp, &value);
        uint32_t length = (uint32_t)name_len;
        double tail[2] = {stamp, value};
        memcpy(cursor, &length, sizeof length);
        cursor += sizeof length;
        memcpy(cursor, name, (size_t)name_len);
        cursor += name_len;
        memcpy(cursor, tail, POINT_TAIL);
        cursor += POINT_TAIL;
    }
done:
    Py_DECREF(fast);
    return out;
}

static PyObject *
decode(PyObject *module, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t count, i;
    PyObject *out = NULL;

    (void)module;
    if (!PyArg_ParseTuple(args, "y*n", &view, &count))
        return NULL;
    if (count < 0 || count > view.len / (Py_ssize_t)(sizeof(uint32_t) + POINT_TAIL)) {
        PyErr_SetString(PyExc_ValueError, "bad journal point count");
        goto fail;
    }
    out = PyList_New(count);
    if (out == NULL)
        goto fail;
    const char *cursor = view.buf, *end = cursor + view.len;
    for (i = 0; i < count; i++) {
        const char *text;
        uint32_t length;
        double tail[2];
        if (point_form_next(&cursor, end, &text, &length))
            goto malformed;
        PyObject *name = PyUnicode_DecodeUTF8(text, (Py_ssize_t)length, "strict");
        if (name == NULL)
            goto fail;
        memcpy(tail, text + length, POINT_TAIL);
        PyObject *stamp = PyFloat_FromDouble(tail[0]);
        PyObject *value = PyFloat_FromDouble(tail[1]);
        PyObject *point = (stamp && value) ? PyTuple_Pack(3, name, stamp, value) : NULL;
        Py_DECREF(name);
        Py_XDECREF(stamp);
        Py_XDECREF(value);
        if (point == NULL)
            goto fail;
        PyList_SET_ITEM(out, i, point);
    }
    if (cursor != end)
        goto malformed;
    PyBuffer_Release(&view);
    return out;
malformed:
    PyErr_SetString(PyExc_ValueError, "malformed journal payload");
fail:
    Py_XDECREF(out);
    PyBuffer_Release(&view);
    return NULL;
}

/* carbon.tags.needs_normalizing for a name's UTF-8 bytes (every byte it looks at is
 * ASCII, so bytes and characters agree). */
static inline int
needs_normalizing(const char *s, Py_ssize_t n)
{
    return n == 0 || s[0] == '~' || memchr(s, ';', (size_t)n) != NULL ||
           (n >= 2 && s[n - 2] == '"' && s[n - 1] == '}' && memchr(s, '{', (size_t)n) != NULL);
}

static inline int
is_ascii(const unsigned char *s, Py_ssize_t n)
{
    unsigned char any = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        any |= s[i];
    return any < 0x80;
}

/* A field as float() reads it. Without the GIL (`gil` 0) only the fast path: -3 when
 * the field needs float() itself. 0 ok, -1 general path, -2 error set. */
static inline int
field_double(const char *s, Py_ssize_t n, double *out, int gil)
{
    if (fast_decimal(s, n, out) == 0)
        return 0;
    return gil ? text_to_double(s, n, out) : -3;
}

/* Strict UTF-8, as bytes.decode('utf-8') checks it. Without the GIL only ASCII: -3 for
 * anything else. 0 valid, -1 not, -2 error set. */
static int
valid_name(const unsigned char *s, Py_ssize_t n, int gil)
{
    if (is_ascii(s, n))
        return 0;
    if (!gil)
        return -3;
    PyObject *name = PyUnicode_DecodeUTF8((const char *)s, n, "strict");
    if (name != NULL) {
        Py_DECREF(name);
        return 0;
    }
    if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
        return -2;
    PyErr_Clear();
    return -1;
}

/* The scan of encode_lines into out (room for every point: see the caller). Returns
 * the points written, -1 for the general path, -2 on error (set), or without the GIL
 * (`gil` 0) -3 when a number or a name needs Python: the caller scans again with it. */
static Py_ssize_t
scan_lines(const unsigned char *s, Py_ssize_t n, Py_ssize_t max_length, double now,
           char *out, Py_ssize_t *out_len, int gil)
{
    Py_ssize_t count = 0, start = 0;
    char *cursor = out;
    while (start < n) {
        const unsigned char *field[3];
        Py_ssize_t flen[3];
        int fields = next_line_fields(s, n, &start, max_length, field, flen);
        if (fields < 0)
            return -1; /* no final '\n', overlong, or over three fields */
        if (fields == 0)
            continue; /* parse_lines skips a blank line */
        if (fields != 3 || flen[0] > (Py_ssize_t)UINT32_MAX)
            return -1;
        double tail[2]; /* timestamp, value */
        int rc = field_double((const char *)field[1], flen[1], &tail[1], gil);
        if (rc == 0)
            rc = field_double((const char *)field[2], flen[2], &tail[0], gil);
        if (rc == 0 && !(isfinite(tail[0]) && isfinite(tail[1])))
            rc = -1;
        if (rc == 0 && needs_normalizing((const char *)field[0], flen[0]))
            rc = -1;
        if (rc == 0)
            rc = valid_name(field[0], flen[0], gil);
        if (rc < 0)
            return rc;
        if (-2.0 < tail[0] && tail[0] <= -1.0)
            tail[0] = now;
        uint32_t length = (uint32_t)flen[0];
        memcpy(cursor, &length, sizeof length);
        cursor += sizeof length;
        memcpy(cursor, field[0], (size_t)length);
        cursor += length;
        memcpy(cursor, tail, POINT_TAIL);
        cursor += POINT_TAIL;
        count++;
    }
    *out_len = cursor - out;
    return count;
}

static PyObject *
encode_lines(PyObject *module, PyObject *args)
{
    PyObject *chunk, *out;
    Py_ssize_t max_length, out_len = 0;
    double now;

    (void)module;
    if (!PyArg_ParseTuple(args, "Snd:encode_lines", &chunk, &max_length, &now))
        return NULL;
    Py_ssize_t n = PyBytes_GET_SIZE(chunk);
    /* A point's form is its name plus 20 bytes; its line is at least the name plus 5
     * bytes ("n v t\n"), so a read of n bytes encodes to at most n + 15 * (n / 6). */
    if (n > (PY_SSIZE_T_MAX - 64) / 4) {
        PyErr_SetString(PyExc_OverflowError, "encode_lines: read too large");
        return NULL;
    }
    out = PyBytes_FromStringAndSize(NULL, n + 15 * (n / 6) + 1);
    if (out == NULL)
        return NULL;
    const unsigned char *in = (const unsigned char *)PyBytes_AS_STRING(chunk);
    Py_ssize_t count;
    Py_BEGIN_ALLOW_THREADS
    count = scan_lines(in, n, max_length, now, PyBytes_AS_STRING(out), &out_len, 0);
    Py_END_ALLOW_THREADS
    if (count == -3) /* a field past the fast path: the whole read again, with the GIL */
        count = scan_lines(in, n, max_length, now, PyBytes_AS_STRING(out), &out_len, 1);
    if (count < 0) {
        Py_DECREF(out);
        if (count == -2)
            return NULL;
        Py_RETURN_NONE;
    }
    if (_PyBytes_Resize(&out, out_len) < 0)
        return NULL;
    return Py_BuildValue("(Nn)", out, count);
}

static PyMethodDef methods[] = {
    {"encode", encode, METH_O, "A batch of (metric, timestamp, value) in journal form."},
    {"decode", decode, METH_VARARGS, "(payload, count) -> list of (metric, ts, value)."},
    {"encode_lines", encode_lines, METH_VARARGS,
     "(chunk, max_length, now) -> (payload, count) or None: a read of plaintext lines in\n"
     "point form (see carbon.cache.journal.encode_lines_py)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_journal", "Journal point form codec.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__journal(void)
{
    return PyModule_Create(&module_def);
}
