/* Positional I/O and flock that retry on EINTR, shared by the whisper C accelerators
 * (_whisper_create.c, _whisper_writer.c). Each returns 0, or the errno of the failing
 * call (EIO for a write that made no progress or a read that hit the end of the file). */
#ifndef CARBON_STORAGE_FILEIO_H
#define CARBON_STORAGE_FILEIO_H

#include <errno.h>
#include <sys/file.h>
#include <sys/types.h>
#include <unistd.h>

/* All `len` bytes from or to `data` at `offset`: pwrite when `writing`, else pread. */
static int
transfer_all(int fd, void *data, size_t len, off_t offset, int writing)
{
    char *p = data;
    while (len > 0) {
        ssize_t n = writing ? pwrite(fd, p, len, offset) : pread(fd, p, len, offset);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        if (n == 0)
            return EIO;
        p += n;
        len -= (size_t)n;
        offset += n;
    }
    return 0;
}

static inline int
write_all(int fd, const void *data, size_t len, off_t offset)
{
    return transfer_all(fd, (void *)data, len, offset, 1);
}

/* Exactly `len` bytes at `offset` (a short file is EIO). */
static inline int
read_exact(int fd, void *data, size_t len, off_t offset)
{
    return transfer_all(fd, data, len, offset, 0);
}

static int
flock_retry(int fd, int operation)
{
    while (flock(fd, operation) != 0) {
        if (errno != EINTR)
            return errno;
    }
    return 0;
}

#endif
