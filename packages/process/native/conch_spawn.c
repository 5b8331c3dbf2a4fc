/*
 * conch_spawn: posix_spawn for the process supervisor (see src/native-spawn.ts for why).
 *
 * node's child_process.spawn forks (libuv calls fork(), a clone without CLONE_VM): the kernel
 * copies the page tables of the whole node process, about half of a cheap command's cost. glibc's
 * posix_spawn clones with CLONE_VM | CLONE_VFORK instead: the child borrows the parent's memory
 * until it execs, so a spawn costs the same from any process size. Where the kernel has
 * close_range (Linux 5.9+), the addon does that itself with vfork (vfork_spawn below), without the
 * stack posix_spawn maps and unmaps per call; older kernels take posix_spawn.
 *
 * What a child gets is what node's `spawn(file, args, { cwd, env, detached: true, stdio })` gives:
 * its own session (setsid), every signal at its default action and none blocked, the working
 * directory and environment asked for, `file` looked up on the PATH of that environment (not the
 * supervisor's, as libuv does), a file without a #! line run by /bin/sh (as execvp does), stdio as
 * /dev/null or one end of a unix socketpair (libuv's pipes are socketpairs too), and no other fd.
 * One difference, on kernels before 5.9 only: glibc's posix_spawn leaves its two internal signals
 * (32 and 33, below SIGRTMIN) ignored in the child; libuv's fork resets only 1..31, and no program
 * meant to be run by an agent uses them. The vfork path resets all 64.
 *
 * sendFds / recvFds carry a child's pipes from the supervisor to the host over a unix socket
 * (SCM_RIGHTS), one message per child, instead of node's handle passing (one message and one
 * acknowledgement round trip per pipe).
 *
 * Exit: the caller listens for SIGCHLD (libuv delivers it on the JavaScript thread) and asks
 * tryWait(pid) for each child it still has: waitpid(pid, WNOHANG). No thread per child, and a child's
 * exit wakes only the thread that reports it. libuv reaps only the pids it spawned (waitpid(pid),
 * never -1), so the two never take each other's children.
 *
 * Built against Node-API headers only, so one build loads in every node release (Node-API 8: node
 * 12.22+): shipped prebuilt for Linux x64 and arm64, glibc and musl (scripts/prebuild-native.mjs at
 * the repository's root), and built from source by scripts/build-native.mjs where a compiler is.
 * glibc 2.34+ (posix_spawn_file_actions_addchdir_np / addclosefrom_np) or musl 1.1.24+ (addchdir_np;
 * musl has no addclosefrom_np: see mark_cloexec_from below); elsewhere the supervisor uses node's
 * spawn.
 */
#define _GNU_SOURCE
#define NAPI_VERSION 8
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>
#include <node_api.h>

#include <sys/syscall.h>

#if !defined(__linux__)
#error "conch_spawn is built for Linux only"
#endif
#if defined(__GLIBC__)
#if !__GLIBC_PREREQ(2, 34)
#error "conch_spawn needs glibc 2.34 or later (or musl)"
#endif
#if !defined(CONCH_NO_CLOSEFROM)
#define CONCH_CLOSEFROM_ACTION 1
#endif
#endif

#if !defined(CONCH_CLOSEFROM_ACTION)
/*
 * musl's posix_spawn has no addclosefrom_np, and a spawn action cannot run code of ours in the
 * child. Instead every fd from `low` up is marked close-on-exec in this (the supervisor's) process
 * just before the spawn: one close_range(CLOSE_RANGE_CLOEXEC) call on Linux 5.11+, else a walk of
 * /proc/self/fd. Harmless here: the supervisor never hands an fd to a child but through the
 * spawn's dup2 actions (which clear the flag on 0..2), and node's own fds are close-on-exec anyway
 * (libuv opens every fd with O_CLOEXEC); what this catches is an fd inherited without the flag.
 */
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#include <dirent.h>
static void mark_cloexec_from(int low) {
  if (syscall(SYS_close_range, (unsigned)low, ~0U, CLOSE_RANGE_CLOEXEC) == 0) return;
  DIR *dir = opendir("/proc/self/fd");
  if (dir == NULL) return;
  int own = dirfd(dir);
  for (struct dirent *e; (e = readdir(dir)) != NULL;) {
    char *end;
    long fd = strtol(e->d_name, &end, 10);
    if (*end != '\0' || end == e->d_name || fd < low || fd == own) continue;
    int flags = fcntl((int)fd, F_GETFD);
    if (flags >= 0 && !(flags & FD_CLOEXEC)) fcntl((int)fd, F_SETFD, flags | FD_CLOEXEC);
  }
  closedir(dir);
}
#endif

