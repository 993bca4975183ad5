/* C helpers of webapp/render/jsonfmt.py.
 *
 * join_rows(text, points, heads, suffixes, odd, fixes, tail) -> bytes
 *
 * ``text`` holds every cell's JSON text, row after row, separated by commas (orjson's
 * output of a flat float64 array without its brackets). Row r starts with heads[r]; cell
 * i of a row is followed by suffixes[i] (", <timestamp>], [" and, for the last point,
 * ", <timestamp>]]}"); the cells whose indexes are listed in ``odd`` (ascending) are
 * written as the matching ``fixes`` entry instead of their text; ``tail`` ends the body.
 * webapp/render/jsonfmt.py has the numpy equivalent used when this is not built.
 * A large body is joined by two threads with the GIL released, each half of the rows
 * straight into the result (the second finds where its rows start in ``text`` and in
 * the result first).
 *
 * odd_cells(values, low, high) -> list: indexes of the float64 ``values`` whose
 * magnitude is not 0 and below ``low`` or from ``high`` up (infinities included, NaN
 * not): the cells orjson writes differently from float.__repr__.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

/* below this many text bytes one thread joins (a thread costs more than it saves) */
#define SPLIT_BYTES (1 << 20)

typedef struct {
    const char *p;
    Py_ssize_t n;
} Piece;

/* The pieces of a list of bytes; *keep (a tuple of them, for the caller to release)
   keeps them alive while the GIL is released. */
