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
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#define POINT_TAIL (2 * sizeof(double))

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
        uint32_t length;
        double tail[2];
        if (end - cursor < (Py_ssize_t)sizeof length)
            goto malformed;
        memcpy(&length, cursor, sizeof length);
        cursor += sizeof length;
        if ((size_t)(end - cursor) < (size_t)length + POINT_TAIL)
            goto malformed;
        PyObject *name = PyUnicode_DecodeUTF8(cursor, (Py_ssize_t)length, "strict");
        if (name == NULL)
            goto fail;
        cursor += length;
        memcpy(tail, cursor, POINT_TAIL);
        cursor += POINT_TAIL;
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

static PyMethodDef methods[] = {
    {"encode", encode, METH_O, "A batch of (metric, timestamp, value) in journal form."},
    {"decode", decode, METH_VARARGS, "(payload, count) -> list of (metric, ts, value)."},
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
