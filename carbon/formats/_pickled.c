/* C accelerator for carbon.formats.pickled: the pickle receiver's common message.
 *
 * points(data) -> (batch, bad) or None
 *
 * Reads a pickle of [(metric, (timestamp, value)), ...] as carbon's relays and clients
 * write it (protocols 1-5: PROTO, FRAME, EMPTY_LIST, MARK/APPENDS/APPEND, the memo
 * opcodes, BINUNICODE/SHORT_BINUNICODE/BINUNICODE8 and BINSTRING/SHORT_BINSTRING names,
 * BININT/BININT1/BININT2/LONG1/BINFLOAT numbers, TUPLE2/TUPLE, STOP) straight into the
 * batch points_from_pickle would make of the unpickled list: (metric, float(timestamp),
 * float(value)) for each item, items with a non-finite number or an empty name counted
 * in `bad`. Any other opcode or shape, any malformed byte, returns None and the caller
 * uses the safe unpickler, which decides (and raises) exactly as before (Python twin:
 * pickled.points_from_pickle(unpickler.safe_loads(data))). Nothing is
 * ever imported or called: there is no opcode for it here.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#define MAX_MEMO (1 << 22)

enum { V_NUM, V_STR, V_PAIR, V_ITEM, V_MARK, V_LIST, V_HOLE };

typedef struct {
    int kind;
    double a, b;   /* V_NUM: a; V_PAIR and V_ITEM: a, b (the timestamp, the value) */
    PyObject *str; /* V_STR and V_ITEM: a reference held by the stack or the memo */
} Value;

typedef struct {
    Value *items;
    Py_ssize_t count, capacity;
    Py_ssize_t filled; /* memo: entries set (pickle's memo_len, MEMOIZE's next index) */
} Stack;

static void
clear_values(Value *values, Py_ssize_t count)
{
    for (Py_ssize_t i = 0; i < count; i++)
        Py_XDECREF(values[i].str);
}

static int
push(Stack *stack, Value value)
{
    if (stack->count == stack->capacity) {
        Py_ssize_t capacity = stack->capacity ? stack->capacity * 2 : 64;
        Value *items = PyMem_Realloc(stack->items, (size_t)capacity * sizeof(Value));
        if (items == NULL)
            return -1;
        stack->items = items;
        stack->capacity = capacity;
    }
    Py_XINCREF(value.str);
    stack->items[stack->count++] = value;
    return 0;
}

/* memo[index] = value (growing the memo with holes, which BINGET refuses) */
static int
memo_put(Stack *memo, Py_ssize_t index, Value value)
{
    if (index < 0 || index >= MAX_MEMO)
        return -1;
    while (memo->count <= index) {
        Value hole = {V_HOLE, 0.0, 0.0, NULL};
        if (push(memo, hole))
            return -1;
    }
    if (memo->items[index].kind == V_HOLE)
        memo->filled++;
    Py_XINCREF(value.str);
    Py_XDECREF(memo->items[index].str);
    memo->items[index] = value;
    return 0;
}

/* An opcode's unsigned little-endian argument of `width` bytes (0 to 8) at *p into *out,
 * *p moved past it; 0 when fewer than `width` bytes are left. */
static inline int
take_arg(const unsigned char **p, const unsigned char *end, Py_ssize_t width, uint64_t *out)
{
    const unsigned char *s = *p;
    if (end - s < width)
        return 0;
    uint64_t n = 0;
    switch (width) { /* the widths opcodes have, read at once */
    case 1:
        n = s[0];
        break;
    case 4:
        n = (uint64_t)s[0] | ((uint64_t)s[1] << 8) | ((uint64_t)s[2] << 16) |
            ((uint64_t)s[3] << 24);
        break;
    default: /* BININT2, BINUNICODE8, FRAME, LONG1's bytes */
        for (Py_ssize_t i = width - 1; i >= 0; i--)
            n = (n << 8) | s[i];
    }
    *p = s + width;
    *out = n;
    return 1;
}

static inline double
be_double(const unsigned char *p)
{
    uint64_t bits = 0;
    double d;
    for (int i = 0; i < 8; i++)
        bits = (bits << 8) | p[i];
    memcpy(&d, &bits, sizeof d);
    return d;
}

