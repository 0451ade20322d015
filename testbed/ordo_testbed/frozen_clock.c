/* A process's clocks behind the kernel's by what the control file says (ordo_testbed.frozen_clock).
 *
 * Preloaded (LD_PRELOAD) into a process started with ORDO_FROZEN_CLOCK=<control file>. The file's
 * first 8 bytes, mapped shared, are the nanoseconds the process's clocks are behind the kernel's.
 * The test changes them only while the process is stopped (SIGSTOP), so every thread reads the new
 * value as soon as it runs again: no cache, no parsing, nothing a thread can see half-written.
 *
 * Every clock a process reads the time from is moved back: clock_gettime (the wall, monotonic and
 * boot clocks; not the CPU clocks), gettimeofday, time, timespec_get. Every wait given an absolute
 * deadline on one of them is moved forward by the same amount, so it ends when the process's clock
 * reaches the deadline: the pthread, C11 and semaphore waits and locks with a timeout,
 * clock_nanosleep(TIMER_ABSTIME), the timed joins. Relative timeouts (poll, epoll, nanosleep)
 * need nothing: the pause was not inside them.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>

#define NANOS 1000000000LL

static const volatile int64_t *behind; /* the control file's first 8 bytes; NULL: not frozen */

__attribute__((constructor)) static void map_control_file(void)
{
    const char *path = getenv("ORDO_FROZEN_CLOCK");
    if (path == NULL || path[0] == 0)
        return;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    void *page = fd < 0 ? MAP_FAILED : mmap(NULL, sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
    if (fd >= 0)
        close(fd);
    if (page == MAP_FAILED) { /* a clock that is silently not frozen would make the test lie */
        fprintf(stderr, "frozen clock: cannot map ORDO_FROZEN_CLOCK=%s\n", path);
        abort();
    }
    behind = page;
}

static int64_t behind_now(void)
{
    return behind == NULL ? 0 : __atomic_load_n(behind, __ATOMIC_ACQUIRE);
}

static int is_faked(clockid_t clock)
{
    switch (clock) {
    case CLOCK_REALTIME: case CLOCK_MONOTONIC: case CLOCK_MONOTONIC_RAW: case CLOCK_REALTIME_COARSE:
    case CLOCK_MONOTONIC_COARSE: case CLOCK_BOOTTIME: case CLOCK_REALTIME_ALARM:
    case CLOCK_BOOTTIME_ALARM: case CLOCK_TAI:
        return 1;
    default: /* the CPU clocks, and other threads' and processes' */
        return 0;
    }
}

static void shift(struct timespec *ts, int64_t nanos)
{
    if (ts->tv_sec > INT32_MAX * 4LL) /* "for ever" deadlines stay for ever */
        return;
    int64_t at = (int64_t)ts->tv_sec * NANOS + ts->tv_nsec + nanos;
    int64_t seconds = at / NANOS, rest = at % NANOS;
    if (rest < 0) {
        rest += NANOS;
        seconds -= 1;
    }
    ts->tv_sec = seconds < 0 ? 0 : seconds;
    ts->tv_nsec = seconds < 0 ? 0 : rest;
}

/* The next definition of a function (libc's), looked up once; a versioned one where glibc keeps an
 * old version beside the current one and dlsym may return the old. */
#define NEXT(name) \
    static __typeof__(name) *next; \
    if (next == NULL) \
        next = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)
