/* The file-system floor for creating whisper files (bench/cache_bench.py --floor).
 *
 * create_floor MODE HEADER_BYTES TOTAL_BYTES [WRITE_BYTES] < paths
 *
 * For each path read from stdin (one a line, in the order given), as a daemon that
 * knows nothing else would: open(O_RDWR|O_CREAT|O_EXCL), on ENOENT make the missing
 * parent directories and open again, write HEADER_BYTES of header at offset 0, fill the
 * rest up to TOTAL_BYTES (MODE "fallocate": posix_fallocate; "zero": written zeroes in
 * 16 KiB chunks, whisper's default fill; "sparse": one zero byte at the end), then with
 * WRITE_BYTES write that many bytes right after the header (the first points), close.
 * No Python, no GIL, no locks: the least a create of these files can cost here.
 *
 * Prints one line: files=N seconds=S user=U sys=S' (wall time of the loop alone).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CHUNK 16384

static char zeroes[CHUNK];
static char ones[CHUNK];

static int
make_parents(char *path)
{
    char *slash = strrchr(path, '/');
    if (slash == NULL || slash == path)
        return 0;
    *slash = '\0';
    for (char *p = path + 1; ; p++) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            if (mkdir(path, 0777) != 0 && errno != EEXIST)
                return -1;
            *p = saved;
            if (saved == '\0')
                break;
        }
    }
    *slash = '/';
    return 0;
}

static int
write_at(int fd, const char *data, size_t len, off_t offset)
{
    while (len > 0) {
        ssize_t done = pwrite(fd, data, len, offset);
        if (done < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        data += done;
        len -= (size_t)done;
        offset += done;
    }
    return 0;
}

static double
seconds(struct timeval tv)
{
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

int
main(int argc, char **argv)
{
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: %s fallocate|zero|sparse HEADER_BYTES TOTAL_BYTES "
                "[WRITE_BYTES] < paths\n", argv[0]);
        return 2;
    }
    const char *mode = argv[1];
    long header = atol(argv[2]), total = atol(argv[3]);
    long extra = argc == 5 ? atol(argv[4]) : 0;
    if (header < 1 || total < header || extra < 0 || extra > CHUNK || header + extra > total) {
        fprintf(stderr, "bad sizes\n");
        return 2;
    }
    char *head = calloc(1, (size_t)header);
    memset(ones, 1, sizeof ones);
    /* read every path first: the timed loop does file-system work only */
    size_t cap = 1 << 16, count = 0;
    char **paths = malloc(cap * sizeof(char *));
    char line[4096];
    while (fgets(line, sizeof line, stdin)) {
        size_t len = strcspn(line, "\n");
        line[len] = '\0';
        if (count == cap)
            paths = realloc(paths, (cap *= 2) * sizeof(char *));
        paths[count++] = strdup(line);
    }
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (size_t i = 0; i < count; i++) {
        int fd = open(paths[i], O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno == ENOENT) {
            if (make_parents(paths[i]) == 0)
                fd = open(paths[i], O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        }
        if (fd < 0) {
            perror(paths[i]);
            return 1;
        }
        if (write_at(fd, head, (size_t)header, 0) != 0)
            return perror("write"), 1;
        if (strcmp(mode, "fallocate") == 0) {
            int rc = posix_fallocate(fd, header, total - header);
            if (rc)
                return fprintf(stderr, "fallocate: %s\n", strerror(rc)), 1;
        }
        else if (strcmp(mode, "sparse") == 0) {
            if (write_at(fd, zeroes, 1, total - 1) != 0)
                return perror("write"), 1;
        }
        else {
            for (off_t at = header; at < total; at += CHUNK) {
                size_t len = total - at < CHUNK ? (size_t)(total - at) : CHUNK;
                if (write_at(fd, zeroes, len, at) != 0)
                    return perror("write"), 1;
            }
        }
        if (extra && write_at(fd, ones, (size_t)extra, header) != 0)
            return perror("write"), 1;
        close(fd);
    }
    clock_gettime(CLOCK_MONOTONIC, &end);
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    printf("files=%zu seconds=%.6f user=%.3f sys=%.3f\n", count,
           (double)(end.tv_sec - start.tv_sec) + (double)(end.tv_nsec - start.tv_nsec) / 1e9,
           seconds(usage.ru_utime), seconds(usage.ru_stime));
    return 0;
}
