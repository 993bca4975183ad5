/* format=json rows laid out from value texts in one pass (optional accelerator).
 *
 * join_rows(text, points, heads, suffixes, odd, fixes, tail) -> bytes
 *
 * ``text`` holds every cell's JSON text, row after row, separated by commas (orjson's
 * output of a flat float64 array without its brackets). Row r starts with heads[r]; cell
 * i of a row is followed by suffixes[i] (", <timestamp>], [" and, for the last point,
 * ", <timestamp>]]}"); the cells whose indexes are listed in ``odd`` (ascending) are
 * written as the matching ``fixes`` entry instead of their text; ``tail`` ends the body.
 * webapp/render/jsonfmt.py has the numpy equivalent used when this is not built.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static int
bytes_list(PyObject *list, const char *what, Py_ssize_t want, Py_ssize_t *total)
{
    if (!PyList_Check(list)) {
        PyErr_Format(PyExc_TypeError, "%s must be a list of bytes", what);
        return -1;
    }
    if (want >= 0 && PyList_GET_SIZE(list) != want) {
        PyErr_Format(PyExc_ValueError, "%s must have %zd items", what, want);
        return -1;
    }
    *total = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        PyObject *item = PyList_GET_ITEM(list, i);
        if (!PyBytes_Check(item)) {
            PyErr_Format(PyExc_TypeError, "%s must be a list of bytes", what);
            return -1;
        }
        *total += PyBytes_GET_SIZE(item);
    }
    return 0;
}

/* The longest JSON text of a float64 is 24 bytes ("-1.2345678901234567e-308"): a cell
 * of at most CELL_COPY bytes is copied as one fixed-size block when the text has that
 * many bytes left, and each suffix sits in a table at a fixed stride, copied whole. */
#define CELL_COPY 32

/* Bytes before the next ',' (or ``end``), eight at a time. */
static inline Py_ssize_t
cell_length(const char *src, const char *end)
{
    const char *p = src;
    while (end - p >= 8) {
        uint64_t word, commas;
        memcpy(&word, p, 8);
        word ^= 0x2C2C2C2C2C2C2C2CULL;      /* a ',' byte becomes 0 */
        commas = (word - 0x0101010101010101ULL) & ~word & 0x8080808080808080ULL;
        if (commas)
            return (p - src) + (__builtin_ctzll(commas) >> 3);
        p += 8;
    }
    while (p < end && *p != ',')
        p++;
    return p - src;
}

typedef struct {
    const char *buf;
    Py_ssize_t len;
} span;

static span *
spans_of(PyObject *tuple)
{
    Py_ssize_t n = PyTuple_GET_SIZE(tuple);
    span *out = PyMem_Malloc((n ? n : 1) * sizeof(span));
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(tuple, i);
        out[i].buf = PyBytes_AS_STRING(item);
        out[i].len = PyBytes_GET_SIZE(item);
    }
    return out;
}

