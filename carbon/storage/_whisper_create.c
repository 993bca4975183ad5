/* C accelerator for carbon.storage.whisper_create: create_many and exists_many.
 *
 * Paths are str, bytes or os.PathLike, encoded as os.fsencode does.
 *
 * stat_files(paths) -> list: stat() each path with the GIL released; per path 0 (it
 * exists) or the errno.
 *
 * create_files(items, mode, lock, fadvise_random, autoflush, makedirs) -> list
 *
 * items: a sequence of (path, header: bytes, total: int[, image, keep]). `image` (bytes
 * or None) is the file's first bytes with its first points already in them
 * (_whisper_writer.first_images: the header, then zeroes and points), written instead
 * of the header; the rest of the file is filled as below. `keep` false: the descriptor
 * is closed once the file is made (its points are in it). For each item, with the
 * GIL released for the whole batch, exactly what the pure-Python create_one does:
 *   open(path, O_RDWR|O_CREAT|O_EXCL|O_CLOEXEC, 0666)   (the umask applies, as os.open);
 *     on ENOENT with `makedirs`, the missing parent directories are made (0777, umask
 *     applies, as os.makedirs) and the open is tried once more;
 *   flock(LOCK_EX) if `lock`; posix_fadvise(RANDOM) if `fadvise_random`;
 *   the header (or image) written at 0; the rest (total - its length) zero-filled:
 *     mode 2 (WHISPER_FALLOCATE_CREATE): the whole file posix_fallocate'd before the
 *       header's write, an error fails the file;
 *     mode 1 (WHISPER_SPARSE_CREATE): one zero byte written at total - 1;
 *     mode 0 (whisper's default): a body of at most SMALL_BODY bytes written as zeroes
 *       (ext4 allocates its block later, in writeback, for less than fallocate costs
 *       the creating thread; with a header that fits, header and zeroes in one write),
 *       for a larger one the whole file posix_fallocate'd before the header's write
 *       (far less than writing it), else the body written as zeroes;
 *   fsync if `autoflush`; flock(LOCK_UN) if `lock`; close unless `keep`.
 * A file that fails after its open is closed and unlinked.
 *
 * Returns one entry per item: the descriptor (a tuple (fd,): the caller owns it) of a
 * created file, None for one created and closed, or the errno (an int) of the first
 * failing call.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "_fileio.h"

#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif

#define ZERO_CHUNK 16384
#define SMALL_BODY 16384 /* carbon.storage.whisper_create.SMALL_BODY */

static const char ZEROES[ZERO_CHUNK];

typedef struct {
    PyObject *path_obj; /* owned references: the bytes stay alive while the GIL is free */
    PyObject *header_obj; /* the header, or the image written in its place */
    const char *path;
    const char *header;
    Py_ssize_t header_len;
    long long total;
    int keep;
    int fd;
    int error;
} Item;

static int
fallocate_range(int fd, off_t offset, off_t len)
{
    int rc;
    do {
        rc = posix_fallocate(fd, offset, len);
    } while (rc == EINTR);
    return rc;
}

static int
write_zeroes(int fd, off_t offset, long long remaining)
{
    while (remaining > 0) {
        size_t chunk = remaining > ZERO_CHUNK ? ZERO_CHUNK : (size_t)remaining;
        int rc = write_all(fd, ZEROES, chunk, offset);
        if (rc)
            return rc;
        offset += (off_t)chunk;
        remaining -= (long long)chunk;
    }
    return 0;
}

/* mkdir -p of the directory part of `path` (like os.makedirs(dirname, exist_ok=True)). */
static int
make_parents(const char *path)
{
    size_t len = strlen(path);
    char *copy = malloc(len + 1);
    char *p;
    int rc = 0;
    if (copy == NULL)
        return ENOMEM;
    memcpy(copy, path, len + 1);
    p = strrchr(copy, '/');
    if (p == NULL || p == copy) {
        free(copy);
        return 0;
    }
    *p = '\0';
    for (p = copy + 1; ; p++) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            if (mkdir(copy, 0777) != 0 && errno != EEXIST) {
                rc = errno;
                break;
            }
            *p = saved;
            if (saved == '\0')
                break;
        }
    }
    free(copy);
    return rc;
}

static int
open_new(const char *path, int makedirs)
{
    int fd;
    for (int attempt = 0; attempt < 2; attempt++) {
        do {
            fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        } while (fd < 0 && errno == EINTR);
        if (fd >= 0 || errno != ENOENT || !makedirs || attempt)
            return fd;
        int rc = make_parents(path);
        if (rc) {
            errno = rc;
            return -1;
        }
    }
    return fd;
}

static int finish(int fd, int lock, int autoflush);