/* The batch entry of one item, or NULL with *bad set when the item is not valid. */
static PyObject *
entry(const Value *item, int *bad)
{
    *bad = 0;
    if (!isfinite(item->a) || !isfinite(item->b) || PyUnicode_GET_LENGTH(item->str) == 0) {
        *bad = 1;
        return NULL;
    }
    PyObject *stamp = PyFloat_FromDouble(item->a), *value = PyFloat_FromDouble(item->b);
    PyObject *result = NULL;
    if (stamp != NULL && value != NULL)
        result = PyTuple_Pack(3, item->str, stamp, value);
    Py_XDECREF(stamp);
    Py_XDECREF(value);
    return result;
}

/* Parse; 1 = done, 0 = not this shape (caller falls back), -1 = a Python error. */
static int
parse(const unsigned char *p, Py_ssize_t size, PyObject *batch, Py_ssize_t *bad,
      Stack *stack, Stack *memo)
{
    const unsigned char *end = p + size;
    /* Where the current FRAME ends. The reference reads through a file object, and
       CPython's unpickler then misreads an opcode that crosses a frame's end: such
       input is left to the safe unpickler, like a FRAME that starts inside another. */
    const unsigned char *frame_end = NULL;
    int started = 0;
    while (p < end) {
        if (frame_end != NULL && p > frame_end)
            return 0;
        unsigned char op = *p++;
        Value value = {V_NUM, 0.0, 0.0, NULL};
        Py_ssize_t length = 0;
        switch (op) {
        case 0x80: /* PROTO */
            if (p >= end || *p < 1 || *p > 5)
                return 0;
            p++;
            continue;
        case 0x95: /* FRAME: its length must fit in what is left */
        {
            uint64_t n;
            if (!take_arg(&p, end, 8, &n) || n > (uint64_t)(end - p))
                return 0;
            if (frame_end != NULL && p - 9 < frame_end)
                return 0;
            frame_end = p + n;
            continue;
        }
        case ']': /* EMPTY_LIST */
            if (started)
                return 0;
            started = 1;
            value.kind = V_LIST;
            break;
        case '(': /* MARK */
            value.kind = V_MARK;
            break;
        case 'q': /* BINPUT */
        case 'r': /* LONG_BINPUT */
        case 0x94: /* MEMOIZE */
        {
            uint64_t index;
            /* pickle memoizes the top object; a MARK here is not one of ours */
            if (!stack->count || stack->items[stack->count - 1].kind == V_MARK)
                return 0;
            if (op == 0x94)
                index = (uint64_t)memo->filled;
            else if (!take_arg(&p, end, op == 'q' ? 1 : 4, &index))
                return 0;
            if (memo_put(memo, (Py_ssize_t)index, stack->items[stack->count - 1]))
                return PyErr_Occurred() ? -1 : 0;
            continue;
        }
        case 'h': /* BINGET */
        case 'j': /* LONG_BINGET */
        {
            uint64_t arg;
            if (!take_arg(&p, end, op == 'h' ? 1 : 4, &arg))
                return 0;
            Py_ssize_t index = (Py_ssize_t)arg;
            if (index >= memo->count || memo->items[index].kind == V_HOLE
                || memo->items[index].kind == V_LIST)
                return 0;
            if (push(stack, memo->items[index]))
                return -1;
            continue;
        }
        case 'X': /* BINUNICODE */
        case 0x8c: /* SHORT_BINUNICODE */
        case 0x8d: /* BINUNICODE8 */
        case 'T': /* BINSTRING */
        case 'U': /* SHORT_BINSTRING */
        {
            uint64_t n;
            if (!take_arg(&p, end, (op == 0x8c || op == 'U') ? 1 : op == 0x8d ? 8 : 4, &n) ||
                n > (uint64_t)(end - p))
                return 0;
            if (op == 'T' && (n & 0x80000000u))
                return 0; /* negative length */
            length = (Py_ssize_t)n;
            /* as pickle decodes: names with surrogatepass; py2 strs as encoding="utf-8" */
            value.str = PyUnicode_DecodeUTF8((const char *)p, length,
                                             (op == 'T' || op == 'U') ? "strict"
                                                                      : "surrogatepass");
            if (value.str == NULL) {
                PyErr_Clear();
                return 0;
            }
            p += length;
            value.kind = V_STR;
            int rc = push(stack, value);
            Py_DECREF(value.str); /* the stack holds it */
            if (rc)
                return -1;
            continue;
        }
        case 'K': /* BININT1 */
        case 'M': /* BININT2 */
        {
            uint64_t n;
            if (!take_arg(&p, end, op == 'K' ? 1 : 2, &n))
                return 0;
            value.a = (double)n;
            break;
        }
        case 'J': /* BININT */
        {
            uint64_t n;
            if (!take_arg(&p, end, 4, &n))
                return 0;
            value.a = (double)(int32_t)(uint32_t)n;
            break;
        }
        case 0x8a: /* LONG1: little-endian two's complement, at most 8 bytes here */
        {
            uint64_t n, bits;
            if (!take_arg(&p, end, 1, &n) || n > 8 || !take_arg(&p, end, (Py_ssize_t)n, &bits))
                return 0;
            if (n && n < 8 && (bits >> (8 * n - 1)) & 1)
                bits |= ~(uint64_t)0 << (8 * n); /* sign-extend */
            value.a = (double)(int64_t)bits;
            break;
        }
        case 'G': /* BINFLOAT */
            if (end - p < 8)
                return 0;
            value.a = be_double(p);
            p += 8;
            break;
        case 0x86: /* TUPLE2 */
        case 't': /* TUPLE (from MARK) */
        {
            Value *first, *second;
            if (op == 't') {
                if (stack->count < 3 || stack->items[stack->count - 3].kind != V_MARK)
                    return 0;
            }
            else if (stack->count < 2) {
                return 0;
            }
            first = &stack->items[stack->count - 2];
            second = &stack->items[stack->count - 1];
            if (first->kind == V_NUM && second->kind == V_NUM) {
                value.kind = V_PAIR;
                value.a = first->a;
                value.b = second->a;
            }
            else if (first->kind == V_STR && second->kind == V_PAIR) {
                value.kind = V_ITEM;
                value.str = first->str; /* the reference moves to the new value */
                first->str = NULL;
                value.a = second->a;
                value.b = second->b;
            }
            else {
                return 0;
            }
            clear_values(first, 2);
            stack->count -= op == 't' ? 3 : 2;
            stack->items[stack->count++] = value; /* there is room: two were popped */
            continue;
        }
        case 'a': /* APPEND */
        case 'e': /* APPENDS */
        {
            Py_ssize_t from;
            if (op == 'a') {
                from = stack->count - 1;
                if (from < 1)
                    return 0;
            }
            else {
                from = stack->count;
                while (from > 0 && stack->items[from - 1].kind != V_MARK)
                    from--;
                if (from < 2) /* no MARK, or nothing under it */
                    return 0;
            }
            Py_ssize_t list = op == 'a' ? from - 1 : from - 2;
            if (stack->items[list].kind != V_LIST)
                return 0;
            for (Py_ssize_t i = from; i < stack->count; i++) {
                if (stack->items[i].kind != V_ITEM)
                    return 0;
            }
            for (Py_ssize_t i = from; i < stack->count; i++) {
                int wrong;
                PyObject *point = entry(&stack->items[i], &wrong);
                if (wrong) {
                    (*bad)++;
                    continue;
                }
                if (point == NULL || PyList_Append(batch, point)) {
                    Py_XDECREF(point);
                    return -1;
                }
                Py_DECREF(point);
            }
            clear_values(stack->items + list + 1, stack->count - list - 1);
            stack->count = list + 1;
            continue;
        }
        case '.': /* STOP */
            return p == end && stack->count == 1 && stack->items[0].kind == V_LIST;
        default:
            return 0;
        }
        if (push(stack, value))
            return -1;
    }
    return 0; /* no STOP */
}

