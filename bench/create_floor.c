/* The file-system floor for creating whisper files (bench/cache_bench.py --floor).
 *
 * create_floor MODE HEADER_BYTES TOTAL_BYTES [WRITE_BYTES [THREADS [OPEN]]] < paths
 *
 * For each path read from stdin (one a line, in the order given), as a daemon that
 * knows nothing else would: open(O_RDWR|O_CREAT|O_EXCL), on ENOENT make the missing
 * parent directories and open again, write HEADER_BYTES of header at offset 0, fill the
 * rest up to TOTAL_BYTES (MODE "fallocate": the whole file posix_fallocate'd before the
 * header is written, as ours fills a large body; "fallocate-after": the header written,
 * then the rest posix_fallocate'd (ours before, about a fifth more system time for
 * 103 KB files here); "zero": written zeroes in
 * 16 KiB chunks, whisper's default fill, a body of at most 16 KiB with its header in one
 * write, as ours writes it; "sparse": one zero byte at the end), then with
 * WRITE_BYTES write that many bytes right after the header (the first points), close.
 * No Python, no GIL, no locks: the least a create of these files can cost here.
 * With THREADS > 1, that many threads create at once, each the files of its own
 * directories (a directory's files all on one thread, in the order given).
 * OPEN "dirfd": each file is opened with openat() relative to a descriptor of its
 * directory, kept open from the directory's first file on (no walk of the whole path
 * a file); "path" (the default): open() of the whole path.
 *
 * Prints one line: files=N seconds=S user=U sys=S' (wall time of the loop alone).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
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

#define MAX_THREADS 16
#define DIR_SLOTS 4096 /* directory descriptors kept (OPEN dirfd): open addressing */

typedef struct {
    char *name;
    int fd;
} DirSlot;

/* A kept descriptor of the directory `dir` (made with its parents if missing), or -1. */
static int
dir_fd(DirSlot *slots, const char *dir)
{
    unsigned long hash = 5381;
    for (const char *p = dir; *p; p++)
        hash = hash * 33 + (unsigned char)*p;
    for (unsigned long i = 0; i < DIR_SLOTS; i++) {
        DirSlot *slot = &slots[(hash + i) % DIR_SLOTS];
        if (slot->name == NULL) {
            int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
            if (fd < 0 && errno == ENOENT) {
                size_t len = strlen(dir);
                char *probe = malloc(len + 3);
                memcpy(probe, dir, len);
                memcpy(probe + len, "/x", 3);
                if (make_parents(probe) == 0)
                    fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
                free(probe);
            }
            if (fd < 0)
                return -1;
            slot->name = strdup(dir);
            slot->fd = fd;
            return fd;
        }
        if (strcmp(slot->name, dir) == 0)
            return slot->fd;
    }
    return -1;
}

typedef struct {
    char **paths;
    long *owners; /* the thread of each path (worked out before any thread starts) */
    size_t count;
    long index, threads;
    const char *mode;
    const char *head;
    long header, total, extra;
    int dirfd;
    DirSlot *dirs; /* this thread's directory descriptors (OPEN dirfd) */
    int failed;
} Job;

/* Which thread creates `path`: by a hash of its directory part. */
static long
owner(const char *path, long threads)
{
    const char *slash = strrchr(path, '/');
    size_t len = slash ? (size_t)(slash - path) : 0;
    unsigned long hash = 5381;
    for (size_t i = 0; i < len; i++)
        hash = hash * 33 + (unsigned char)path[i];
    return (long)(hash % (unsigned long)threads);
}