static int
fill(Item *item, int fd, int mode, int lock, int fadvise_random, int autoflush)
{
    int rc;
    char whole[SMALL_BODY + 4096];
    long long remaining = item->total - item->header_len;
    if (lock && (rc = flock_retry(fd, LOCK_EX)))
        return rc;
    if (fadvise_random && (rc = posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM)))
        return rc;
    if (mode == 0 && remaining > 0 && remaining <= SMALL_BODY
        && item->total <= (long long)sizeof(whole)) {
        /* a small file in one write, header and zeroes: the same bytes as two writes,
           one system call and one pass over the first page fewer */
        memcpy(whole, item->header, (size_t)item->header_len);
        memset(whole + item->header_len, 0, (size_t)remaining);
        if ((rc = write_all(fd, whole, (size_t)item->total, 0)))
            return rc;
        return finish(fd, lock, autoflush);
    }
    int allocated = 0;
    if (remaining > 0 && (mode == 2 || (mode == 0 && remaining > SMALL_BODY))) {
        /* the whole file allocated, then the header written into it: the same bytes and
           blocks as allocating the rest after the header's write, for about a fifth
           less work in this thread (ext4 converts the written page's block from
           unwritten in writeback) */
        rc = fallocate_range(fd, 0, (off_t)item->total);
        if (rc && mode == 2)
            return rc;
        allocated = rc == 0;
    }
    if ((rc = write_all(fd, item->header, (size_t)item->header_len, 0)))
        return rc;
    if (allocated) {
        /* zeroes already */
    }
    else if (mode == 1) {
        if (remaining > 0 && (rc = write_all(fd, ZEROES, 1, (off_t)(item->total - 1))))
            return rc;
    }
    else if (remaining > 0 && (rc = write_zeroes(fd, (off_t)item->header_len, remaining)))
        return rc;
    return finish(fd, lock, autoflush);
}

/* fsync if `autoflush`, unlock if `lock`: the end of a file's fill. */
static int
finish(int fd, int lock, int autoflush)
{
    int rc;
    if (autoflush && fsync(fd) != 0)
        return errno;
    if (lock && (rc = flock_retry(fd, LOCK_UN)))
        return rc;
    return 0;
}

static void
create_one(Item *item, int mode, int lock, int fadvise_random, int autoflush, int makedirs)
{
    int fd = open_new(item->path, makedirs);
    if (fd < 0) {
        item->fd = -1;
        item->error = errno ? errno : EIO;
        return;
    }
    int rc = fill(item, fd, mode, lock, fadvise_random, autoflush);
    if (rc) {
        close(fd);
        unlink(item->path);
        item->fd = -1;
        item->error = rc;
        return;
    }
    if (!item->keep) {
        close(fd);
        fd = -1;
    }
    item->fd = fd;
    item->error = 0;
}

static void
release_items(Item *items, Py_ssize_t count)
{
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_XDECREF(items[i].path_obj);
        Py_XDECREF(items[i].header_obj);
    }
    PyMem_Free(items);
}

