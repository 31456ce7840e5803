/*
 * lith's own threads start with the program's signals blocked (thread.h).
 */
#include "thread.h"

#include <signal.h>

int lith__thread_start(pthread_t *t, void *(*fn)(void *), void *arg) {
  static const int told[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGCHLD, SIGWINCH};
  sigset_t block, was;
  sigemptyset(&block);
  for (unsigned i = 0; i < sizeof told / sizeof told[0]; i++)
    sigaddset(&block, told[i]);
  int rc = pthread_sigmask(SIG_BLOCK, &block, &was);
  if (rc != 0)
    return rc;
  rc = pthread_create(t, NULL, fn, arg);
  pthread_sigmask(SIG_SETMASK, &was, NULL);
  return rc;
}