/* tryWait(pid) -> null while it runs, else [code, null] or [null, signalNumber] (reaped now). */
static napi_value try_wait(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value arg, result;
  napi_get_cb_info(env, info, &argc, &arg, NULL, NULL);
  int32_t pid = 0;
  if (argc < 1 || napi_get_value_int32(env, arg, &pid) != napi_ok || pid <= 0) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "conch_spawn: expected tryWait(pid: number)");
    return NULL;
  }
  int status = 0;
  pid_t got;
  do {
    got = waitpid(pid, &status, WNOHANG);
  } while (got < 0 && errno == EINTR);
  if (got == 0) {
    napi_get_null(env, &result);
    return result;
  }
  napi_create_array_with_length(env, 2, &result);
  napi_value code, signal;
  napi_get_null(env, &code);
  napi_get_null(env, &signal);
  if (got > 0 && WIFEXITED(status)) napi_create_int32(env, WEXITSTATUS(status), &code);
  else if (got > 0 && WIFSIGNALED(status)) napi_create_int32(env, WTERMSIG(status), &signal);
  /* got < 0 (ECHILD: not a child of this process, or reaped already): gone, how is unknown. */
  napi_set_element(env, result, 0, code);
  napi_set_element(env, result, 1, signal);
  return result;
}

static napi_value throw_error(napi_env env, const char *code_name, const char *message) {
  napi_value code, msg, error;
  napi_create_string_utf8(env, code_name, NAPI_AUTO_LENGTH, &code);
  napi_create_string_utf8(env, message, NAPI_AUTO_LENGTH, &msg);
  napi_create_error(env, code, msg, &error);
  napi_set_named_property(env, error, "code", code);
  napi_throw(env, error);
  return NULL;
}

#if defined(__GLIBC__)
#define errno_name strerrorname_np
#else
/* musl has no strerrorname_np: the names a spawn, a socketpair or an open can fail with. */
static const char *errno_name(int err) {
  switch (err) {
#define NAME(e) \
  case e:       \
    return #e;
    NAME(ENOENT) NAME(EACCES) NAME(EPERM) NAME(ENOEXEC) NAME(ENOTDIR) NAME(EISDIR) NAME(ELOOP)
    NAME(ENAMETOOLONG) NAME(E2BIG) NAME(ENOMEM) NAME(EAGAIN) NAME(EMFILE) NAME(ENFILE) NAME(ETXTBSY)
    NAME(EINVAL) NAME(EIO) NAME(EFAULT) NAME(ELIBBAD)
#undef NAME
    default:
      return NULL;
  }
}
#endif

/* node's wording for a failed spawn: `spawn <file> ENOENT`, with `code` and `errno` set. */
static napi_value throw_errno(napi_env env, int err, const char *file) {
  const char *name = errno_name(err);
  if (name == NULL) name = "ESPAWN";
  size_t size = strlen(file) + strlen(name) + 16;
  char *message = malloc(size);
  if (message == NULL) return throw_error(env, name, "spawn failed");
  snprintf(message, size, "spawn %s %s", file, name);
  napi_value code, msg, error, errno_value, syscall;
  napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &code);
  napi_create_string_utf8(env, message, NAPI_AUTO_LENGTH, &msg);
  free(message);
  napi_create_error(env, code, msg, &error);
  napi_set_named_property(env, error, "code", code);
  napi_create_int32(env, -err, &errno_value);
  napi_set_named_property(env, error, "errno", errno_value);
  napi_create_string_utf8(env, "spawn", NAPI_AUTO_LENGTH, &syscall);
  napi_set_named_property(env, error, "syscall", syscall);
  napi_throw(env, error);
  return NULL;
}

static char *utf8(napi_env env, napi_value value) {
  size_t length = 0;
  if (napi_get_value_string_utf8(env, value, NULL, 0, &length) != napi_ok) return NULL;
  char *text = malloc(length + 1);
  if (text != NULL) napi_get_value_string_utf8(env, value, text, length + 1, &length);
  return text;
}

/* A NULL-terminated copy of an array of strings; NULL when an element is not a string. */
static char **utf8_array(napi_env env, napi_value array) {
  uint32_t count = 0;
  if (napi_get_array_length(env, array, &count) != napi_ok) return NULL;
  char **out = calloc(count + 1, sizeof(char *));
  if (out == NULL) return NULL;
  for (uint32_t i = 0; i < count; i++) {
    napi_value element;
    napi_get_element(env, array, i, &element);
    out[i] = utf8(env, element);
    if (out[i] == NULL) {
      for (uint32_t j = 0; j < i; j++) free(out[j]);
      free(out);
      return NULL;
    }
  }
  return out;
}

static void free_array(char **array) {
  if (array == NULL) return;
  for (char **p = array; *p != NULL; p++) free(*p);
  free(array);
}

/*
 * How a child is started: what its fds 0..2 become and where it runs, for the vfork path below; and
 * the same as posix_spawn's actions and attributes, set only for kernels without close_range.
 */