static int
create_file(Job *job, char *path)
{
    int fd;
    char *slash = strrchr(path, '/');
    if (job->dirfd && slash != NULL && slash != path) {
        *slash = '\0';
        int dir = dir_fd(job->dirs, path);
        *slash = '/';
        fd = dir < 0 ? -1 : openat(dir, slash + 1, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    }
    else {
        fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno == ENOENT) {
            if (make_parents(path) == 0)
                fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        }
    }
    if (fd < 0)
        return perror(path), -1;
    int small = strcmp(job->mode, "zero") == 0 && job->total - job->header <= CHUNK
                && job->total <= CHUNK + 4096;
    int allocated = strcmp(job->mode, "fallocate") == 0;
    if (allocated) {
        int rc = posix_fallocate(fd, 0, job->total);
        if (rc)
            return fprintf(stderr, "fallocate: %s\n", strerror(rc)), -1;
    }
    if (small) {
        /* header and zeroes in one write, as ours writes a small file */
        char whole[CHUNK + 4096];
        memcpy(whole, job->head, (size_t)job->header);
        memset(whole + job->header, 0, (size_t)(job->total - job->header));
        if (write_at(fd, whole, (size_t)job->total, 0) != 0)
            return perror("write"), -1;
    }
    else if (write_at(fd, job->head, (size_t)job->header, 0) != 0)
        return perror("write"), -1;
    if (small || allocated) {
        /* filled above */
    }
    else if (strcmp(job->mode, "fallocate-after") == 0) {
        int rc = posix_fallocate(fd, job->header, job->total - job->header);
        if (rc)
            return fprintf(stderr, "fallocate: %s\n", strerror(rc)), -1;
    }
    else if (strcmp(job->mode, "sparse") == 0) {
        if (write_at(fd, zeroes, 1, job->total - 1) != 0)
            return perror("write"), -1;
    }
    else {
        for (off_t at = job->header; at < job->total; at += CHUNK) {
            size_t len = job->total - at < CHUNK ? (size_t)(job->total - at) : CHUNK;
            if (write_at(fd, zeroes, len, at) != 0)
                return perror("write"), -1;
        }
    }
    if (job->extra && write_at(fd, ones, (size_t)job->extra, job->header) != 0)
        return perror("write"), -1;
    close(fd);
    return 0;
}

static void *
run_job(void *arg)
{
    Job *job = arg;
    for (size_t i = 0; i < job->count; i++) {
        if (job->owners[i] != job->index)
            continue;
        if (create_file(job, job->paths[i]) != 0) {
            job->failed = 1;
            break;
        }
    }
    return NULL;
}

static double
seconds(struct timeval tv)
{
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

int
main(int argc, char **argv)
{
    if (argc < 4 || argc > 7) {
        fprintf(stderr, "usage: %s fallocate|fallocate-after|zero|sparse HEADER_BYTES "
                "TOTAL_BYTES [WRITE_BYTES [THREADS [path|dirfd]]] < paths\n", argv[0]);
        return 2;
    }
    const char *mode = argv[1];
    long header = atol(argv[2]), total = atol(argv[3]);
    long extra = argc >= 5 ? atol(argv[4]) : 0;
    long threads = argc >= 6 ? atol(argv[5]) : 1;
    int dirfd = argc == 7 && strcmp(argv[6], "dirfd") == 0;
    if (threads < 1 || threads > MAX_THREADS) {
        fprintf(stderr, "THREADS must be 1 to %d\n", MAX_THREADS);
        return 2;
    }
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
    long *owners = malloc((count ? count : 1) * sizeof(long));
    for (size_t i = 0; i < count; i++)
        owners[i] = threads > 1 ? owner(paths[i], threads) : 0;
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    pthread_t tids[MAX_THREADS];
    Job jobs[MAX_THREADS];
    for (long t = 0; t < threads; t++) {
        jobs[t] = (Job){paths, owners, count, t, threads, mode, head, header, total, extra,
                        dirfd, dirfd ? calloc(DIR_SLOTS, sizeof(DirSlot)) : NULL, 0};
        if (threads == 1)
            run_job(&jobs[t]);
        else
            pthread_create(&tids[t], NULL, run_job, &jobs[t]);
    }
    int failed = 0;
    for (long t = 0; t < threads; t++) {
        if (threads > 1)
            pthread_join(tids[t], NULL);
        failed |= jobs[t].failed;
    }
    if (failed)
        return 1;
    clock_gettime(CLOCK_MONOTONIC, &end);
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    printf("files=%zu seconds=%.6f user=%.3f sys=%.3f\n", count,
           (double)(end.tv_sec - start.tv_sec) + (double)(end.tv_nsec - start.tv_nsec) / 1e9,
           seconds(usage.ru_utime), seconds(usage.ru_stime));
    return 0;
}
