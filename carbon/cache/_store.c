/* C accelerator for carbon.cache.store: MetricCache.add_batch's loop (Python twin:
 * carbon.cache.store.add_points_py).
 *
 * add_batch(data, batch) -> int
 *
 * data: the cache's dict of metric name -> bytearray of native doubles (interleaved
 * timestamp, value pairs in arrival order). batch: a sequence of (metric: str,
 * timestamp, value) with float (or int) timestamp and value. Appends each point to its
 * metric's bytearray (a new one for a new metric). Returns how many were added; raises
 * TypeError for an item that is not such a triple (points before it stay added).
 *
 * The caller holds the cache's lock. Exactly what the pure-Python loop
 * (carbon.cache.store.add_points_py) does.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

#define PAIR_SIZE (2 * sizeof(double))

static int
append_pair(PyObject *data, PyObject *metric, double stamp, double value)
{
    double pair[2] = {stamp, value};
    PyObject *points = PyDict_GetItemWithError(data, metric);
    if (points == NULL) {
        if (PyErr_Occurred())
            return -1;
        points = PyByteArray_FromStringAndSize((const char *)pair, PAIR_SIZE);
        if (points == NULL)
            return -1;
        int rc = PyDict_SetItem(data, metric, points);
        Py_DECREF(points);
        return rc;
    }
    if (!PyByteArray_CheckExact(points)) {
        PyErr_SetString(PyExc_TypeError, "cached points must be a bytearray");
        return -1;
    }
    Py_ssize_t size = PyByteArray_GET_SIZE(points);
    if (PyByteArray_Resize(points, size + (Py_ssize_t)PAIR_SIZE))
        return -1;
    memcpy(PyByteArray_AS_STRING(points) + size, pair, PAIR_SIZE);
    return 0;
}

static PyObject *
add_batch(PyObject *module, PyObject *args)
{
    PyObject *data, *batch, *fast;
    Py_ssize_t count, i;

    (void)module;
    if (!PyArg_ParseTuple(args, "O!O", &PyDict_Type, &data, &batch))
        return NULL;
    fast = PySequence_Fast(batch, "batch must be a sequence");
    if (fast == NULL)
        return NULL;
    count = PySequence_Fast_GET_SIZE(fast);
    for (i = 0; i < count; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, i);
        if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 3
            || !PyUnicode_CheckExact(PyTuple_GET_ITEM(item, 0))) {
            PyErr_SetString(PyExc_TypeError, "batch items must be (str, float, float)");
            goto fail;
        }
        PyObject *stamp_obj = PyTuple_GET_ITEM(item, 1), *value_obj = PyTuple_GET_ITEM(item, 2);
        double stamp = PyFloat_CheckExact(stamp_obj) ? PyFloat_AS_DOUBLE(stamp_obj)
                                                     : PyFloat_AsDouble(stamp_obj);
        if (stamp == -1.0 && PyErr_Occurred())
            goto fail;
        double value = PyFloat_CheckExact(value_obj) ? PyFloat_AS_DOUBLE(value_obj)
                                                     : PyFloat_AsDouble(value_obj);
        if (value == -1.0 && PyErr_Occurred())
            goto fail;
        if (append_pair(data, PyTuple_GET_ITEM(item, 0), stamp, value))
            goto fail;
    }
    Py_DECREF(fast);
    return PyLong_FromSsize_t(count);

fail:
    Py_DECREF(fast);
    return NULL;
}

static PyMethodDef methods[] = {
    {"add_batch", add_batch, METH_VARARGS,
     "add_batch(data, batch) -> int\n\n"
     "Append (metric, timestamp, value) points to data[metric] (bytearrays of native\n"
     "double pairs); returns how many."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "carbon.cache._store",
    "The metric cache's batch append.", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__store(void)
{
    return PyModule_Create(&module);
}
