/*
 * The sandbox suite's measure of one guarded open: opens and closes argv[2] (read-only) argv[1]
 * times and prints the mean time of one open + close in microseconds. Run inside the sandbox, each
 * open is a round trip through the path guard (seccomp user notification); outside, the kernel's
 * own. A dynamically linked program's start makes two such opens (ld.so.cache and libc). Built by
 * bench/suites/helpers/cc.mjs with the system compiler.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: open-loop COUNT PATH\n");
    return 2;
  }
  long count = strtol(argv[1], NULL, 10);
  struct timespec start, end;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (long i = 0; i < count; i++) {
    int fd = open(argv[2], O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      perror(argv[2]);
      return 1;
    }
    close(fd);
  }
  clock_gettime(CLOCK_MONOTONIC, &end);
  double us = ((end.tv_sec - start.tv_sec) * 1e9 + (end.tv_nsec - start.tv_nsec)) / 1e3 / (double)count;
  printf("%.3f\n", us);
  return 0;
}
