/* carbon.aggregator._staging: stage a whole socket read of canonical lines.
 *
 * stage(chunk, max_length, matches, extra, lo, hi, touched) -> int | list | None
 *
 * The C twin of carbon.aggregator.staging.stage_chunk (see there for the contract):
 * every line of `chunk` must be canonical exactly as
 * carbon.formats.plaintext.canonical_lines defines it, at most `max_length` bytes
 * (0: no limit) and have a timestamp t with lo <= t < hi, else None. With `matches`
 * None the lines are only checked and counted. Otherwise each name is looked up in
 * `matches`, then `extra` (dicts of name bytes -> tuple of staging lists); if any
 * name is in neither, the list of those names (first-seen order, no repeats) is
 * returned and nothing is staged. Else each value (converted as float() would)
 * is appended to every list of its name's tuple, a list being appended to
 * `touched` when it receives its first value, and the line count is returned.
 *
 * Nothing is staged unless the whole read is accepted; errors raise (MemoryError,
 * TypeError for a mapping value that is not a tuple of lists).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at p (strict, as Python decodes), or 0. */
static Py_ssize_t
utf8_sequence(const unsigned char *p, const unsigned char *end)
{
    unsigned char c = p[0];
    Py_ssize_t need;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
        need = 1;
    }
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        if (c == 0xE0) {
            lo = 0xA0;
        }
        else if (c == 0xED) {
            hi = 0x9F;  /* no surrogates */
        }
    }
    else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        if (c == 0xF0) {
            lo = 0x90;
        }
        else if (c == 0xF4) {
            hi = 0x8F;  /* at most U+10FFFF */
        }
    }
    else {
        return 0;
    }
    if (end - p <= need) {
        return 0;
    }
    if (p[1] < lo || p[1] > hi) {
        return 0;
    }
    for (Py_ssize_t k = 2; k <= need; k++) {
        if (p[k] < 0x80 || p[k] > 0xBF) {
            return 0;
        }
    }
    return need + 1;
}

/* The end of a name starting at p: the first byte that cannot be part of one (a
 * space ends a good name; a newline or CR means too few fields; tab, VT, FF and
 * invalid UTF-8 are never canonical). Other control characters are kept, as
 * canonical_lines keeps them. */
static const unsigned char *
scan_name(const unsigned char *p, const unsigned char *end)
{
    while (1) {
        unsigned char c = *p;
        if (c > ' ' && c < 0x80) {
            p++;
        }
        else if (c >= 0x80) {
            Py_ssize_t n = utf8_sequence(p, end);
            if (n == 0) {
                return p;
            }
            p += n;
        }
        else if (c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\v' || c == '\f') {
            return p;
        }
        else {
            p++;
        }
    }
}

static const double POW10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10};

/* Parse a canonical value ending at a space: '-'? then 0 or [1-9] with at most 15
 * digits, or at most 5 integer digits and 1..10 decimals ending in a non-zero digit.
 * At most 15 significant digits, so the mantissa is exact and one division by an
 * exact power of ten gives the correctly rounded double, which is what float()
 * returns. Returns the position after the value, or NULL if it is not canonical. */
static const unsigned char *
parse_value(const unsigned char *p, const unsigned char *end, double *out)
{
    int negative = 0;
    int64_t mantissa = 0;
    int digits = 0, decimals = 0;
    if (p < end && *p == '-') {
        negative = 1;
        p++;
    }
    if (p >= end) {
        return NULL;
    }
    if (*p == '0') {
        p++;
        digits = 1;
    }
    else if (*p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9') {
            if (++digits > 15) {
                return NULL;
            }
            mantissa = mantissa * 10 + (*p - '0');
            p++;
        }
    }
    else {
        return NULL;
    }
    if (p < end && *p == '.') {
        if (digits > 5) {
            return NULL;
        }
        p++;
        while (p < end && *p >= '0' && *p <= '9') {
            if (++decimals > 10) {
                return NULL;
            }
            mantissa = mantissa * 10 + (*p - '0');
            p++;
        }
        if (decimals == 0 || p[-1] == '0') {
            return NULL;
        }
    }
    if (p >= end || *p != ' ') {
        return NULL;
    }
    double value = (double)mantissa;
    if (decimals) {
        value /= POW10[decimals];
    }
    *out = negative ? -value : value;
    return p;
}

typedef struct {
    PyObject *slots;  /* strong reference to a non-empty tuple of lists */
    double value;
} Entry;

typedef struct {
    Entry *items;
    Py_ssize_t size, capacity;
} Entries;

static int
entries_push(Entries *e, PyObject *slots, double value)
{
    if (e->size == e->capacity) {
        Py_ssize_t capacity = e->capacity ? e->capacity * 2 : 256;
        Entry *items = PyMem_Realloc(e->items, (size_t)capacity * sizeof(Entry));
        if (items == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        e->items = items;
        e->capacity = capacity;
    }
    Py_INCREF(slots);
    e->items[e->size].slots = slots;
    e->items[e->size].value = value;
    e->size++;
    return 0;
}

static void
entries_free(Entries *e)
{
    for (Py_ssize_t i = 0; i < e->size; i++) {
        Py_DECREF(e->items[i].slots);
    }
    PyMem_Free(e->items);
}

/* The staging tuple for `name` (borrowed), NULL with no error if unknown, NULL with
 * an error set on failure. */
static PyObject *
lookup(PyObject *matches, PyObject *extra, PyObject *name)
{
    PyObject *slots = PyDict_GetItemWithError(matches, name);
    if (slots == NULL && !PyErr_Occurred() && extra != NULL) {
        slots = PyDict_GetItemWithError(extra, name);
    }
    if (slots == NULL) {
        return NULL;
    }
    if (!PyTuple_Check(slots)) {
        PyErr_SetString(PyExc_TypeError, "staging entries must be tuples of lists");
        return NULL;
    }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(slots); k++) {
        if (!PyList_Check(PyTuple_GET_ITEM(slots, k))) {
            PyErr_SetString(PyExc_TypeError, "staging entries must be tuples of lists");
            return NULL;
        }
    }
    return slots;
}

