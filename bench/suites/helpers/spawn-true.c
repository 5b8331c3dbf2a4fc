/*
 * The per-call suite's floor: posix_spawn + waitpid of a program from a small C process. It reads a
 * count per line on stdin, spawns the program (argv[1], default /bin/true) that many times, one
 * after another, and answers one line: each spawn-to-reaped time in ms, space-separated. Built by
 * bench/suites/helpers/cc.mjs with the system compiler.
 */
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>

extern char **environ;

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
  char *file = argc > 1 ? argv[1] : "/bin/true";
  char *args[] = {file, NULL};
  char line[64];
  while (fgets(line, sizeof line, stdin)) {
    long n = strtol(line, NULL, 10);
    for (long i = 0; i < n; i++) {
      double t0 = now_ms();
      pid_t pid;
      int rc = posix_spawn(&pid, file, NULL, NULL, args, environ);
      if (rc != 0) {
        printf("error posix_spawn %s: %d\n", file, rc);
        fflush(stdout);
        return 1;
      }
      int status;
      while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
          printf("error waitpid: %d\n", errno);
          fflush(stdout);
          return 1;
        }
      }
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        printf("error %s exited with status %d\n", file, status);
        fflush(stdout);
        return 1;
      }
      printf(i ? " %.4f" : "%.4f", now_ms() - t0);
    }
    printf("\n");
    fflush(stdout);
  }
  return 0;
}