struct spawn_plan {
  int fds[3];
  const char *cwd;
  const posix_spawn_file_actions_t *actions;
  const posix_spawnattr_t *attr;
};

#ifndef SYS_close_range
#define SYS_close_range 436
#endif

/*
 * Whether this kernel has close_range (Linux 5.9+), which the vfork path's child needs to close
 * every other fd with one call: asked once, on an empty range.
 */
static bool have_close_range(void) {
#if defined(CONCH_NO_VFORK)
  /* Built to take the posix_spawn path everywhere (its test: src/prebuilds.test.ts). */
  return false;
#else
  static int known = -1;
  if (known < 0) known = syscall(SYS_close_range, ~0U - 1, ~0U - 1, 0) == 0;
  return known == 1;
#endif
}

/*
 * The child between vfork and exec. It shares the parent's memory and runs on its stack while the
 * parent waits, so it only makes raw system calls (no libc state: no malloc, no locks, no errno
 * but the shared thread's, which the parent does not read), and reports a failure in `*failed`
 * (the parent reads it once vfork returns). Every signal was blocked before the vfork; each is
 * reset to its default action before any is unblocked, so no handler of the parent's ever runs here
 * (it would run on the parent's memory), and the program starts with none ignored or blocked.
 */
static void __attribute__((noreturn)) vfork_child(const struct spawn_plan *plan, const char *path, char **argv,
                                                  char **shell_argv, char **envp, volatile int *failed) {
  long r = syscall(SYS_setsid);
  /* A zeroed kernel sigaction is SIG_DFL, no flags, no mask, whatever the libc's struct layout. */
  unsigned long dfl[4] = {0, 0, 0, 0};
  for (int sig = 1; r >= 0 && sig <= 64; sig++) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    syscall(SYS_rt_sigaction, sig, dfl, NULL, 8);
  }
  for (int fd = 0; r >= 0 && fd < 3; fd++) {
    /* dup3 onto its own number fails: clear close-on-exec there instead (as posix_spawn's dup2). */
    if (plan->fds[fd] == fd) r = syscall(SYS_fcntl, fd, F_SETFD, 0);
    else r = syscall(SYS_dup3, plan->fds[fd], fd, 0);
  }
  if (r >= 0) r = syscall(SYS_chdir, plan->cwd);
  if (r >= 0) r = syscall(SYS_close_range, 3U, ~0U, 0U);
  unsigned long none = 0;
  if (r >= 0) r = syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, 8);
  if (r >= 0) {
    syscall(SYS_execve, path, argv, envp);
    /* No #! line: /bin/sh <file> <args>, as execvp does. */
    if (errno == ENOEXEC && shell_argv != NULL) syscall(SYS_execve, "/bin/sh", shell_argv, envp);
  }
  *failed = errno ? errno : ECHILD;
  syscall(SYS_exit_group, 127);
  __builtin_unreachable();
}

/*
 * vfork + exec: what posix_spawn does (the child borrows this process's memory until it execs),
 * without what glibc's posix_spawn adds per call: a stack mapped for the child and unmapped after
 * (the unmap flushes the TLB of every CPU running one of node's threads) and a query per signal.
 * Measured beside it in a 6-thread C process: 20-30 µs less per spawn of /bin/true (~500 µs).
 */
static int vfork_spawn(pid_t *pid_out, const char *path, const struct spawn_plan *plan, char **argv,
                       char **shell_argv, char **envp) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  volatile int failed = 0;
  pid_t pid = vfork();
  if (pid == 0) vfork_child(plan, path, argv, shell_argv, envp, &failed);
  int err = pid < 0 ? errno : 0;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (err) return err;
  if (failed) {
    /* It never ran: reap it here, as posix_spawn does. */
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    return failed;
  }
  *pid_out = pid;
  return 0;
}

/* Starts `path`, and for a file the kernel cannot exec (no #! line) /bin/sh <file> <args>, as execvp. */
static int spawn_one(pid_t *pid, const char *path, const struct spawn_plan *plan, char **argv, char **envp) {
  size_t count = 0;
  while (argv[count] != NULL) count++;
  char **shell_argv = calloc(count + 2, sizeof(char *));
  if (shell_argv == NULL) return ENOMEM;
  shell_argv[0] = "/bin/sh";
  shell_argv[1] = (char *)path;
  for (size_t i = 1; i < count; i++) shell_argv[i + 1] = argv[i];
  int err;
  if (have_close_range()) {
    err = vfork_spawn(pid, path, plan, argv, shell_argv, envp);
  } else {
    err = posix_spawn(pid, path, plan->actions, plan->attr, argv, envp);
    if (err == ENOEXEC) err = posix_spawn(pid, "/bin/sh", plan->actions, plan->attr, shell_argv, envp);
  }
  free(shell_argv);
  return err;
}