#define NEXT_VERSION(name, version) \
    static __typeof__(name) *next; \
    if (next == NULL) \
        next = (__typeof__(name) *)dlvsym(RTLD_NEXT, #name, version)

/* Reads a kernel clock and moves it back; read again if the offset changed meanwhile (the thread
 * was stopped between the two reads), so no value mixes the old offset and the new. */
#define READ_BEHIND(read, moved) \
    for (;;) { \
        int64_t before = behind_now(); \
        int result = (read); \
        int64_t after = behind_now(); \
        if (result != 0 || before == after) { \
            if (result == 0) \
                moved; \
            return result; \
        } \
    }

int clock_gettime(clockid_t clock, struct timespec *ts)
{
    NEXT(clock_gettime);
    if (!is_faked(clock))
        return next(clock, ts);
    READ_BEHIND(next(clock, ts), shift(ts, -after));
}

static void shift_micros(struct timeval *tv, int64_t nanos)
{
    struct timespec ts = {tv->tv_sec, tv->tv_usec * 1000};
    shift(&ts, nanos);
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
    NEXT(gettimeofday);
    READ_BEHIND(next(tv, tz), shift_micros(tv, -after));
}

time_t time(time_t *out)
{
    struct timespec now;
    if (clock_gettime(CLOCK_REALTIME, &now) != 0)
        return (time_t)-1;
    if (out != NULL)
        *out = now.tv_sec;
    return now.tv_sec;
}

int timespec_get(struct timespec *ts, int base)
{
    if (base != TIME_UTC) {
        NEXT(timespec_get);
        return next(ts, base);
    }
    return clock_gettime(CLOCK_REALTIME, ts) == 0 ? base : 0;
}

/* Waits until the process's clock reaches `at`: the deadline moved to the kernel's clock, and moved
 * again if the offset changed while the thread waited (it was stopped and its clocks moved back), so
 * a wait ends when the process's own clock says, as a paused machine's would. */
#define WAIT_UNTIL(call, timed_out) \
    for (;;) { \
        int64_t was = behind_now(); \
        struct timespec deadline = *at; \
        shift(&deadline, was); \
        int result = (call); \
        if (!(timed_out) || behind_now() == was) \
            return result; \
    }
#define PTHREAD_TIMEOUT (result == ETIMEDOUT)

int pthread_cond_timedwait(pthread_cond_t *restrict cond, pthread_mutex_t *restrict mutex,
                           const struct timespec *restrict at)
{
    NEXT_VERSION(pthread_cond_timedwait, "GLIBC_2.3.2");
    WAIT_UNTIL(next(cond, mutex, &deadline), PTHREAD_TIMEOUT);
}

int pthread_cond_clockwait(pthread_cond_t *restrict cond, pthread_mutex_t *restrict mutex,
                           clockid_t clock, const struct timespec *restrict at)
{
    NEXT(pthread_cond_clockwait);
    WAIT_UNTIL(next(cond, mutex, clock, &deadline), PTHREAD_TIMEOUT);
}

/* The timed locks: one shape, a lock and a deadline (and, for the clock* ones, the deadline's clock). */
#define TIMED_LOCK(name, type) \
    int name(type *restrict lock, const struct timespec *restrict at) \
    { \
        NEXT(name); \
        WAIT_UNTIL(next(lock, &deadline), PTHREAD_TIMEOUT); \
    }
#define CLOCK_LOCK(name, type) \
    int name(type *restrict lock, clockid_t clock, const struct timespec *restrict at) \
    { \
        NEXT(name); \
        WAIT_UNTIL(next(lock, clock, &deadline), PTHREAD_TIMEOUT); \
    }

TIMED_LOCK(pthread_mutex_timedlock, pthread_mutex_t)
CLOCK_LOCK(pthread_mutex_clocklock, pthread_mutex_t)
TIMED_LOCK(pthread_rwlock_timedrdlock, pthread_rwlock_t)
TIMED_LOCK(pthread_rwlock_timedwrlock, pthread_rwlock_t)
CLOCK_LOCK(pthread_rwlock_clockrdlock, pthread_rwlock_t)
CLOCK_LOCK(pthread_rwlock_clockwrlock, pthread_rwlock_t)

int pthread_timedjoin_np(pthread_t thread, void **value, const struct timespec *at)
{
    NEXT(pthread_timedjoin_np);
    if (at == NULL)
        return next(thread, value, at);
    WAIT_UNTIL(next(thread, value, &deadline), PTHREAD_TIMEOUT);
}

int pthread_clockjoin_np(pthread_t thread, void **value, clockid_t clock, const struct timespec *at)
{
    NEXT(pthread_clockjoin_np);
    if (at == NULL)
        return next(thread, value, clock, at);
    WAIT_UNTIL(next(thread, value, clock, &deadline), PTHREAD_TIMEOUT);
}

int sem_timedwait(sem_t *restrict sem, const struct timespec *restrict at)
{
    NEXT(sem_timedwait);
    WAIT_UNTIL(next(sem, &deadline), result == -1 && errno == ETIMEDOUT);
}

int sem_clockwait(sem_t *restrict sem, clockid_t clock, const struct timespec *restrict at)
{
    NEXT(sem_clockwait);
    WAIT_UNTIL(next(sem, clock, &deadline), result == -1 && errno == ETIMEDOUT);
}

int cnd_timedwait(cnd_t *restrict cond, mtx_t *restrict mutex, const struct timespec *restrict at)
{
    NEXT(cnd_timedwait);
    WAIT_UNTIL(next(cond, mutex, &deadline), result == thrd_timedout);
}

int mtx_timedlock(mtx_t *restrict mutex, const struct timespec *restrict at)
{
    NEXT(mtx_timedlock);
    WAIT_UNTIL(next(mutex, &deadline), result == thrd_timedout);
}

int clock_nanosleep(clockid_t clock, int flags, const struct timespec *at, struct timespec *left)
{
    NEXT(clock_nanosleep);
    if (!(flags & TIMER_ABSTIME) || !is_faked(clock))
        return next(clock, flags, at, left);
    WAIT_UNTIL(next(clock, flags, &deadline, left), result == 0);
}