static PyObject *
points(PyObject *module, PyObject *arg)
{
    Py_buffer view;
    Stack stack = {NULL, 0, 0, 0}, memo = {NULL, 0, 0, 0};
    Py_ssize_t bad = 0;
    PyObject *batch, *result = NULL;
    int rc;

    (void)module;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE))
        return NULL;
    batch = PyList_New(0);
    if (batch == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    rc = parse(view.buf, view.len, batch, &bad, &stack, &memo);
    clear_values(stack.items, stack.count);
    clear_values(memo.items, memo.count);
    PyMem_Free(stack.items);
    PyMem_Free(memo.items);
    PyBuffer_Release(&view);
    if (rc == 1)
        result = Py_BuildValue("(On)", batch, bad);
    else if (rc == 0) {
        result = Py_None;
        Py_INCREF(result);
    }
    Py_DECREF(batch);
    return result;
}

static PyMethodDef methods[] = {
    {"points", points, METH_O,
     "points(data) -> (batch, bad) or None\n\n"
     "The batch points_from_pickle(loads(data)) would give for a plain pickled list of\n"
     "(metric, (timestamp, value)); None for anything else."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "carbon.formats._pickled",
    "The pickle receiver's common message, without the unpickler.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__pickled(void)
{
    return PyModule_Create(&module);
}
