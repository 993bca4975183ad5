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
 * add_encoded(data, payload, count, names=None) -> int
 *
 * The same for `count` points in the journal's point form (carbon.cache.journal: per
 * point a uint32 name length, the UTF-8 name, the timestamp and the value as native
 * doubles), e.g. from carbon.cache._journal.encode_lines: the 16 bytes of each point are
 * copied as they are, only the name is made (to look its metric up). The payload is
 * checked whole before anything is added: ValueError, nothing added, when it does not
 * hold exactly `count` well-formed points. With `names` (a Names table) an ASCII name
 * seen before is looked up with the str object it was first made as (no new str, no
 * hash to compute, an identity match in the dict); the result is the same.
 *
 * Names(limit) -> a table of at most `limit` ASCII names (their str objects); past it
 * the table forgets every name at once and fills again. `len()` names held.
 *
 * The caller holds the cache's lock. Exactly what the pure-Python twins
 * (carbon.cache.store.add_points_py, add_encoded_py) do.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include "_point_form.h"

#define PAIR_SIZE POINT_TAIL /* a point as the cache keeps it: the form's tail */

/* Append one point (16 bytes: timestamp, value) to a metric's cached points. */
static int
append_to(PyObject *points, const char *pair)
{
    if (!PyByteArray_CheckExact(points)) {
        PyErr_SetString(PyExc_TypeError, "cached points must be a bytearray");
        return -1;
    }
    Py_ssize_t size = PyByteArray_GET_SIZE(points), need = size + (Py_ssize_t)PAIR_SIZE;
    PyByteArrayObject *array = (PyByteArrayObject *)points;
    if (need + 1 + (array->ob_start - array->ob_bytes) > array->ob_alloc) {
        /* Room for a quarter more points (as many again below 256 bytes): bytearray's
         * own growth (an 8th plus 6 bytes) reallocated a metric that gathers points
         * between two writes every point or two. A resize this far allocates exactly
         * that; the one below keeps the room (at most half of it is unused). */
        if (PyByteArray_Resize(points, need + (need < 256 ? need - 1 : need >> 2)))
            return -1;
    }
    if (PyByteArray_Resize(points, need))
        return -1;
    memcpy(PyByteArray_AS_STRING(points) + size, pair, PAIR_SIZE);
    return 0;
}

/* Append one point to data[metric] (a new bytearray for a new metric). */
static int
append_raw(PyObject *data, PyObject *metric, const char *pair)
{
    PyObject *points = PyDict_GetItemWithError(data, metric);
    if (points == NULL) {
        if (PyErr_Occurred())
            return -1;
        points = PyByteArray_FromStringAndSize(pair, PAIR_SIZE);
        if (points == NULL)
            return -1;
        int rc = PyDict_SetItem(data, metric, points);
        Py_DECREF(points);
        return rc;
    }
    return append_to(points, pair);
}

