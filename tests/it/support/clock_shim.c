/* An LD_PRELOAD shim that moves a process's wall clock by an offset read from a file, for
 * tests of Redis clock steps (Debian's libfaketime 0.9.10 hangs the jemalloc-linked
 * redis-server: it resolves the real functions with dlsym, which allocates, inside jemalloc's
 * own first clock read). This one calls the kernel directly, allocates nothing, and reads the
 * offset (microseconds, a native-endian int64 at the start of the file CLOCK_SHIM_FILE) through
 * a shared mapping, so a test changes it while the process runs by rewriting the file in place.
 * Only CLOCK_REALTIME and gettimeofday move; monotonic clocks do not. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile int64_t *offset_us;
static volatile int opened;

static int64_t offset(void) {
    if (!opened) {
        opened = 1;
        const char *path = getenv("CLOCK_SHIM_FILE");
        if (path) {
            int fd = open(path, O_RDONLY);
            if (fd >= 0) {
                void *mapped = mmap(0, sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
                if (mapped != MAP_FAILED) offset_us = (volatile int64_t *)mapped;
                close(fd);
            }
        }
    }
    return offset_us ? *offset_us : 0;
}

static void shift(struct timespec *ts) {
    int64_t ns = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec + offset() * 1000;
    ts->tv_sec = ns / 1000000000;
    ts->tv_nsec = ns % 1000000000;
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    int result = (int)syscall(SYS_clock_gettime, clock, ts);
    if (result == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE)) shift(ts);
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
