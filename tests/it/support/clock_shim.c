/* An LD_PRELOAD shim that moves a process's wall clock by an offset read from a file, for
 * tests of Redis clock steps (Debian's libfaketime 0.9.10 hangs the jemalloc-linked
 * redis-server: it resolves the real functions with dlsym, which allocates, inside jemalloc's
 * own first clock read). This one calls the kernel directly, allocates nothing, and reads the
 * offset (microseconds, a native-endian int64 at the start of the file CLOCK_SHIM_FILE) through
 * a shared mapping, so a test changes it while the process runs by rewriting the file in place.
 * Only CLOCK_REALTIME and gettimeofday move; monotonic clocks do not. A second int64 after the
 * offset, when not zero, freezes the clocks at that many microseconds since the epoch, the
 * monotonic ones too (Valkey adds the monotonic time elapsed since it last read the wall
 * clock): the simulated Redis's comparison sets both servers' clocks to the same instants. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile int64_t *offset_us; /* [0] the offset, [1] a frozen time or 0 */
static volatile int opened;

static int64_t offset(void) {
    if (!opened) {
        opened = 1;
        const char *path = getenv("CLOCK_SHIM_FILE");
        if (path) {
            int fd = open(path, O_RDONLY);
            if (fd >= 0) {
                void *mapped = mmap(0, 2 * sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
                if (mapped != MAP_FAILED) offset_us = (volatile int64_t *)mapped;
                close(fd);
            }
        }
    }
    return offset_us ? *offset_us : 0;
}

/* The frozen time, or 0. */
static int64_t frozen_us(void) {
    offset();
    return offset_us ? offset_us[1] : 0;
}

static void set_to(struct timespec *ts, int64_t us) {
    ts->tv_sec = us / 1000000;
    ts->tv_nsec = (us % 1000000) * 1000;
}

static void shift(struct timespec *ts) {
    int64_t frozen = frozen_us();
    if (frozen) {
        set_to(ts, frozen);
        return;
    }
    int64_t ns = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec + offset() * 1000;
    ts->tv_sec = ns / 1000000000;
    ts->tv_nsec = ns % 1000000000;
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    int result = (int)syscall(SYS_clock_gettime, clock, ts);
    if (result == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE)) shift(ts);
    if (result == 0 && (clock == CLOCK_MONOTONIC || clock == CLOCK_MONOTONIC_COARSE ||
                        clock == CLOCK_MONOTONIC_RAW)) {
        int64_t frozen = frozen_us();
        if (frozen) set_to(ts, frozen);
    }
    return result;
}

int gettimeofday(struct timeval *tv, void *tz) {
    struct timespec ts;
    int result = (int)syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts);
    if (result != 0) return result;
    shift(&ts);
    if (tv) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    (void)tz;
    return 0;
}

time_t time(time_t *out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out) *out = ts.tv_sec;
    return ts.tv_sec;
}

/* Valkey measures time by the CPU's TSC when /proc/cpuinfo says it is constant (monotonic.c),
 * which no shim can stop: with CLOCK_SHIM_POSIX_MONOTONIC set, /proc/cpuinfo cannot be opened,
 * and it falls back to clock_gettime(CLOCK_MONOTONIC), which a frozen clock stops too. Other
 * files open as usual (through fdopen: no dlsym, see above). */
static FILE *open_file(const char *path, const char *mode) {
    if (getenv("CLOCK_SHIM_POSIX_MONOTONIC") && strcmp(path, "/proc/cpuinfo") == 0) {
        errno = ENOENT;
        return NULL;
    }
    int flags = 0;
    int plus = strchr(mode, '+') != NULL;
    switch (mode[0]) {
    case 'r': flags = plus ? O_RDWR : O_RDONLY; break;
    case 'w': flags = (plus ? O_RDWR : O_WRONLY) | O_CREAT | O_TRUNC; break;
    case 'a': flags = (plus ? O_RDWR : O_WRONLY) | O_CREAT | O_APPEND; break;
    default: errno = EINVAL; return NULL;
    }
    if (strchr(mode, 'e')) flags |= O_CLOEXEC;
    int fd = open(path, flags, 0666);
    if (fd < 0) return NULL;
    FILE *file = fdopen(fd, mode);
    if (!file) close(fd);
    return file;
}

FILE *fopen(const char *path, const char *mode) { return open_file(path, mode); }
FILE *fopen64(const char *path, const char *mode) { return open_file(path, mode); }