static int
append_pair(PyObject *data, PyObject *metric, double stamp, double value)
{
    double pair[2] = {stamp, value};
    return append_raw(data, metric, (const char *)pair);
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

/* ---------- Names: name bytes -> the str made for them --------------------------- */

typedef struct {
    uint64_t hash; /* 0: empty slot */
    PyObject *name;
} NameSlot;

typedef struct {
    PyObject_HEAD
    NameSlot *slots;
    size_t mask;
    Py_ssize_t used, limit;
} Names;

static uint64_t
bytes_hash(const char *s, size_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ n, w;
    for (; n >= 8; s += 8, n -= 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 29;
    }
    w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ULL;
    h ^= h >> 32;
    return h ? h : 1;
}

static void
names_clear(Names *t)
{
    if (t->slots == NULL)
        return;
    for (size_t i = 0; i <= t->mask; i++) {
        Py_CLEAR(t->slots[i].name);
        t->slots[i].hash = 0;
    }
    t->used = 0;
}

static int
Names_init(Names *t, PyObject *args, PyObject *kwds)
{
    Py_ssize_t limit;
    static char *kwlist[] = {"limit", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "n:Names", kwlist, &limit))
        return -1;
    if (limit < 1 || limit > (PY_SSIZE_T_MAX >> 4)) {
        PyErr_SetString(PyExc_ValueError, "Names: limit out of range");
        return -1;
    }
    size_t size = 1024; /* grows (doubling) while half full, up to 2 * limit slots */
    names_clear(t);
    PyMem_Free(t->slots);
    t->slots = PyMem_Calloc(size, sizeof(NameSlot));
    if (t->slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    t->mask = size - 1;
    t->used = 0;
    t->limit = limit;
    return 0;
}

static void
Names_dealloc(Names *t)
{
    names_clear(t);
    PyMem_Free(t->slots);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

static Py_ssize_t
Names_len(Names *t)
{
    return t->used;
}

/* Double the slots (kept at most half full, so a probe stays short and the slots a
 * read touches stay few: 10,000 names take 512 KiB). -1 on error (set). */
static int
names_grow(Names *t)
{
    size_t size = (t->mask + 1) * 2;
    NameSlot *slots = PyMem_Calloc(size, sizeof(NameSlot));
    if (slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i <= t->mask; i++) {
        NameSlot *old = &t->slots[i];
        if (old->hash == 0)
            continue;
        size_t j = (size_t)old->hash & (size - 1);
        while (slots[j].hash != 0)
            j = (j + 1) & (size - 1);
        slots[j] = *old;
    }
    PyMem_Free(t->slots);
    t->slots = slots;
    t->mask = size - 1;
    return 0;
}

static inline int
is_ascii_name(const char *s, Py_ssize_t n)
{
    unsigned char any = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        any |= (unsigned char)s[i];
    return any < 0x80;
}

/* A new reference to the str of the ASCII name bytes s[0:n] whose bytes_hash is `hash`:
 * the table's when it has one, else a new one, kept for next time. NULL on error. */
static PyObject *
names_get(Names *t, const char *s, Py_ssize_t n, uint64_t hash)
{
    size_t i = (size_t)hash & t->mask;
    for (;; i = (i + 1) & t->mask) {
        NameSlot *slot = &t->slots[i];
        if (slot->hash == 0)
            break;
        if (slot->hash == hash && PyUnicode_GET_LENGTH(slot->name) == n &&
            memcmp(PyUnicode_DATA(slot->name), s, (size_t)n) == 0)
            return Py_NewRef(slot->name);
    }
    PyObject *name = PyUnicode_FromStringAndSize(s, n); /* ASCII: compact, 1 byte a char */
    if (name == NULL)
        return NULL;
    if (t->used >= t->limit)
        names_clear(t);
    else if ((size_t)(t->used + 1) * 2 > t->mask + 1) {
        if (names_grow(t) < 0) {
            Py_DECREF(name);
            return NULL;
        }
    }
    else {
        t->slots[i].hash = hash;
        t->slots[i].name = Py_NewRef(name);
        t->used++;
        return name;
    }
    i = (size_t)hash & t->mask;
    while (t->slots[i].hash != 0)
        i = (i + 1) & t->mask;
    t->slots[i].hash = hash;
    t->slots[i].name = Py_NewRef(name);
    t->used++;
    return name;
}

static PySequenceMethods Names_as_sequence = {
    .sq_length = (lenfunc)Names_len,
};

static PyTypeObject NamesType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "carbon.cache._store.Names",
    .tp_basicsize = sizeof(Names),
    .tp_dealloc = (destructor)Names_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Names(limit): ASCII metric names -> their str objects (see the module).",
    .tp_as_sequence = &Names_as_sequence,
    .tp_init = (initproc)Names_init,
    .tp_new = PyType_GenericNew,
};

/* The end of the count points at buf, or NULL when they are not exactly len bytes. */
static const char *
points_end(const char *buf, Py_ssize_t len, Py_ssize_t count)
{
    const char *cursor = buf, *end = buf + len, *name;
    uint32_t length;
    for (Py_ssize_t i = 0; i < count; i++)
        if (point_form_next(&cursor, end, &name, &length))
            return NULL;
    return cursor == end ? end : NULL;
}

/* How far ahead add_encoded's last pass fetches a metric's bytearray object, and (half
 * as far) the end of its points, where the next pair goes. */
#define AHEAD_OBJECT 8
#define AHEAD_BUFFER 4

static PyObject *
add_encoded(PyObject *module, PyObject *args)
{
    PyObject *data, *names_obj = Py_None, *result = NULL;
    Py_buffer view;
    Py_ssize_t count, i, made = 0;
    uint64_t *hashes = NULL;
    PyObject **keys = NULL, **found = NULL;
    const char **pairs = NULL;

    (void)module;
    if (!PyArg_ParseTuple(args, "O!y*n|O", &PyDict_Type, &data, &view, &count, &names_obj))
        return NULL;
    Names *names = NULL;
    if (names_obj != Py_None) {
        if (!PyObject_TypeCheck(names_obj, &NamesType)) {
            PyErr_SetString(PyExc_TypeError, "names must be a Names table or None");
            goto fail;
        }
        names = (Names *)names_obj;
    }
    const char *cursor = view.buf, *end = cursor + view.len;
    if (count < 0 || points_end(cursor, view.len, count) == NULL)
        goto malformed;
    if (count == 0)
        goto done;
    keys = PyMem_Malloc((size_t)count * sizeof(PyObject *));
    found = PyMem_Malloc((size_t)count * sizeof(PyObject *));
    pairs = PyMem_Malloc((size_t)count * sizeof(const char *));
    if (keys == NULL || found == NULL || pairs == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    /* With a table: every name's hash first (0 for a non-ASCII name), its slot fetched
     * ahead, so the probes below find their slots in the cache. */
    if (names != NULL) {
        hashes = PyMem_Malloc((size_t)count * sizeof(uint64_t));
        if (hashes == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
        const char *ahead = cursor, *text;
        uint32_t length;
        for (i = 0; i < count; i++) {
            if (point_form_next(&ahead, end, &text, &length))
                goto malformed; /* not after points_end's check */
            if (is_ascii_name(text, (Py_ssize_t)length)) {
                hashes[i] = bytes_hash(text, length);
                __builtin_prefetch(&names->slots[(size_t)hashes[i] & names->mask]);
            }
            else
                hashes[i] = 0;
        }
    }
    /* The names, then their cached points looked up in a loop of lookups only (the
     * misses of a large cache's dict overlap), then the appends: three passes, not
     * one a point, for the memory's sake. Nothing is removed from `data` meanwhile,
     * so a bytearray found stays its metric's (borrowed from the dict). */
    for (i = 0; i < count; i++) {
        const char *text;
        uint32_t length;
        if (point_form_next(&cursor, end, &text, &length))
            goto malformed; /* not after points_end's check */
        PyObject *name = hashes != NULL && hashes[i] != 0
                             ? names_get(names, text, (Py_ssize_t)length, hashes[i])
                             : PyUnicode_DecodeUTF8(text, (Py_ssize_t)length, "strict");
        if (name == NULL)
            goto fail;
        keys[made++] = name;
        pairs[i] = text + length;
    }
    for (i = 0; i < count; i++) {
        found[i] = PyDict_GetItemWithError(data, keys[i]);
        if (found[i] == NULL && PyErr_Occurred())
            goto fail;
    }
    for (i = 0; i < count; i++) {
        if (i + AHEAD_OBJECT < count && found[i + AHEAD_OBJECT] != NULL)
            __builtin_prefetch(found[i + AHEAD_OBJECT]);
        if (i + AHEAD_BUFFER < count && found[i + AHEAD_BUFFER] != NULL &&
            PyByteArray_CheckExact(found[i + AHEAD_BUFFER])) {
            PyObject *ahead = found[i + AHEAD_BUFFER];
            __builtin_prefetch(PyByteArray_AS_STRING(ahead) + PyByteArray_GET_SIZE(ahead), 1);
        }
        /* a metric new in this call: made by its first point, found again after */
        int rc = found[i] != NULL ? append_to(found[i], pairs[i])
                                  : append_raw(data, keys[i], pairs[i]);
        if (rc)
            goto fail;
    }
done:
    result = PyLong_FromSsize_t(count);
    goto out;
malformed:
    PyErr_SetString(PyExc_ValueError, "malformed journal payload");
fail:
out:
    for (i = 0; i < made; i++)
        Py_DECREF(keys[i]);
    PyMem_Free(keys);
    PyMem_Free(found);
    PyMem_Free(pairs);
    PyMem_Free(hashes);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"add_batch", add_batch, METH_VARARGS,
     "add_batch(data, batch) -> int\n\n"
     "Append (metric, timestamp, value) points to data[metric] (bytearrays of native\n"
     "double pairs); returns how many."},
    {"add_encoded", add_encoded, METH_VARARGS,
     "add_encoded(data, payload, count, names=None) -> int\n\n"
     "add_batch for points in the journal's point form; returns how many."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "carbon.cache._store",
    "The metric cache's batch append.", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__store(void)
{
    if (PyType_Ready(&NamesType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Names", (PyObject *)&NamesType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