/*
 * Whether `path` (relative ones taken from `cwd`, where the child will be) is a regular file this
 * process may execute: 0, else the errno execve would give. Checked here, in the parent, so a PATH
 * of eight directories costs eight stat calls rather than eight clones whose exec fails.
 */
static int runnable(const char *path, const char *cwd) {
  char *full = NULL;
  if (path[0] != '/') {
    size_t cwd_length = strlen(cwd), path_length = strlen(path);
    full = malloc(cwd_length + path_length + 2);
    if (full == NULL) return ENOMEM;
    memcpy(full, cwd, cwd_length);
    full[cwd_length] = '/';
    memcpy(full + cwd_length + 1, path, path_length + 1);
  }
  struct stat st;
  int err = 0;
  if (stat(full ? full : path, &st) != 0) err = errno;
  else if (!S_ISREG(st.st_mode)) err = EACCES;
  else if (access(full ? full : path, X_OK) != 0) err = errno;
  free(full);
  return err;
}

/*
 * `file` as is when it holds a slash, else each directory of the child's PATH in turn, with
 * execvp's rules: ENOENT and ENOTDIR go on to the next, EACCES too but is what fails at the end.
 */
static int spawn_on_path(pid_t *pid, const char *file, const char *cwd, const struct spawn_plan *plan, char **argv,
                         char **envp) {
  if (*file == '\0') return ENOENT;
  if (strchr(file, '/') != NULL) return spawn_one(pid, file, plan, argv, envp);
  const char *path = "/usr/bin:/bin"; /* libuv's default when the env has no PATH */
  for (char **p = envp; *p != NULL; p++) {
    if (strncmp(*p, "PATH=", 5) == 0) {
      path = *p + 5;
      break;
    }
  }
  size_t file_length = strlen(file);
  int denied = 0, err = ENOENT;
  for (const char *dir = path;;) {
    const char *end = strchrnul(dir, ':');
    size_t dir_length = (size_t)(end - dir);
    /* Relative to the child's working directory, as its exec would see it (an empty entry is it). */
    char *candidate = malloc(dir_length + file_length + 2);
    if (candidate == NULL) return ENOMEM;
    if (dir_length == 0) {
      memcpy(candidate, file, file_length + 1);
    } else {
      memcpy(candidate, dir, dir_length);
      candidate[dir_length] = '/';
      memcpy(candidate + dir_length + 1, file, file_length + 1);
    }
    err = runnable(candidate, cwd);
    if (err == 0) err = spawn_one(pid, candidate, plan, argv, envp);
    free(candidate);
    if (err == 0) return 0;
    if (err == EACCES) denied = 1;
    else if (err != ENOENT && err != ENOTDIR) return err;
    if (*end == '\0') return denied ? EACCES : err;
    dir = end + 1;
  }
}

/*
 * The supervisor's one /dev/null, opened at the first spawn that needs it and kept (close-on-exec):
 * most commands get it as stdin, and in a sandbox each open() is a round trip to the path guard
 * (a third of a `true`'s). Checked before each use, since nothing stops other code in the process
 * from closing that number and reusing it: a descriptor that is not /dev/null any more (fstat: the
 * character device 1:3) is forgotten, never closed (it is someone else's), and /dev/null opened again.
 */
static int dev_null(void) {
  static int fd = -1;
  struct stat st;
  if (fd >= 0 && fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3)) return fd;
  fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  return fd;
}

static void close_pair(int pair[2]) {
  if (pair[0] >= 0) close(pair[0]);
  if (pair[1] >= 0) close(pair[1]);
  pair[0] = pair[1] = -1;
}

/*
 * spawn(file, argv, cwd, envp, stdinPipe, capture) -> [pid, stdinFd, stdoutFd, stderrFd]
 * argv[0] is the program's own argv[0]; envp holds `KEY=value` strings; a missing pipe is -1.
 * Throws node's spawn error (`code`: ENOENT, EACCES, ...) when the program could not be started.
 */
