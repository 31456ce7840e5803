/*
 * lith's own threads (the writer, the waker, the checkpointer): started
 * with the signals a program is told things by blocked, so that the
 * program's handlers run on its own threads, never on lith's.
 *
 * Why: the kernel gives a process-directed signal (kill, SIGTERM from
 * systemd) to any thread that does not block it. A handler that runs on
 * lith's writer is at best a surprise to the program (redis's background
 * threads block SIGALRM for the same reason); and under ThreadSanitizer,
 * which defers a handler until its thread next enters libc, a signal
 * taken by a thread asleep in a raw futex wait (the writer's, the
 * waker's) would wait as long as that sleep. Faults (SIGSEGV, SIGBUS,
 * SIGFPE, SIGILL, SIGABRT) and SIGPIPE stay as they are: they belong to
 * the thread that caused them.
 */
#ifndef LITH_LIB_THREAD_H
#define LITH_LIB_THREAD_H

#include <pthread.h>

/* pthread_create(t, NULL, fn, arg) for a thread that blocks SIGTERM,
 * SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGCHLD and SIGWINCH
 * from its first instruction (the mask is set around the creation, which
 * the thread inherits; the caller's own mask is as it was after). Returns
 * pthread_create's result (0, or an errno value). */
int lith__thread_start(pthread_t *t, void *(*fn)(void *), void *arg);

#endif