static PyObject *
create_files(PyObject *module, PyObject *args)
{
    PyObject *sequence, *fast, *result = NULL;
    int mode, lock, fadvise_random, autoflush, makedirs;
    Item *items;
    Py_ssize_t count, i, filled = 0;

    (void)module;
    if (!PyArg_ParseTuple(args, "Oipppp:create_files", &sequence, &mode, &lock,
                          &fadvise_random, &autoflush, &makedirs))
        return NULL;
    if (mode < 0 || mode > 2) {
        PyErr_SetString(PyExc_ValueError, "mode must be 0, 1 or 2");
        return NULL;
    }
    fast = PySequence_Fast(sequence, "items must be a sequence");
    if (fast == NULL)
        return NULL;
    count = PySequence_Fast_GET_SIZE(fast);
    items = PyMem_Calloc(count ? (size_t)count : 1, sizeof(Item));
    if (items == NULL) {
        Py_DECREF(fast);
        return PyErr_NoMemory();
    }
    for (i = 0; i < count; i++) {
        PyObject *entry = PySequence_Fast_GET_ITEM(fast, i);
        PyObject *path, *header;
        long long total;
        int keep = 1;
        if (!PyTuple_Check(entry)
            || (PyTuple_GET_SIZE(entry) != 3 && PyTuple_GET_SIZE(entry) != 5)) {
            PyErr_SetString(PyExc_TypeError,
                            "each item must be (path, header, total[, image, keep])");
            goto fail;
        }
        header = PyTuple_GET_ITEM(entry, 1);
        if (PyTuple_GET_SIZE(entry) == 5) {
            PyObject *image = PyTuple_GET_ITEM(entry, 3);
            if (image != Py_None) {
                if (!PyBytes_Check(image) || PyBytes_GET_SIZE(image) < PyBytes_GET_SIZE(header)) {
                    PyErr_SetString(PyExc_TypeError,
                                    "image must be bytes at least as long as the header");
                    goto fail;
                }
                header = image;
            }
            keep = PyObject_IsTrue(PyTuple_GET_ITEM(entry, 4));
            if (keep < 0)
                goto fail;
        }
        if (!PyBytes_Check(header)) {
            PyErr_SetString(PyExc_TypeError, "header must be bytes");
            goto fail;
        }
        total = PyLong_AsLongLong(PyTuple_GET_ITEM(entry, 2));
        if (total == -1 && PyErr_Occurred())
            goto fail;
        if (PyBytes_GET_SIZE(header) < 1 || total < PyBytes_GET_SIZE(header)) {
            PyErr_SetString(PyExc_ValueError, "total must be at least the header's length");
            goto fail;
        }
        /* str, bytes or os.PathLike, encoded as os.fsencode does; NUL bytes refused */
        if (!PyUnicode_FSConverter(PyTuple_GET_ITEM(entry, 0), &path))
            goto fail;
        if (PyBytes_GET_SIZE(path) == 0) {
            Py_DECREF(path);
            PyErr_SetString(PyExc_ValueError, "path must not be empty");
            goto fail;
        }
        Py_INCREF(header);
        items[i].path_obj = path;
        items[i].header_obj = header;
        items[i].path = PyBytes_AS_STRING(path);
        items[i].header = PyBytes_AS_STRING(header);
        items[i].header_len = PyBytes_GET_SIZE(header);
        items[i].total = total;
        items[i].keep = keep;
        filled = i + 1;
    }
    Py_DECREF(fast);
    fast = NULL;

    Py_BEGIN_ALLOW_THREADS
    for (i = 0; i < count; i++)
        create_one(&items[i], mode, lock, fadvise_random, autoflush, makedirs);
    Py_END_ALLOW_THREADS

    result = PyList_New(count);
    if (result == NULL)
        goto close_all;
    for (i = 0; i < count; i++) {
        PyObject *entry;
        if (items[i].error)
            entry = PyLong_FromLong(items[i].error);
        else if (items[i].fd < 0)
            entry = Py_NewRef(Py_None);
        else
            entry = Py_BuildValue("(i)", items[i].fd);
        if (entry == NULL) {
            Py_CLEAR(result);
            goto close_all;
        }
        PyList_SET_ITEM(result, i, entry);
    }
    release_items(items, count); /* the descriptors are the caller's now */
    return result;

close_all:
    /* no result to hand the descriptors over with: do not leak them or leave the files */
    for (i = 0; i < count; i++) {
        if (items[i].fd >= 0) {
            close(items[i].fd);
            unlink(items[i].path);
        }
    }
    release_items(items, count);
    return NULL;

fail:
    Py_XDECREF(fast);
    release_items(items, filled);
    return NULL;
}

static PyObject *
stat_files(PyObject *module, PyObject *sequence)
{
    PyObject *fast, *result = NULL;
    PyObject **owned;
    int *errors;
    Py_ssize_t count, i;

    (void)module;
    fast = PySequence_Fast(sequence, "paths must be a sequence");
    if (fast == NULL)
        return NULL;
    count = PySequence_Fast_GET_SIZE(fast);
    owned = PyMem_Calloc(count ? (size_t)count : 1, sizeof(PyObject *));
    errors = PyMem_Calloc(count ? (size_t)count : 1, sizeof(int));
    if (owned == NULL || errors == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (i = 0; i < count; i++) {
        if (!PyUnicode_FSConverter(PySequence_Fast_GET_ITEM(fast, i), &owned[i]))
            goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    for (i = 0; i < count; i++) {
        struct stat st;
        errors[i] = stat(PyBytes_AS_STRING(owned[i]), &st) == 0 ? 0 : (errno ? errno : EIO);
    }
    Py_END_ALLOW_THREADS
    result = PyList_New(count);
    if (result == NULL)
        goto done;
    for (i = 0; i < count; i++) {
        PyObject *code = PyLong_FromLong(errors[i]);
        if (code == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, i, code);
    }
done:
    if (owned != NULL) {
        for (i = 0; i < count; i++)
            Py_XDECREF(owned[i]);
    }
    PyMem_Free(owned);
    PyMem_Free(errors);
    Py_DECREF(fast);
    return result;
}

static PyMethodDef methods[] = {
    {"stat_files", stat_files, METH_O,
     "stat_files(paths) -> list\n\n"
     "stat() each path with the GIL released; per path 0 or the errno."},
    {"create_files", create_files, METH_VARARGS,
     "create_files(items, mode, lock, fadvise_random, autoflush, makedirs) -> list\n\n"
     "Create whisper files from (path, header, total[, image, keep]) items with the GIL\n"
     "released; per item (fd,), None (made and closed) or an errno."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "carbon.storage._whisper_create",
    "Batch creation of whisper files with the GIL released.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__whisper_create(void)
{
    return PyModule_Create(&module);
}