static napi_value spawn_child(napi_env env, napi_callback_info info) {
  size_t argc = 7;
  napi_value args[7];
  napi_get_cb_info(env, info, &argc, args, NULL, NULL);
  if (argc < 6) return throw_error(env, "ERR_INVALID_ARG_TYPE", "conch_spawn: spawn() takes 6 or 7 arguments");
  bool want_pidfd = false;
  if (argc >= 7) napi_get_value_bool(env, args[6], &want_pidfd);
  char *file = utf8(env, args[0]);
  char **argv = utf8_array(env, args[1]);
  char *cwd = utf8(env, args[2]);
  char **envp = utf8_array(env, args[3]);
  bool stdin_pipe = false, capture = false;
  napi_get_value_bool(env, args[4], &stdin_pipe);
  napi_get_value_bool(env, args[5], &capture);
  if (file == NULL || argv == NULL || argv[0] == NULL || cwd == NULL || envp == NULL) {
    free(file);
    free(cwd);
    free_array(argv);
    free_array(envp);
    return throw_error(env, "ERR_INVALID_ARG_TYPE",
                       "conch_spawn: expected spawn(file: string, argv: string[] (not empty), cwd: string, env: string[], stdinPipe, capture)");
  }

  int in[2] = {-1, -1}, out[2] = {-1, -1}, err_pair[2] = {-1, -1}, null_fd = -1, err = 0;
  if (stdin_pipe && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) < 0) err = errno;
  if (!err && capture && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, out) < 0) err = errno;
  if (!err && capture && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, err_pair) < 0) err = errno;
  if (!err && (!stdin_pipe || !capture) && (null_fd = dev_null()) < 0) err = errno;

  pid_t pid = -1;
  if (!err) {
    struct spawn_plan plan = {
        .fds = {stdin_pipe ? in[1] : null_fd, capture ? out[1] : null_fd, capture ? err_pair[1] : null_fd},
        .cwd = cwd,
    };
    /* posix_spawn's actions and attributes: the same plan, built only where the vfork path is not taken. */
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    const bool posix = !have_close_range();
    if (posix) {
      sigset_t all, none;
      posix_spawn_file_actions_init(&actions);
      posix_spawnattr_init(&attr);
      /* dup2 onto 0..2 clears FD_CLOEXEC there; every other fd is closed before exec. */
      for (int fd = 0; fd < 3; fd++) posix_spawn_file_actions_adddup2(&actions, plan.fds[fd], fd);
      posix_spawn_file_actions_addchdir_np(&actions, cwd);
#if defined(CONCH_CLOSEFROM_ACTION)
      posix_spawn_file_actions_addclosefrom_np(&actions, 3);
#else
      mark_cloexec_from(3);
#endif
      sigfillset(&all);
      sigemptyset(&none);
      posix_spawnattr_setsigdefault(&attr, &all);
      posix_spawnattr_setsigmask(&attr, &none);
      posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
      plan.actions = &actions;
      plan.attr = &attr;
    }
    err = spawn_on_path(&pid, file, cwd, &plan, argv, envp);
    if (posix) {
      posix_spawn_file_actions_destroy(&actions);
      posix_spawnattr_destroy(&attr);
    }
  }
  /* The child's ends are the child's alone now. */
  if (in[1] >= 0) close(in[1]);
  if (out[1] >= 0) close(out[1]);
  if (err_pair[1] >= 0) close(err_pair[1]);
  in[1] = out[1] = err_pair[1] = -1;
  free(cwd);
  free_array(argv);
  free_array(envp);

  if (err) {
    close_pair(in);
    close_pair(out);
    close_pair(err_pair);
    napi_value thrown = throw_errno(env, err, file);
    free(file);
    return thrown;
  }
  free(file);

  /*
   * A pidfd of the child when asked (a supervisor in its own pid namespace): passed to the host with
   * the pipes, it names the child to the host's kernel, which reads the host's pid for it from
   * /proc/self/fdinfo instead of searching /proc. -1 where the kernel has no pidfd_open (before
   * 5.3) or refuses it; the host searches then.
   */
  int pidfd = -1;
#if defined(SYS_pidfd_open)
  if (want_pidfd) pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
#else
  if (want_pidfd) pidfd = (int)syscall(434, pid, 0);
#endif
  if (pidfd >= 0) fcntl(pidfd, F_SETFD, FD_CLOEXEC);
  else pidfd = -1;

  napi_value result, value;
  int values[5] = {pid, in[0], out[0], err_pair[0], pidfd};
  napi_create_array_with_length(env, 5, &result);
  for (uint32_t i = 0; i < 5; i++) {
    napi_create_int32(env, values[i], &value);
    napi_set_element(env, result, i, value);
  }
  return result;
}

/*
 * sendFds(socketFd, id, fds): one message on a unix socket carrying `id` and `fds` (SCM_RIGHTS),
 * then closes them here: they belong to the receiver now. Never blocks: false when the socket's
 * buffer is full (the caller passes them another way and still owns them), true when sent.
 * How the supervisor hands a child's pipes to the host without node's handle passing, whose
 * acknowledgement round trip per handle is most of a cheap command's messaging.
 */