static int
note_unknown(PyObject **seen, PyObject **unknown, PyObject *name)
{
    if (*seen == NULL) {
        *seen = PySet_New(NULL);
        *unknown = PyList_New(0);
        if (*seen == NULL || *unknown == NULL) {
            return -1;
        }
    }
    int present = PySet_Contains(*seen, name);
    if (present != 0) {
        return present < 0 ? -1 : 0;
    }
    if (PySet_Add(*seen, name) < 0) {
        return -1;
    }
    return PyList_Append(*unknown, name);
}

static PyObject *
stage(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_Format(PyExc_TypeError, "stage() takes 7 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *chunk = args[0], *matches = args[2], *extra = args[3], *touched = args[6];
    if (!PyBytes_Check(chunk)) {
        PyErr_SetString(PyExc_TypeError, "chunk must be bytes");
        return NULL;
    }
    Py_ssize_t max_length = PyLong_AsSsize_t(args[1]);
    if (max_length == -1 && PyErr_Occurred()) {
        return NULL;
    }
    long long lo = PyLong_AsLongLong(args[4]);
    if (lo == -1 && PyErr_Occurred()) {
        return NULL;
    }
    long long hi = PyLong_AsLongLong(args[5]);
    if (hi == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (matches == Py_None) {
        matches = NULL;
    }
    else if (!PyDict_Check(matches)) {
        PyErr_SetString(PyExc_TypeError, "matches must be a dict or None");
        return NULL;
    }
    if (extra == Py_None) {
        extra = NULL;
    }
    else if (!PyDict_Check(extra)) {
        PyErr_SetString(PyExc_TypeError, "extra must be a dict or None");
        return NULL;
    }
    if (matches != NULL && !PyList_Check(touched)) {
        PyErr_SetString(PyExc_TypeError, "touched must be a list");
        return NULL;
    }

    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(chunk);
    const unsigned char *end = p + PyBytes_GET_SIZE(chunk);
    Entries entries = {NULL, 0, 0};
    PyObject *seen = NULL, *unknown = NULL, *result = NULL;
    Py_ssize_t count = 0;
    int canonical = p < end && end[-1] == '\n';

    while (canonical && p < end) {
        const unsigned char *line = p;
        p = scan_name(p, end);
        if (*p != ' ' || p == line) {
            canonical = 0;
            break;
        }
        const unsigned char *name_end = p++;
        double value;
        p = parse_value(p, end, &value);
        if (p == NULL) {
            canonical = 0;
            break;
        }
        p++;  /* the space */
        /* timestamp: [1-9][0-9]{0,14}, then "\n" or "\r\n" */
        long long stamp = 0;
        int digits = 0;
        if (*p < '1' || *p > '9') {
            canonical = 0;
            break;
        }
        while (*p >= '0' && *p <= '9' && digits <= 15) {
            stamp = stamp * 10 + (*p - '0');
            digits++;
            p++;
        }
        if (*p == '\r') {
            p++;
        }
        if (digits > 15 || *p != '\n') {
            canonical = 0;
            break;
        }
        p++;
        if ((max_length && (p - 1) - line > max_length) || stamp < lo || stamp >= hi) {
            canonical = 0;
            break;
        }
        count++;
        if (matches == NULL) {
            continue;
        }
        PyObject *name = PyBytes_FromStringAndSize((const char *)line, name_end - line);
        if (name == NULL) {
            goto error;
        }
        PyObject *slots = lookup(matches, extra, name);
        if (slots == NULL) {
            if (PyErr_Occurred() || note_unknown(&seen, &unknown, name) < 0) {
                Py_DECREF(name);
                goto error;
            }
        }
        else if (unknown == NULL && PyTuple_GET_SIZE(slots)
                 && entries_push(&entries, slots, value) < 0) {
            Py_DECREF(name);
            goto error;
        }
        Py_DECREF(name);
    }

    if (!canonical) {
        Py_INCREF(Py_None);
        result = Py_None;
    }
    else if (unknown != NULL) {
        Py_INCREF(unknown);
        result = unknown;
    }
    else {
        for (Py_ssize_t i = 0; i < entries.size; i++) {
            PyObject *slots = entries.items[i].slots;
            PyObject *value = PyFloat_FromDouble(entries.items[i].value);
            if (value == NULL) {
                goto error;
            }
            for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(slots); k++) {
                PyObject *slot = PyTuple_GET_ITEM(slots, k);
                if ((PyList_GET_SIZE(slot) == 0 && PyList_Append(touched, slot) < 0)
                        || PyList_Append(slot, value) < 0) {
                    Py_DECREF(value);
                    goto error;
                }
            }
            Py_DECREF(value);
        }
        result = PyLong_FromSsize_t(count);
    }
error:
    entries_free(&entries);
    Py_XDECREF(seen);
    Py_XDECREF(unknown);
    return result;
}

static PyMethodDef methods[] = {
    {"stage", (PyCFunction)(void (*)(void))stage, METH_FASTCALL,
     "stage(chunk, max_length, matches, extra, lo, hi, touched) -> int | list | None\n\n"
     "Check and stage a read of canonical lines (see carbon.aggregator.staging)."},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef_Slot slots[] = {
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "carbon.aggregator._staging",
    "Stage whole reads of canonical lines for the aggregator (C twin of staging.py).",
    0, methods, slots, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__staging(void)
{
    return PyModuleDef_Init(&module_def);
}
