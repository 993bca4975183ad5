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

static PyObject *
join_rows(PyObject *self, PyObject *args)
{
    Py_buffer text;
    Py_ssize_t points;
    PyObject *heads, *suffixes, *odd, *fixes;
    Py_buffer tail;
    Py_ssize_t heads_size, suffixes_size, fixes_size;
    PyObject *out = NULL;

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
    Py_ssize_t bound = text.len + heads_size + rows * suffixes_size + fixes_size + tail.len;
    out = PyBytes_FromStringAndSize(NULL, bound);
    if (out == NULL)
        goto done;
    char *dst = PyBytes_AS_STRING(out);
    const char *src = (const char *)text.buf, *end = src + text.len;
    Py_ssize_t next_odd_at = -1, odd_i = 0, n_odd = PyList_GET_SIZE(odd);
    if (n_odd) {
        next_odd_at = PyLong_AsSsize_t(PyList_GET_ITEM(odd, 0));
        if (next_odd_at == -1 && PyErr_Occurred())
            goto fail;
    }
    Py_ssize_t cell = 0;
    for (Py_ssize_t r = 0; r < rows; r++) {
        PyObject *head = PyList_GET_ITEM(heads, r);
        memcpy(dst, PyBytes_AS_STRING(head), PyBytes_GET_SIZE(head));
        dst += PyBytes_GET_SIZE(head);
        for (Py_ssize_t p = 0; p < points; p++, cell++) {
            if (src > end) {
                PyErr_SetString(PyExc_ValueError, "text holds fewer cells than rows x points");
                goto fail;
            }
            const char *comma = memchr(src, ',', end - src);
            const char *stop = comma ? comma : end;
            if (cell == next_odd_at) {
                PyObject *fix = PyList_GET_ITEM(fixes, odd_i);
                memcpy(dst, PyBytes_AS_STRING(fix), PyBytes_GET_SIZE(fix));
                dst += PyBytes_GET_SIZE(fix);
                if (++odd_i < n_odd) {
                    next_odd_at = PyLong_AsSsize_t(PyList_GET_ITEM(odd, odd_i));
                    if (next_odd_at == -1 && PyErr_Occurred())
                        goto fail;
                } else {
                    next_odd_at = -1;
                }
            } else {
                memcpy(dst, src, stop - src);
                dst += stop - src;
            }
            src = stop + 1;
            PyObject *suffix = PyList_GET_ITEM(suffixes, p);
            memcpy(dst, PyBytes_AS_STRING(suffix), PyBytes_GET_SIZE(suffix));
            dst += PyBytes_GET_SIZE(suffix);
        }
    }
    if (src <= end && text.len) {
        PyErr_SetString(PyExc_ValueError, "text holds more cells than rows x points");
        goto fail;
    }
    memcpy(dst, tail.buf, tail.len);
    dst += tail.len;
    if (_PyBytes_Resize(&out, dst - PyBytes_AS_STRING(out)) < 0)
        out = NULL;
    goto done;
fail:
    Py_CLEAR(out);
done:
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