static napi_value send_fds(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value args[3], result;
  napi_get_cb_info(env, info, &argc, args, NULL, NULL);
  int32_t socket_fd = -1;
  uint32_t id = 0, count = 0;
  if (argc < 3 || napi_get_value_int32(env, args[0], &socket_fd) != napi_ok ||
      napi_get_value_uint32(env, args[1], &id) != napi_ok || napi_get_array_length(env, args[2], &count) != napi_ok ||
      count == 0 || count > 4) {
    return throw_error(env, "ERR_INVALID_ARG_TYPE", "conch_spawn: expected sendFds(socketFd: number, id: number, fds: number[1..4])");
  }
  int fds[4];
  for (uint32_t i = 0; i < count; i++) {
    napi_value element;
    napi_get_element(env, args[2], i, &element);
    if (napi_get_value_int32(env, element, &fds[i]) != napi_ok || fds[i] < 0) {
      return throw_error(env, "ERR_INVALID_ARG_TYPE", "conch_spawn: sendFds() fds must be open file descriptors");
    }
  }
  union {
    char buffer[CMSG_SPACE(sizeof(int) * 4)];
    struct cmsghdr align;
  } control;
  memset(&control, 0, sizeof control);
  struct iovec iov = {.iov_base = &id, .iov_len = sizeof id};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buffer,
                       .msg_controllen = CMSG_SPACE(sizeof(int) * count)};
  struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof(int) * count);
  memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * count);
  ssize_t sent;
  do {
    sent = sendmsg(socket_fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent == (ssize_t)sizeof id) {
    for (uint32_t i = 0; i < count; i++) close(fds[i]);
  }
  napi_get_boolean(env, sent == (ssize_t)sizeof id, &result);
  return result;
}

/*
 * recvFds(socketFd) -> [id, ...fds] (up to 4) from the next sendFds message (the fds close-on-exec), or null
 * when none is queued. Never blocks.
 */
static napi_value recv_fds(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value arg, result, value;
  napi_get_cb_info(env, info, &argc, &arg, NULL, NULL);
  int32_t socket_fd = -1;
  if (argc < 1 || napi_get_value_int32(env, arg, &socket_fd) != napi_ok) {
    return throw_error(env, "ERR_INVALID_ARG_TYPE", "conch_spawn: expected recvFds(socketFd: number)");
  }
  uint32_t id = 0;
  union {
    char buffer[CMSG_SPACE(sizeof(int) * 4)];
    struct cmsghdr align;
  } control;
  struct iovec iov = {.iov_base = &id, .iov_len = sizeof id};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buffer,
                       .msg_controllen = sizeof control.buffer};
  ssize_t got;
  do {
    got = recvmsg(socket_fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  } while (got < 0 && errno == EINTR);
  if (got != (ssize_t)sizeof id) {
    napi_get_null(env, &result);
    return result;
  }
  int fds[4];
  uint32_t count = 0;
  for (struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg); cmsg != NULL; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
    if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS) continue;
    uint32_t n = (uint32_t)((cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    for (uint32_t i = 0; i < n && count < 4; i++) memcpy(&fds[count++], CMSG_DATA(cmsg) + i * sizeof(int), sizeof(int));
  }
  napi_create_array_with_length(env, count + 1, &result);
  napi_create_uint32(env, id, &value);
  napi_set_element(env, result, 0, value);
  for (uint32_t i = 0; i < count; i++) {
    napi_create_int32(env, fds[i], &value);
    napi_set_element(env, result, i + 1, value);
  }
  return result;
}

/*
 * envGeneration() -> a number that changes whenever this process's environment (`environ`) does.
 *
 * Why: node's process.env reads the environment through getenv() per name, which scans `environ`
 * from the start each time, so a copy of the whole environment costs O(n^2) string compares and a
 * JavaScript string per name (~70 us for 35 variables here, ~430 us for 135), on every spawn. The
 * host keeps its last copy and makes a new one only when this number moves.
 *
 * The answer compares the `environ` array (its address, length and every entry's pointer) with the
 * last one seen. setenv/putenv/unsetenv (node's process.env writes go through uv_os_setenv and
 * uv_os_unsetenv) replace an entry's pointer, or grow or shrink the array; glibc's and musl's
 * setenv never write into a string already in `environ` (glibc keeps old strings alive and hands
 * the same one back for the same NAME=value). What it cannot see: a string given to putenv() and
 * changed in place afterwards by its owner. Main thread only (the host calls it there: a worker's
 * process.env is a copy that is not `environ`).
 */
extern char **environ;
static char **env_seen = NULL;
static size_t env_seen_len = 0;
static size_t env_seen_cap = 0;
static char **env_seen_base = NULL;
static double env_generation_count = 0;

static napi_value env_generation(napi_env env, napi_callback_info info) {
  (void)info;
  char **now = environ;
  size_t n = 0;
  if (now != NULL)
    while (now[n] != NULL) n++;
  int same = env_generation_count > 0 && now == env_seen_base && n == env_seen_len &&
             (n == 0 || memcmp(env_seen, now, n * sizeof(char *)) == 0);
  if (!same) {
    if (n > env_seen_cap) {
      char **grown = realloc(env_seen, n * sizeof(char *));
      if (grown == NULL) {
        /* Nothing to compare with next time: every call counts as a change. */
        env_seen_len = (size_t)-1;
        env_generation_count++;
        napi_value out;
        napi_create_double(env, env_generation_count, &out);
        return out;
      }
      env_seen = grown;
      env_seen_cap = n;
    }
    if (n > 0) memcpy(env_seen, now, n * sizeof(char *));
    env_seen_len = n;
    env_seen_base = now;
    env_generation_count++;
  }
  napi_value out;
  napi_create_double(env, env_generation_count, &out);
  return out;
}