static Piece *
pieces_of(PyObject *list, const char *what, Py_ssize_t want, Py_ssize_t *total,
          PyObject **keep)
{
    if (!PyList_Check(list)) {
        PyErr_Format(PyExc_TypeError, "%s must be a list of bytes", what);
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(list);
    if (want >= 0 && count != want) {
        PyErr_Format(PyExc_ValueError, "%s must have %zd items", what, want);
        return NULL;
    }
    Piece *out = PyMem_Malloc((size_t)(count ? count : 1) * sizeof(Piece));
    if (out == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    *total = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = PyList_GET_ITEM(list, i);
        if (!PyBytes_Check(item)) {
            PyMem_Free(out);
            PyErr_Format(PyExc_TypeError, "%s must be a list of bytes", what);
            return NULL;
        }
        out[i].p = PyBytes_AS_STRING(item);
        out[i].n = PyBytes_GET_SIZE(item);
        *total += out[i].n;
    }
    *keep = PyList_AsTuple(list);
    if (*keep == NULL) {
        PyMem_Free(out);
        return NULL;
    }
    return out;
}

typedef struct {
    /* shared, read only */
    const Piece *heads, *suffixes, *fixes;
    const Py_ssize_t *odd;
    Py_ssize_t points, n_odd, suffixes_size;
    const char *text, *text_end;
    /* this part's rows [row0, row1) */
    Py_ssize_t row0, row1;
    /* set by locate() for a part after the first: where its rows start */
    const char *src;
    Py_ssize_t out_offset, odd_i;
    /* result */
    char *dst_end;
    int fewer; /* the text ended before the part's last cell */
} Part;

/* Write the part's rows at out + part->out_offset. */
static void
join_part(Part *part, char *out)
{
    const char *src = part->src, *end = part->text_end;
    char *dst = out + part->out_offset;
    Py_ssize_t points = part->points, odd_i = part->odd_i;
    Py_ssize_t cell = part->row0 * points;
    Py_ssize_t next_odd_at = odd_i < part->n_odd ? part->odd[odd_i] : -1;
    part->fewer = 0;
    for (Py_ssize_t r = part->row0; r < part->row1; r++) {
        memcpy(dst, part->heads[r].p, (size_t)part->heads[r].n);
        dst += part->heads[r].n;
        for (Py_ssize_t p = 0; p < points; p++, cell++) {
            if (src > end) {
                part->fewer = 1;
                part->dst_end = dst;
                return;
            }
            const char *comma = memchr(src, ',', (size_t)(end - src));
            const char *stop = comma ? comma : end;
            if (cell == next_odd_at) {
                memcpy(dst, part->fixes[odd_i].p, (size_t)part->fixes[odd_i].n);
                dst += part->fixes[odd_i].n;
                next_odd_at = ++odd_i < part->n_odd ? part->odd[odd_i] : -1;
            } else {
                memcpy(dst, src, (size_t)(stop - src));
                dst += stop - src;
            }
            src = stop + 1;
            memcpy(dst, part->suffixes[p].p, (size_t)part->suffixes[p].n);
            dst += part->suffixes[p].n;
        }
    }
    part->src = src;
    part->dst_end = dst;
}

/* For a part starting at row0 > 0: find where its first cell starts in the text and
   where its first row starts in the result (the bytes the rows before it take there).
   0, or -1 when the text has fewer cells than the rows before it. */
static int
locate(Part *part)
{
    const char *src = part->text, *end = part->text_end;
    Py_ssize_t before = part->row0 * part->points, odd_i = 0, fixed = 0;
    for (Py_ssize_t cell = 0; cell < before; cell++) {
        const char *comma = memchr(src, ',', (size_t)(end - src));
        if (comma == NULL)
            return -1;
        if (odd_i < part->n_odd && part->odd[odd_i] == cell) {
            fixed += part->fixes[odd_i].n - (comma - src);
            odd_i++;
        }
        src = comma + 1;
    }
    Py_ssize_t heads = 0;
    for (Py_ssize_t r = 0; r < part->row0; r++)
        heads += part->heads[r].n;
    part->src = src;
    part->odd_i = odd_i;
    /* the rows before: their heads, cell texts (the text before src less one comma a
       cell), the fixes' differences and a suffix list a row */
    part->out_offset = heads + (src - part->text) - before + fixed
                       + part->row0 * part->suffixes_size;
    return 0;
}

static void *
locate_and_join(void *arg)
{
    void **args = arg;
    Part *part = args[0];
    if (locate(part) < 0) {
        part->fewer = 1;
        part->dst_end = NULL;
        return NULL;
    }
    join_part(part, args[1]);
    return NULL;
}

static PyObject *
join_rows(PyObject *self, PyObject *args)
{
    Py_buffer text;
    Py_ssize_t points;
    PyObject *heads_list, *suffixes_list, *odd_list, *fixes_list;
    Py_buffer tail;
    Py_ssize_t heads_size, suffixes_size, fixes_size;
    Piece *heads = NULL, *suffixes = NULL, *fixes = NULL;
    PyObject *keep_heads = NULL, *keep_suffixes = NULL, *keep_fixes = NULL;
    Py_ssize_t *odd = NULL;
    PyObject *out = NULL;

    (void)self;
    if (!PyArg_ParseTuple(args, "y*nO!O!O!O!y*", &text, &points, &PyList_Type, &heads_list,
                          &PyList_Type, &suffixes_list, &PyList_Type, &odd_list,
                          &PyList_Type, &fixes_list, &tail))
        return NULL;
    if (points < 1) {
        PyErr_SetString(PyExc_ValueError, "points must be positive");
        goto done;
    }
    Py_ssize_t rows = PyList_GET_SIZE(heads_list), n_odd = PyList_GET_SIZE(odd_list);
    if ((heads = pieces_of(heads_list, "heads", -1, &heads_size, &keep_heads)) == NULL ||
        (suffixes = pieces_of(suffixes_list, "suffixes", points, &suffixes_size,
                              &keep_suffixes)) == NULL ||
        (fixes = pieces_of(fixes_list, "fixes", n_odd, &fixes_size, &keep_fixes)) == NULL)
        goto done;
    odd = PyMem_Malloc((size_t)(n_odd ? n_odd : 1) * sizeof(Py_ssize_t));
    if (odd == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n_odd; i++) {
        odd[i] = PyLong_AsSsize_t(PyList_GET_ITEM(odd_list, i));
        if (odd[i] == -1 && PyErr_Occurred())
            goto done;
        if (i && odd[i] <= odd[i - 1]) {
            PyErr_SetString(PyExc_ValueError, "odd must be ascending");
            goto done;
        }
    }
    Py_ssize_t bound = text.len + heads_size + rows * suffixes_size + fixes_size + tail.len;
    out = PyBytes_FromStringAndSize(NULL, bound);
    if (out == NULL)
        goto done;
    char *dst = PyBytes_AS_STRING(out);
    const char *text_buf = (const char *)text.buf;
    Part first = {heads, suffixes, fixes, odd, points, n_odd, suffixes_size, text_buf,
                  text_buf + text.len, 0, rows, text_buf, 0, 0, NULL, 0};
    Part second = first;
    int split = rows >= 2 && text.len >= SPLIT_BYTES, threaded = 0;
    if (split) {
        first.row1 = second.row0 = rows / 2;
        /* the first part's text ends at the comma before the second part's first cell:
           known once located; until then it may read up to the end, as it stops after
           its own rows */
    }
    Py_BEGIN_ALLOW_THREADS
    if (split) {
        pthread_t helper;
        void *helper_args[2] = {&second, dst};
        threaded = pthread_create(&helper, NULL, locate_and_join, helper_args) == 0;
        join_part(&first, dst);
        if (threaded)
            pthread_join(helper, NULL);
        else
            locate_and_join(helper_args);
    } else {
        join_part(&first, dst);
    }
    Py_END_ALLOW_THREADS
    Part *last = split ? &second : &first;
    if (first.fewer || (split && second.fewer)) {
        PyErr_SetString(PyExc_ValueError, "text holds fewer cells than rows x points");
        goto fail;
    }
    if (split && first.dst_end != dst + second.out_offset) {
        PyErr_SetString(PyExc_SystemError, "join_rows: the halves do not meet");
        goto fail;
    }
    if (last->src <= first.text_end && text.len) {
        PyErr_SetString(PyExc_ValueError, "text holds more cells than rows x points");
        goto fail;
    }
    char *end = last->dst_end;
    memcpy(end, tail.buf, (size_t)tail.len);
    end += tail.len;
    if (_PyBytes_Resize(&out, end - PyBytes_AS_STRING(out)) < 0)
        out = NULL;
    goto done;
fail:
    Py_CLEAR(out);
done:
    PyMem_Free(heads);
    PyMem_Free(suffixes);
    PyMem_Free(fixes);
    PyMem_Free(odd);
    Py_XDECREF(keep_heads);
    Py_XDECREF(keep_suffixes);
    Py_XDECREF(keep_fixes);
    PyBuffer_Release(&text);
    PyBuffer_Release(&tail);
    return out;
}

static PyObject *
odd_cells(PyObject *self, PyObject *args)
{
    Py_buffer values;
    double low, high;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*dd", &values, &low, &high))
        return NULL;
    if (values.len % (Py_ssize_t)sizeof(double)) {
        PyBuffer_Release(&values);
        PyErr_SetString(PyExc_ValueError, "values must be float64");
        return NULL;
    }
    const double *v = values.buf;
    Py_ssize_t count = values.len / (Py_ssize_t)sizeof(double);
    PyObject *out = PyList_New(0);
    for (Py_ssize_t i = 0; out != NULL && i < count; i++) {
        double size = fabs(v[i]);
        if (size != 0.0 && (size < low || size >= high)) { /* NaN: both false */
            PyObject *index = PyLong_FromSsize_t(i);
            if (index == NULL || PyList_Append(out, index) < 0)
                Py_CLEAR(out);
            Py_XDECREF(index);
        }
    }
    PyBuffer_Release(&values);
    return out;
}

static PyMethodDef methods[] = {
    {"join_rows", join_rows, METH_VARARGS,
     "join_rows(text, points, heads, suffixes, odd, fixes, tail) -> bytes"},
    {"odd_cells", odd_cells, METH_VARARGS, "odd_cells(values, low, high) -> list"},
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