static PyObject *
join_rows(PyObject *self, PyObject *args)
{
    Py_buffer text;
    Py_ssize_t points;
    PyObject *heads, *suffixes, *odd, *fixes;
    Py_buffer tail;
    Py_ssize_t heads_size, suffixes_size, fixes_size;
    PyObject *out = NULL, *held = NULL, *held_fixes = NULL;
    span *head = NULL, *fix = NULL;
    Py_ssize_t *odd_at = NULL, *suffix_len = NULL;
    char *suffix_table = NULL;

    if (!PyArg_ParseTuple(args, "y*nO!O!O!O!y*", &text, &points, &PyList_Type, &heads,
                          &PyList_Type, &suffixes, &PyList_Type, &odd, &PyList_Type,
                          &fixes, &tail))
        return NULL;
    if (points < 1) {
        PyErr_SetString(PyExc_ValueError, "points must be positive");
        goto done;
    }
    Py_ssize_t rows = PyList_GET_SIZE(heads);
    if (bytes_list(heads, "heads", -1, &heads_size) < 0 ||
        bytes_list(suffixes, "suffixes", points, &suffixes_size) < 0 ||
        bytes_list(fixes, "fixes", PyList_GET_SIZE(odd), &fixes_size) < 0)
        goto done;
    /* heads and fixes stay alive while the GIL is released, whatever happens to the
     * lists (the suffixes are copied into a table) */
    held = PyList_AsTuple(heads);
    held_fixes = PyList_AsTuple(fixes);
    if (held == NULL || held_fixes == NULL)
        goto done;
    Py_ssize_t n_odd = PyList_GET_SIZE(odd);
    Py_ssize_t stride = CELL_COPY;
    for (Py_ssize_t p = 0; p < points; p++) {
        Py_ssize_t len = PyBytes_GET_SIZE(PyList_GET_ITEM(suffixes, p));
        while (stride < len)
            stride *= 2;
    }
    head = spans_of(held);
    fix = spans_of(held_fixes);
    odd_at = PyMem_Malloc((n_odd + 1) * sizeof(Py_ssize_t));
    suffix_len = PyMem_Malloc(points * sizeof(Py_ssize_t));
    suffix_table = PyMem_Calloc(points, stride);
    if (head == NULL || fix == NULL || odd_at == NULL || suffix_len == NULL ||
        suffix_table == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n_odd; i++) {
        odd_at[i] = PyLong_AsSsize_t(PyList_GET_ITEM(odd, i));
        if (odd_at[i] == -1 && PyErr_Occurred())
            goto done;
    }
    odd_at[n_odd] = -1;
    for (Py_ssize_t p = 0; p < points; p++) {
        PyObject *suffix = PyList_GET_ITEM(suffixes, p);
        suffix_len[p] = PyBytes_GET_SIZE(suffix);
        memcpy(suffix_table + p * stride, PyBytes_AS_STRING(suffix), suffix_len[p]);
    }
    Py_ssize_t bound = text.len + heads_size + rows * suffixes_size + fixes_size + tail.len;
    out = PyBytes_FromStringAndSize(NULL, bound + stride + CELL_COPY);
    if (out == NULL)
        goto done;
    char *dst = PyBytes_AS_STRING(out);
    const char *src = (const char *)text.buf, *end = src + text.len;
    int short_text = 0;
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t cell = 0, odd_i = 0;
    for (Py_ssize_t r = 0; r < rows && !short_text; r++) {
        memcpy(dst, head[r].buf, head[r].len);
        dst += head[r].len;
        for (Py_ssize_t p = 0; p < points; p++, cell++) {
            if (src > end) {
                short_text = 1;
                break;
            }
            Py_ssize_t len = cell_length(src, end);
            if (cell == odd_at[odd_i]) {
                memcpy(dst, fix[odd_i].buf, fix[odd_i].len);
                dst += fix[odd_i].len;
                odd_i++;
            } else {
                if (len <= CELL_COPY && end - src >= CELL_COPY)
                    memcpy(dst, src, CELL_COPY);
                else
                    memcpy(dst, src, len);
                dst += len;
            }
            src += len + 1;
            memcpy(dst, suffix_table + p * stride, stride);
            dst += suffix_len[p];
        }
    }
    Py_END_ALLOW_THREADS
    if (short_text) {
        PyErr_SetString(PyExc_ValueError, "text holds fewer cells than rows x points");
        Py_CLEAR(out);
        goto done;
    }
    if (src <= end && text.len) {
        PyErr_SetString(PyExc_ValueError, "text holds more cells than rows x points");
        Py_CLEAR(out);
        goto done;
    }
    memcpy(dst, tail.buf, tail.len);
    dst += tail.len;
    if (_PyBytes_Resize(&out, dst - PyBytes_AS_STRING(out)) < 0)
        out = NULL;
done:
    Py_XDECREF(held);
    Py_XDECREF(held_fixes);
    PyMem_Free(head);
    PyMem_Free(fix);
    PyMem_Free(odd_at);
    PyMem_Free(suffix_len);
    PyMem_Free(suffix_table);
    PyBuffer_Release(&text);
    PyBuffer_Release(&tail);
    return out;
}

static PyMethodDef methods[] = {
    {"join_rows", join_rows, METH_VARARGS,
     "join_rows(text, points, heads, suffixes, odd, fixes, tail) -> bytes"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_rows", "format=json rows from value texts in one pass.", -1,
    methods,
};

PyMODINIT_FUNC
PyInit__rows(void)
{
    return PyModule_Create(&module);
}