/*
 * pidfdPid(pidfd) -> the pid of the process `pidfd` names in this process's pid namespace, -1 when
 * it has been reaped already, 0 when the kernel does not say; `pidfd` is closed either way.
 *
 * Why: the host learns the host pid of a child its sandboxed supervisor started (in its own pid
 * namespace) from a pidfd the supervisor sends with the child's pipes. From JavaScript that is an
 * open, a read and a close of /proc/self/fdinfo/<fd> (~90 us of host CPU per sandboxed command on
 * the 2-core VM, the open of a /proc file most of it); here it is one ioctl (PIDFD_GET_INFO, Linux
 * 6.13+), else the same fdinfo read without JavaScript in between.
 */
#ifndef PIDFD_GET_INFO
struct conch_pidfd_info {
  uint64_t mask;
  uint64_t cgroupid;
  uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
  uint32_t spare0[1];
};
/* <linux/pidfd.h>: _IOWR(PIDFS_IOCTL_MAGIC, 11, struct pidfd_info), its first size 64 bytes. */
#define CONCH_PIDFD_GET_INFO _IOWR(0xFF, 11, struct conch_pidfd_info)
#define CONCH_PIDFD_INFO_PID 1ULL
#else
#define conch_pidfd_info pidfd_info
#define CONCH_PIDFD_GET_INFO PIDFD_GET_INFO
#define CONCH_PIDFD_INFO_PID PIDFD_INFO_PID
#endif

static int pid_from_fdinfo(int pidfd) {
  char path[64], text[1024];
  snprintf(path, sizeof path, "/proc/self/fdinfo/%d", pidfd);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n;
  do {
    n = read(fd, text, sizeof text - 1);
  } while (n < 0 && errno == EINTR);
  close(fd);
  if (n <= 0) return 0;
  text[n] = '\0';
  const char *at = strstr(text, "\nPid:");
  if (at == NULL) return 0;
  long pid = strtol(at + 5, NULL, 10);
  return pid == -1 ? -1 : pid > 0 && pid <= INT32_MAX ? (int)pid : 0;
}

static napi_value pidfd_pid(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value arg, result;
  napi_get_cb_info(env, info, &argc, &arg, NULL, NULL);
  int32_t pidfd = -1;
  if (argc < 1 || napi_get_value_int32(env, arg, &pidfd) != napi_ok || pidfd < 0) {
    return throw_error(env, "ERR_INVALID_ARG_TYPE", "conch_spawn: expected pidfdPid(pidfd: number)");
  }
  int pid = 0;
  struct conch_pidfd_info details;
  memset(&details, 0, sizeof details);
  details.mask = CONCH_PIDFD_INFO_PID;
  if (ioctl(pidfd, CONCH_PIDFD_GET_INFO, &details) == 0) {
    pid = (details.mask & CONCH_PIDFD_INFO_PID) && details.pid > 0 && details.pid <= INT32_MAX ? (int)details.pid : 0;
  } else if (errno == ESRCH) {
    pid = -1;
  } else {
    /* ENOTTY or EINVAL: a kernel before 6.13. */
    pid = pid_from_fdinfo(pidfd);
  }
  close(pidfd);
  napi_create_int32(env, pid, &result);
  return result;
}

/*
 * fileId(path) -> "<device>:<inode>" of what `path` names (following symlinks), or "" when stat
 * fails. Why: the host checks before every sandboxed spawn that the directories the sandbox's mounts
 * hold are still the ones it was built on (process-manager.ts sound()); node's bigint stat builds a
 * Stats object of sixteen BigInts and four Dates for the two numbers it needs.
 */
static napi_value file_id(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value arg, result;
  napi_get_cb_info(env, info, &argc, &arg, NULL, NULL);
  char path[4096];
  size_t length = 0;
  if (argc < 1 || napi_get_value_string_utf8(env, arg, path, sizeof path, &length) != napi_ok) {
    return throw_error(env, "ERR_INVALID_ARG_TYPE", "conch_spawn: expected fileId(path: string)");
  }
  char text[48] = "";
  struct stat st;
  /* A path as long as the buffer was cut: never stat a prefix of it. */
  if (length < sizeof path - 1 && strlen(path) == length && stat(path, &st) == 0) {
    snprintf(text, sizeof text, "%llu:%llu", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
  }
  napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &result);
  return result;
}

