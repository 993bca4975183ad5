/* C accelerator for carbon.formats.plaintext.parse_lines (its Python twin: parse_lines_py).
 *
 * parse_lines(lines, now, resolution) -> (batch, bad)
 *
 * The same decisions as the pure-Python parse_lines, line by line:
 *   - fields are split on ASCII whitespace (bytes.split()); a line with no
 *     field is skipped, one without exactly three fields is bad;
 *   - the name must be UTF-8 (strict), value and timestamp must be what
 *     float() accepts and finite;
 *   - a timestamp in (-2, -1] is `now`; with a resolution, timestamps are
 *     floored to a multiple of it as float(int(t) // r * r).
 * Numbers made only of digits, '.', '-', '+', 'e' and 'E' go straight to
 * PyOS_string_to_double (what float() calls for such text); anything else goes
 * through float() itself, so inf, nan, underscores and the rest behave exactly
 * as in Python.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>

#include "_number.h"

static int
is_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\x0b' || c == '\x0c';
}

/* float(int(stamp) // resolution * resolution), through Python ints when the
 * value does not fit the fast path. Returns 0, or -1 with an exception set. */
static int
floor_to(double stamp, long resolution, double *out)
{
    if (resolution > 0 && fabs(stamp) < 9.0e15) {
        long long whole = (long long)stamp; /* truncates toward zero, as int() */
        long long q = whole / resolution;
        if ((whole % resolution) != 0 && whole < 0)
            q -= 1; /* floor division */
        *out = (double)(q * resolution);
        return 0;
    }
    PyObject *f = PyFloat_FromDouble(stamp), *whole = NULL, *r = NULL, *q = NULL, *p = NULL;
    int rc = -1;
    if (f && (whole = PyNumber_Long(f)) && (r = PyLong_FromLong(resolution)) &&
        (q = PyNumber_FloorDivide(whole, r)) && (p = PyNumber_Multiply(q, r))) {
        *out = PyLong_AsDouble(p);
        rc = (*out == -1.0 && PyErr_Occurred()) ? -1 : 0;
    }
    Py_XDECREF(f);
    Py_XDECREF(whole);
    Py_XDECREF(r);
    Py_XDECREF(q);
    Py_XDECREF(p);
    return rc;
}

static PyObject *
parse_lines(PyObject *module, PyObject *args)
{
    PyObject *lines;
    double now;
    long resolution;
    if (!PyArg_ParseTuple(args, "O!dl:parse_lines", &PyList_Type, &lines, &now, &resolution))
        return NULL;
    PyObject *batch = PyList_New(0);
    PyObject *bad = PyList_New(0);
    if (batch == NULL || bad == NULL)
        goto error;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(lines); i++) {
        PyObject *line = PyList_GET_ITEM(lines, i);
        if (!PyBytes_Check(line)) {
            PyErr_SetString(PyExc_TypeError, "parse_lines: lines must be bytes");
            goto error;
        }
        const char *s = PyBytes_AS_STRING(line);
        Py_ssize_t n = PyBytes_GET_SIZE(line);
        const char *field[3];
        Py_ssize_t flen[3];
        int fields = 0;
        Py_ssize_t j = 0;
        while (j < n) {
            while (j < n && is_space((unsigned char)s[j]))
                j++;
            if (j >= n)
                break;
            Py_ssize_t begin = j;
            while (j < n && !is_space((unsigned char)s[j]))
                j++;
            if (fields < 3) {
                field[fields] = s + begin;
                flen[fields] = j - begin;
            }
            fields++;
        }
        if (fields == 0)
            continue;
        double value, stamp;
        int rc = -1;
        PyObject *name = NULL;
        if (fields == 3) {
            rc = text_to_double(field[1], flen[1], &value);
            if (rc == 0)
                rc = text_to_double(field[2], flen[2], &stamp);
            if (rc == -2)
                goto error;
            if (rc == 0 && !(isfinite(value) && isfinite(stamp)))
                rc = -1;
            if (rc == 0) {
                name = PyUnicode_DecodeUTF8(field[0], flen[0], "strict");
                if (name == NULL) {
                    if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
                        goto error;
                    PyErr_Clear();
                    rc = -1;
                }
            }
        }
        if (rc != 0) {
            if (PyList_Append(bad, line) < 0)
                goto error;
            continue;
        }
        if (-2.0 < stamp && stamp <= -1.0)
            stamp = now;
        if (resolution && floor_to(stamp, resolution, &stamp) < 0) {
            Py_DECREF(name);
            goto error;
        }
        PyObject *point = PyTuple_New(3);
        PyObject *t = PyFloat_FromDouble(stamp), *v = PyFloat_FromDouble(value);
        if (point == NULL || t == NULL || v == NULL) {
            Py_XDECREF(point);
            Py_XDECREF(t);
            Py_XDECREF(v);
            Py_DECREF(name);
            goto error;
        }
        PyTuple_SET_ITEM(point, 0, name);
        PyTuple_SET_ITEM(point, 1, t);
        PyTuple_SET_ITEM(point, 2, v);
        int failed = PyList_Append(batch, point);
        Py_DECREF(point);
        if (failed)
            goto error;
    }
    return Py_BuildValue("(NN)", batch, bad);
error:
    Py_XDECREF(batch);
    Py_XDECREF(bad);
    return NULL;
}

static PyMethodDef methods[] = {
    {"parse_lines", parse_lines, METH_VARARGS,
     "parse_lines(lines, now, resolution) -> (batch, bad): see carbon.formats.plaintext.parse_lines."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "carbon.formats._plaintext",
    "C accelerator for carbon.formats.plaintext.", -1, methods,
};

PyMODINIT_FUNC
PyInit__plaintext(void)
{
    return PyModule_Create(&module);
}