/*
 * drain(fd, max) -> [Buffer | null, eof: boolean]: what a child's output socket holds now, read
 * without blocking (MSG_DONTWAIT) up to `max` bytes (null when nothing was), and whether every
 * writer is gone (end of file: the fd is closed then). Why: the supervisor keeps a short command's
 * output sockets itself and sends what they held with the command's exit, one message, instead of
 * passing the host two sockets it would wrap, poll, read to their end and close (supervisor-
 * children.ts, "held output"); node has no non-blocking read of a blocking fd.
 */
static napi_value drain(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value args[2], result, value;
  napi_get_cb_info(env, info, &argc, args, NULL, NULL);
  int32_t fd = -1;
  uint32_t max = 0;
  if (argc < 2 || napi_get_value_int32(env, args[0], &fd) != napi_ok || fd < 0 ||
      napi_get_value_uint32(env, args[1], &max) != napi_ok || max == 0) {
    return throw_error(env, "ERR_INVALID_ARG_TYPE", "conch_spawn: expected drain(fd: number, max: number > 0)");
  }
  char stack[16384];
  char *data = stack;
  size_t length = 0, capacity = sizeof stack;
  int eof = 0;
  while (length < max) {
    if (length == capacity) {
      size_t grown = capacity * 2 > max ? max : capacity * 2;
      char *next = data == stack ? malloc(grown) : realloc(data, grown);
      if (next == NULL) break;
      if (data == stack) memcpy(next, stack, length);
      data = next;
      capacity = grown;
    }
    size_t want = capacity - length;
    if (want > max - length) want = max - length;
    ssize_t got = recv(fd, data + length, want, MSG_DONTWAIT);
    if (got > 0) {
      length += (size_t)got;
    } else if (got == 0) {
      eof = 1;
      break;
    } else if (errno == EINTR) {
      continue;
    } else {
      /* EAGAIN: a writer is still there. Anything else (ECONNRESET): nothing more will come. */
      if (errno != EAGAIN && errno != EWOULDBLOCK) eof = 1;
      break;
    }
  }
  if (eof) close(fd);
  napi_create_array_with_length(env, 2, &result);
  if (length > 0) {
    void *copy;
    napi_create_buffer_copy(env, length, data, &copy, &value);
  } else {
    napi_get_null(env, &value);
  }
  napi_set_element(env, result, 0, value);
  napi_get_boolean(env, eof, &value);
  napi_set_element(env, result, 1, value);
  if (data != stack) free(data);
  return result;
}

/*
 * groupAlive(pgid) -> whether process group `pgid` has any member, zombies included: kill(-pgid, 0)
 * succeeds or is refused (EPERM). Why: the supervisor asks it at every child's exit, and node's
 * process.kill throws for the usual answer (ESRCH, the group is gone): building that error costs
 * more than the system call.
 */
static napi_value group_alive(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value arg, result;
  napi_get_cb_info(env, info, &argc, &arg, NULL, NULL);
  int32_t pgid = 0;
  if (argc < 1 || napi_get_value_int32(env, arg, &pgid) != napi_ok || pgid <= 1) {
    return throw_error(env, "ERR_INVALID_ARG_TYPE", "conch_spawn: expected groupAlive(pgid: number > 1)");
  }
  int alive = kill(-pgid, 0) == 0 || errno == EPERM;
  napi_get_boolean(env, alive, &result);
  return result;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  napi_create_function(env, "spawn", NAPI_AUTO_LENGTH, spawn_child, NULL, &fn);
  napi_set_named_property(env, exports, "spawn", fn);
  napi_create_function(env, "tryWait", NAPI_AUTO_LENGTH, try_wait, NULL, &fn);
  napi_set_named_property(env, exports, "tryWait", fn);
  napi_create_function(env, "sendFds", NAPI_AUTO_LENGTH, send_fds, NULL, &fn);
  napi_set_named_property(env, exports, "sendFds", fn);
  napi_create_function(env, "recvFds", NAPI_AUTO_LENGTH, recv_fds, NULL, &fn);
  napi_set_named_property(env, exports, "recvFds", fn);
  napi_create_function(env, "envGeneration", NAPI_AUTO_LENGTH, env_generation, NULL, &fn);
  napi_set_named_property(env, exports, "envGeneration", fn);
  napi_create_function(env, "pidfdPid", NAPI_AUTO_LENGTH, pidfd_pid, NULL, &fn);
  napi_set_named_property(env, exports, "pidfdPid", fn);
  napi_create_function(env, "fileId", NAPI_AUTO_LENGTH, file_id, NULL, &fn);
  napi_set_named_property(env, exports, "fileId", fn);
  napi_create_function(env, "drain", NAPI_AUTO_LENGTH, drain, NULL, &fn);
  napi_set_named_property(env, exports, "drain", fn);
  napi_create_function(env, "groupAlive", NAPI_AUTO_LENGTH, group_alive, NULL, &fn);
  napi_set_named_property(env, exports, "groupAlive", fn);
  return exports;
}
