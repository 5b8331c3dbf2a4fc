/*
 * conch-guard: the sandbox's path guard (see src/guard.ts and the package README for why).
 *
 * bubblewrap's mounts protect paths as they were when the sandbox started: a read-only bind mount
 * on `.git/config` or a /dev/null mount over `.env` sits on that file's directory entry, and when
 * a process outside the sandbox renames another file over it or unlinks it (git's lockfile
 * rename, an editor's atomic save, `sed -i`), the kernel detaches the mount in every other mount
 * namespace. From then on the sandbox writes the user's new `.git/config` and reads the new secret.
 * Mounts on directories survive such changes; mounts on files, and names that appear later, do not.
 *
 * So every sandboxed process runs under a seccomp filter that sends each syscall which opens a
 * file or creates, removes, renames, links or re-modes a name to this process (SECCOMP_RET_USER_NOTIF).
 * The guard resolves the path the way the kernel would (the caller's cwd or dirfd, symlinks
 * followed where the call follows them), judges the resulting path against the policy the host
 * sent (protected and masked paths, protected names, the supervisor's /proc entries), and then
 * performs the call itself and hands the result back: an opened file descriptor goes into the
 * caller with SECCOMP_IOCTL_NOTIF_ADDFD, anything else as a return value. The caller's memory is
 * read once: the call that runs is the one that was judged (replying "continue" would let another
 * thread of the caller swap the path after the check). A protection is thereby a property of a path
 * for the life of the sandbox, whatever happens to the files meanwhile, with no window.
 *
 * The guard is the sandbox's first process: it forks the program it is given (the process
 * supervisor), which installs the filter and hands the listener back over a socketpair before it
 * execs, so the filter covers the supervisor and everything it starts. The guard itself is not
 * filtered, not dumpable (nothing can ptrace it or read its memory), a child subreaper (orphans are
 * reparented to it, so it stays their ancestor and may read their memory under Yama's ptrace
 * scope 1), and out of reach of the filtered processes: signals, ptrace, process_vm_*, pidfd_open,
 * prlimit and perf_event_open aimed at it, at its threads, at the supervisor or at the sandbox's
 * init are refused, and so are the supervisor's private /proc entries (memory, fds, environment).
 * The filter also refuses io_uring (its operations bypass seccomp), the kernel keyring (keyctl,
 * add_key, request_key: the host's session keyring would otherwise be readable), a second
 * user-notification listener (a newer filter's listener would take precedence over this one),
 * open_by_handle_at, and syscalls of another architecture.
 *
 * Protocol with the host (the fd given as --channel, a stream socket): records of one type byte, a
 * little-endian u32 payload length and the payload. Host -> guard: policy entries (below) and
 * 'C' (commit: the entries since the last commit replace the policy, acknowledged with 'A').
 * Guard -> host: 'S' started ("<guard pid> <supervisor pid> <features>"), 'A' acknowledged commit,
 * 'r' refused ("<op>\0<path>\0<errno>"), 'w' written ("<op>\0<path>": a watched name changed),
 * 'e' error text. The guard waits for the first commit before it starts the program.
 *
 * Policy entries: 'R' read-only path, 'M' masked path, 'N' name root (where protected names apply),
 * 'F' protected file name (`*suffix`: every name ending so), 'D' protected directory name, 'X' a `.env*` name that is not a secret
 * (a template), 'E' payload "1": `.env*` files under a name root are secrets unless this sandbox
 * made them, 'H' payload "1": non-sample hooks cannot be created in any repository's hooks
 * directory under a name root, 'W' watched file name, 'G' payload "1": watch git's own files
 * (config, hooks, refs, index) of every repository under a name root, 'O' a home whose
 * configuration is read-only (every top-level entry named `.*`, and `bin`, with all below them:
 * a workspace that is the home must not write what the user's shells, editors and services run
 * later), 'Y' a path under such an entry that stays writable (a writable root the host named).
 *
 * Linux 5.9+ (SECCOMP_IOCTL_NOTIF_ADDFD), x86_64 and aarch64. `--probe` checks that this kernel
 * and its Yama setting let the guard work and prints the features it found.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/magic.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__x86_64__)
#define GUARD_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define GUARD_ARCH AUDIT_ARCH_AARCH64
#else
#error "conch-guard supports x86_64 and aarch64"
#endif

#ifndef __NR_openat2
#define __NR_openat2 437
#endif
#ifndef __NR_fchmodat2
#define __NR_fchmodat2 452
#endif
#ifndef __NR_pidfd_getfd
#define __NR_pidfd_getfd 438
#endif
#ifndef __NR_pidfd_open
#define __NR_pidfd_open 434
#endif
#ifndef __NR_process_madvise
#define __NR_process_madvise 440
#endif
#ifndef SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
#define SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (1UL << 5)
#endif
#ifndef SECCOMP_USER_NOTIF_FLAG_CONTINUE
#define SECCOMP_USER_NOTIF_FLAG_CONTINUE (1UL << 0)
#endif
#ifndef SECCOMP_ADDFD_FLAG_SEND
#define SECCOMP_ADDFD_FLAG_SEND (1UL << 1)
#endif
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif
#ifndef O_TMPFILE
#define O_TMPFILE (020000000 | O_DIRECTORY)
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif

/* ---------------------------------------------------------------------------------------------- */
/* Small helpers                                                                                   */

static int channel_fd = -1;
static pthread_mutex_t channel_lock = PTHREAD_MUTEX_INITIALIZER;

/* One record to the host; a host that is gone is ignored (the guard ends with its program). */
static void send_record(char type, const char *payload, uint32_t length) {
  if (channel_fd < 0) return;
  unsigned char header[5];
  header[0] = (unsigned char)type;
  header[1] = length & 0xff;
  header[2] = (length >> 8) & 0xff;
  header[3] = (length >> 16) & 0xff;
  header[4] = (length >> 24) & 0xff;
  struct iovec iov[2] = {{header, 5}, {(void *)payload, length}};
  pthread_mutex_lock(&channel_lock);
  size_t total = 5 + length, done = 0;
  while (done < total) {
    struct msghdr msg = {0};
    struct iovec part[2];
    int n = 0;
    if (done < 5) {
      part[n].iov_base = header + done;
      part[n++].iov_len = 5 - done;
      part[n].iov_base = (void *)payload;
      part[n++].iov_len = length;
    } else {
      part[n].iov_base = (char *)payload + (done - 5);
      part[n++].iov_len = total - done;
    }
    msg.msg_iov = part;
    msg.msg_iovlen = n;
    ssize_t w = sendmsg(channel_fd, &msg, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      break;
    }
    done += (size_t)w;
  }
  (void)iov;
  pthread_mutex_unlock(&channel_lock);
}

static void send_text(char type, const char *text) { send_record(type, text, (uint32_t)strlen(text)); }

static void report_error(const char *what) {
  char text[512];
  snprintf(text, sizeof text, "%s: %s", what, strerror(errno));
  send_text('e', text);
  fprintf(stderr, "conch-guard: %s\n", text);
}

static int starts_with_dir(const char *path, const char *dir, size_t dir_len) {
  if (strncmp(path, dir, dir_len) != 0) return 0;
  if (dir_len == 1 && dir[0] == '/') return 1;
  return path[dir_len] == '\0' || path[dir_len] == '/';
}

/* ---------------------------------------------------------------------------------------------- */
/* Policy                                                                                          */

struct list {
  char **items;
  size_t *lengths;
  size_t count, capacity;
};

struct policy {
  struct list read_only, masked, roots, file_names, dir_names, env_templates, watch_names;
  /* `.env*` paths shown as a snapshot git already holds (a tracked, unchanged file): not secrets. */
  struct list env_exposed;
  /* Directories that read as empty (the user's home): a missing path below one is outside. */
  struct list closed;
  /* Homes whose configuration entries are read-only ('O'), and the writable roots inside them ('Y'). */
  struct list config_homes, config_exempt;
  int env_rule, hooks_rule, watch_git;
  char cookie_var[64]; /* the variable that names which spawn a process belongs to */
};

static void list_add(struct list *l, const char *item, size_t length) {
  if (l->count == l->capacity) {
    size_t capacity = l->capacity ? l->capacity * 2 : 16;
    char **items = realloc(l->items, capacity * sizeof *items);
    size_t *lengths = realloc(l->lengths, capacity * sizeof *lengths);
    if (!items || !lengths) abort();
    l->items = items;
    l->lengths = lengths;
    l->capacity = capacity;
  }
  char *copy = malloc(length + 1);
  if (!copy) abort();
  memcpy(copy, item, length);
  copy[length] = '\0';
  l->items[l->count] = copy;
  l->lengths[l->count++] = length;
}

static int compare_strings(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void list_sort(struct list *l) {
  if (l->count < 2) return;
  qsort(l->items, l->count, sizeof *l->items, compare_strings);
  for (size_t i = 0; i < l->count; i++) l->lengths[i] = strlen(l->items[i]);
}

static void list_free(struct list *l) {
  for (size_t i = 0; i < l->count; i++) free(l->items[i]);
  free(l->items);
  free(l->lengths);
  memset(l, 0, sizeof *l);
}

static void policy_free(struct policy *p) {
  if (!p) return;
  list_free(&p->read_only);
  list_free(&p->masked);
  list_free(&p->roots);
  list_free(&p->file_names);
  list_free(&p->dir_names);
  list_free(&p->env_templates);
  list_free(&p->watch_names);
  list_free(&p->env_exposed);
  list_free(&p->closed);
  list_free(&p->config_homes);
  list_free(&p->config_exempt);
  free(p);
}

/* Whether `path` is an entry of a sorted list of paths or lies under one (binary search: the
 * entries that could contain `path` sort at or before it; a containing entry is a prefix). */
static const char *list_covering(const struct list *l, const char *path) {
  /* Walk the path's own prefixes (it has few components) and look each up. */
  size_t length = strlen(path);
  char buffer[PATH_MAX];
  if (length >= sizeof buffer) return NULL;
  memcpy(buffer, path, length + 1);
  for (;;) {
    size_t lo = 0, hi = l->count;
    while (lo < hi) {
      size_t mid = (lo + hi) / 2;
      int c = strcmp(l->items[mid], buffer);
      if (c == 0) return l->items[mid];
      if (c < 0) lo = mid + 1;
      else hi = mid;
    }
    char *slash = strrchr(buffer, '/');
    if (!slash) return NULL;
    if (slash == buffer) {
      if (buffer[1] == '\0') return NULL;
      buffer[1] = '\0';
      continue;
    }
    *slash = '\0';
  }
}

/* Whether some entry of a sorted list lies strictly under `path` (renaming `path` would move it). */
static int list_has_under(const struct list *l, const char *path) {
  size_t length = strlen(path);
  size_t lo = 0, hi = l->count;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (strcmp(l->items[mid], path) <= 0) lo = mid + 1;
    else hi = mid;
  }
  for (size_t i = lo; i < l->count; i++) {
    if (strncmp(l->items[i], path, length) != 0) return 0;
    if (l->items[i][length] == '/' || (length == 1 && path[0] == '/')) return 1;
  }
  return 0;
}

/*
 * Whether `path` is (or lies under) a configuration entry of a home of `p->config_homes`: a
 * top-level entry whose name starts with '.' (`.bashrc`, `.config`, `.local`, `.ssh`, one that does
 * not exist yet) or is `bin` (on PATH in Debian's and Ubuntu's default ~/.profile), unless a path
 * of `p->config_exempt` covers it.
 */
static int in_config_home(const struct policy *p, const char *path) {
  for (size_t i = 0; i < p->config_homes.count; i++) {
    const char *home = p->config_homes.items[i];
    size_t n = p->config_homes.lengths[i];
    if (strncmp(path, home, n) != 0 || path[n] != '/') continue;
    const char *first = path + n + 1;
    size_t length = strcspn(first, "/");
    int config = first[0] == '.' ? !(length == 1 || (length == 2 && first[1] == '.'))
                                 : length == 3 && strncmp(first, "bin", 3) == 0;
    if (!config) continue;
    return list_covering(&p->config_exempt, path) == NULL;
  }
  return 0;
}

static int list_has_name(const struct list *l, const char *name) {
  for (size_t i = 0; i < l->count; i++)
    if (strcmp(l->items[i], name) == 0) return 1;
  return 0;
}

/* Whether `name` is one of the list's names, where an item `*suffix` stands for every name ending
 * in suffix (`*.code-workspace`). */
static int list_has_file_name(const struct list *l, const char *name) {
  size_t n = strlen(name);
  for (size_t i = 0; i < l->count; i++) {
    const char *item = l->items[i];
    if (item[0] != '*') {
      if (strcmp(item, name) == 0) return 1;
      continue;
    }
    size_t s = l->lengths[i] - 1;
    if (n >= s && memcmp(name + n - s, item + 1, s) == 0) return 1;
  }
  return 0;
}

static struct policy *current_policy;
static struct policy *pending_policy;
static pthread_rwlock_t policy_lock = PTHREAD_RWLOCK_INITIALIZER;

/* ---------------------------------------------------------------------------------------------- */
/* Files this sandbox made under a secret's name (a `.env` it wrote is its own, not the user's).   */

#define OWN_SLOTS 4096
static struct {
  dev_t dev;
  ino_t ino;
} own_files[OWN_SLOTS];
static size_t own_next;
static pthread_mutex_t own_lock = PTHREAD_MUTEX_INITIALIZER;

static void own_add(const struct stat *st) {
  pthread_mutex_lock(&own_lock);
  own_files[own_next % OWN_SLOTS].dev = st->st_dev;
  own_files[own_next % OWN_SLOTS].ino = st->st_ino;
  own_next++;
  pthread_mutex_unlock(&own_lock);
}

static int own_has(const struct stat *st) {
  int found = 0;
  pthread_mutex_lock(&own_lock);
  size_t n = own_next < OWN_SLOTS ? own_next : OWN_SLOTS;
  for (size_t i = 0; i < n && !found; i++)
    found = own_files[i].dev == st->st_dev && own_files[i].ino == st->st_ino;
  pthread_mutex_unlock(&own_lock);
  return found;
}

/* ---------------------------------------------------------------------------------------------- */
/* Judging a path                                                                                  */

enum op {
  OP_READ,   /* open without write access */
  OP_WRITE,  /* open for writing, truncate */
  OP_CREATE, /* a new name: open O_CREAT of a missing file, mkdir, mknod, symlink, link or rename target */
  OP_REMOVE, /* unlink, rmdir, rename source */
  OP_META,   /* chmod, chown */
  OP_LINK,   /* the source of a hard link (a new name for the inode) */
  OP_CONNECT, /* connect(2) to a socket by its path */
};

static const char *const OP_NAMES[] = {"read", "write", "create", "remove", "chmod", "link", "connect"};

/* The process ids nothing in the sandbox may touch: its init, the guard and the supervisor. */
static pid_t protected_pids[3];
static size_t protected_pid_count;

enum verdict { ALLOW = 0, MASK_FILE = -1, MASK_DIR = -2 };

/* `.env`, `.env.local`, `.env-prod`, `.env_x`, `.envrc` (the parser's ENV_FILE). */
static int is_env_name(const char *name) {
  if (strncmp(name, ".env", 4) != 0) return 0;
  char c = name[4];
  return c == '\0' || c == '.' || c == '-' || c == '_' || strcmp(name + 4, "rc") == 0;
}

static const char *root_of(const struct policy *p, const char *path) {
  for (size_t i = 0; i < p->roots.count; i++)
    if (starts_with_dir(path, p->roots.items[i], p->roots.lengths[i])) return p->roots.items[i];
  return NULL;
}

/* A hook in a repository's hooks directory (`.git/hooks/x`, `.git/modules/m/hooks/x`, a worktree's):
 * anything but a `*.sample` (what `git init` copies) may run when the user runs git. */
static int is_hook_path(const char *path) {
  const char *git = strstr(path, "/.git/");
  if (!git) return 0;
  const char *hooks = NULL;
  for (const char *at = git; (at = strstr(at, "/hooks/")) != NULL; at++) hooks = at;
  if (!hooks) return 0;
  const char *name = hooks + 7;
  const char *slash = strchr(name, '/');
  size_t length = slash ? (size_t)(slash - name) : strlen(name);
  if (!slash && length >= 7 && strncmp(name + length - 7, ".sample", 7) == 0) return 0;
  /* hooks/ must belong to a git dir: `.git` itself, or one under `.git/modules` or `.git/worktrees`. */
  const char *owner = hooks;
  while (owner > path && owner[-1] != '/') owner--;
  if (hooks - owner == 4 && strncmp(owner, ".git", 4) == 0) return 1;
  return strstr(path, "/.git/modules/") != NULL || strstr(path, "/.git/worktrees/") != NULL;
}

/* Entries of /proc/<pid> that any process of the same user may read (what `ps` and `top` use). */
static int harmless_proc_entry(const char *entry) {
  static const char *const names[] = {"stat", "statm", "status", "cmdline", "comm", "cgroup", "wchan",
                                      "sched", "schedstat", "loginuid", "sessionid", "oom_score", NULL};
  for (size_t i = 0; names[i]; i++)
    if (strcmp(entry, names[i]) == 0) return 1;
  return 0;
}

static pid_t tgid_of(pid_t tid) {
  char path[64], text[2048];
  snprintf(path, sizeof path, "/proc/%d/status", tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return -1;
  text[n] = '\0';
  const char *line = strstr(text, "\nTgid:");
  return line ? (pid_t)strtol(line + 6, NULL, 10) : -1;
}

static int is_protected_pid(pid_t pid) {
  for (size_t i = 0; i < protected_pid_count; i++)
    if (protected_pids[i] == pid) return 1;
  return 0;
}

/*
 * /proc/<n>/... of the sandbox's init, the guard or the supervisor (or any of their threads), from
 * another process: only the entries `ps` reads. The directory itself is refused too (an open
 * /proc/<pid> directory is a pidfd for pidfd_send_signal).
 */
static int judge_proc(pid_t caller, const char *path) {
  if (strncmp(path, "/proc/", 6) != 0) return ALLOW;
  const char *digits = path + 6;
  char *end;
  long n = strtol(digits, &end, 10);
  if (end == digits || (*end != '\0' && *end != '/') || n <= 0) return ALLOW;
  const char *entry = *end == '/' ? end + 1 : end;
  if (*entry != '\0' && strchr(entry, '/') == NULL && harmless_proc_entry(entry)) return ALLOW;
  if (strncmp(entry, "task/", 5) == 0) {
    const char *tid_end = strchr(entry + 5, '/');
    if (tid_end && strchr(tid_end + 1, '/') == NULL && harmless_proc_entry(tid_end + 1)) return ALLOW;
  }
  pid_t owner = tgid_of((pid_t)n);
  if (owner < 0 || !is_protected_pid(owner)) return ALLOW;
  if (tgid_of(caller) == owner) return ALLOW;
  return EACCES;
}

/*
 * The verdict on one operation on one absolute path (the real path of its directory, then its
 * name): ALLOW, an errno, or MASK_FILE / MASK_DIR (a read of a secret: refused; of a secret
 * directory: its empty mask). `st` describes the existing entry, or is NULL when there is none.
 */
static int judge(const struct policy *p, pid_t caller, const char *path, enum op op, const struct stat *st) {
  int proc = judge_proc(caller, path);
  if (proc != ALLOW) return proc;
  const int writes = op != OP_READ;
  const char *masked = list_covering(&p->masked, path);
  if (masked) {
    if (writes) return EROFS;
    if (strcmp(masked, path) != 0) return ENOENT;
    return st && S_ISDIR(st->st_mode) ? MASK_DIR : MASK_FILE;
  }
  const char *root = root_of(p, path);
  const char *name = strrchr(path, '/');
  name = name ? name + 1 : path;
  if (root && p->env_rule && is_env_name(name) && !list_has_name(&p->env_templates, name) &&
      !list_covering(&p->env_exposed, path)) {
    /* A secret unless this sandbox made it (then it is the agent's own file). */
    if (st && !S_ISDIR(st->st_mode) && !own_has(st)) return writes ? EROFS : MASK_FILE;
  }
  if (!writes) return ALLOW;
  if (list_covering(&p->read_only, path)) return EROFS;
  if (in_config_home(p, path)) return EROFS;
  if (op == OP_REMOVE && (list_has_under(&p->read_only, path) || list_has_under(&p->masked, path)))
    return EROFS;
  if (!root) return ALLOW;
  if (op == OP_REMOVE && !(st && S_ISDIR(st->st_mode))) {
    /* Removing a file of a protected name is not planting anything; creating or changing one is. */
  } else {
    if (list_has_file_name(&p->file_names, name)) return EROFS;
  }
  /* A protected directory name anywhere below the root: `.vscode`, `a/.claude/settings.json`. */
  size_t root_length = strlen(root);
  const char *rest = path + root_length;
  while (*rest == '/') rest++;
  while (*rest) {
    const char *slash = strchr(rest, '/');
    size_t length = slash ? (size_t)(slash - rest) : strlen(rest);
    for (size_t i = 0; i < p->dir_names.count; i++) {
      if (p->dir_names.lengths[i] == length && strncmp(p->dir_names.items[i], rest, length) == 0) {
        /* Removing the whole protected directory (or an entry of it) is refused as well: it would
         * let a later create bring it back with other content. */
        return EROFS;
      }
    }
    if (!slash) break;
    rest = slash + 1;
  }
  if (p->hooks_rule && op != OP_REMOVE && is_hook_path(path)) return EROFS;
  return ALLOW;
}

/* Whether a successful change to `path` is one the host wants to hear of (plants). */
static int watched(const struct policy *p, const char *path) {
  if (!root_of(p, path)) return 0;
  const char *name = strrchr(path, '/');
  name = name ? name + 1 : path;
  if (list_has_name(&p->watch_names, name)) return 1;
  if (!p->watch_git) return 0;
  if (strcmp(name, ".git") == 0) return 1;
  const char *git = strstr(path, "/.git/");
  if (!git) return 0;
  const char *inner = git + 6;
  if (strncmp(inner, "objects/", 8) == 0 || strncmp(inner, "logs/", 5) == 0) return 0;
  /* config, config.worktree, hooks/, refs/, packed-refs, HEAD, index, modules/, worktrees/. */
  return 1;
}

/* ---------------------------------------------------------------------------------------------- */
/* Reading the caller's memory and resolving its paths                                             */

static int listener_fd = -1;
/* The guard's "/", opened once (it never changes root): where absolute paths are resolved from. */
static int root_fd = -1;
/* Whether the listener hands off synchronously (below). */
static int sync_wake = 0;

/* A caller stopped at a guarded syscall does nothing until the guard answers, and the guard waits
 * for callers: the kernel can run the guard on the caller's CPU and the caller again on the guard's
 * when it answers (Linux 6.6+, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP), instead of waking a task on
 * another CPU each way (an inter-processor interrupt, costly in a VM). A scheduling hint only:
 * older kernels refuse the flag and the guard works as before. */
static void ask_sync_wake(void) {
  sync_wake = ioctl(listener_fd, SECCOMP_IOCTL_NOTIF_SET_FLAGS, (__u64)SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP) == 0;
}

static int notification_valid(uint64_t id) { return ioctl(listener_fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0; }

/* A NUL-terminated string from the caller, read page by page (it may end just before unmapped memory). */
static int read_string(pid_t tid, uint64_t address, char *out, size_t size) {
  if (address == 0) return EFAULT;
  size_t done = 0;
  const size_t page = 4096;
  while (done < size) {
    uint64_t at = address + done;
    size_t chunk = page - (at % page);
    if (chunk > size - done) chunk = size - done;
    struct iovec local = {out + done, chunk}, remote = {(void *)(uintptr_t)at, chunk};
    ssize_t got = process_vm_readv(tid, &local, 1, &remote, 1, 0);
    if (got <= 0) return done > 0 && memchr(out, '\0', done) ? 0 : (errno == ESRCH ? ESRCH : EFAULT);
    if (memchr(out + done, '\0', (size_t)got)) return 0;
    done += (size_t)got;
  }
  return ENAMETOOLONG;
}

struct resolved {
  int dir;                  /* O_PATH fd of the directory holding the entry */
  char name[NAME_MAX + 1];  /* the entry's name in it ("." when the path names a directory itself) */
  char path[PATH_MAX];      /* the real path of the directory, then "/" and the name */
  struct stat st;           /* the entry, when exists */
  int exists;
  int trailing_slash;       /* the path ended in '/': the entry must be a directory */
  int anonymous;            /* a magic link to something without a path (a pipe, a socket): `dir` is it */
  char via[PATH_MAX];       /* the path as named, when its final symlink was followed ("" otherwise) */
  struct stat via_st;       /* that symlink */
  char missing[PATH_MAX];   /* ENOENT: the path as it would be (the real path of its deepest existing directory, then the rest) */
  dev_t missing_dev;        /* the device of that deepest existing directory */
  int want_missing;         /* a change: `missing` is worth finding (reads skip the extra lookups) */
};

/* Paths that name the caller's own view: what the kernel would resolve for the caller, not the guard. */
static int rewrite_self(pid_t tid, const char *in, char *out, size_t size) {
  static const struct {
    const char *prefix;
    const char *replacement;
  } rules[] = {{"/proc/self", "/proc/%d"},      {"/proc/thread-self", "/proc/%d"}, {"/dev/fd", "/proc/%d/fd"},
               {"/dev/stdin", "/proc/%d/fd/0"}, {"/dev/stdout", "/proc/%d/fd/1"},  {"/dev/stderr", "/proc/%d/fd/2"}};
  for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
    size_t length = strlen(rules[i].prefix);
    if (strncmp(in, rules[i].prefix, length) == 0 && (in[length] == '\0' || in[length] == '/')) {
      char head[64];
      snprintf(head, sizeof head, rules[i].replacement, tid);
      if (snprintf(out, size, "%s%s", head, in + length) >= (int)size) return ENAMETOOLONG;
      return 0;
    }
  }
  if (strlen(in) >= size) return ENAMETOOLONG;
  strcpy(out, in);
  return 0;
}

static int real_path_of_fd(int fd, char *out, size_t size) {
  /* A directory's path the kernel's way, without readlink's walk of /proc/self/fd/N (~0.9 µs
   * against ~3.4 here, twice on most guarded calls): fchdir to it and getcwd, both of this thread
   * only (the main thread, the listener and each worker unshare CLONE_FS at start, and nothing here resolves a
   * relative path against its cwd). Anything else falls back to readlink: not a directory, no
   * search permission, a path too long, a deleted or unreachable directory (getcwd fails there
   * where readlink gives "… (deleted)" or a path the callers judge as before). */
  if (fchdir(fd) == 0) {
    long n = syscall(SYS_getcwd, out, size);
    if (n > 0 && out[0] == '/') return 0;
  }
  char link[64];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, out, size - 1);
  if (n < 0) return errno;
  out[n] = '\0';
  if ((size_t)n == size - 1) return ENAMETOOLONG;
  return 0;
}

/* The directory a relative path starts from: the caller's cwd or its dirfd (an O_PATH fd here). */
static int caller_dir(pid_t tid, int dirfd) {
  char link[64];
  if (dirfd == AT_FDCWD) snprintf(link, sizeof link, "/proc/%d/cwd", tid);
  else if (dirfd < 0) return -EBADF;
  else snprintf(link, sizeof link, "/proc/%d/fd/%d", tid, dirfd);
  int fd = open(link, O_PATH | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? -EBADF : -errno;
  return fd;
}

/*
 * A directory of the path does not exist: where the path would be, from its deepest existing
 * directory (its real path) and the components below it, so a write under a closed directory can
 * be told from a typo (missing_errno).
 */
static void note_missing(int base, const char *parent, const char *name, struct resolved *r) {
  char prefix[PATH_MAX];
  snprintf(prefix, sizeof prefix, "%s", parent);
  for (;;) {
    char *cut = strrchr(prefix, '/');
    if (cut == NULL) {
      prefix[0] = '\0';
    } else if (cut == prefix) {
      prefix[1] = '\0';
    } else {
      *cut = '\0';
    }
    int dir = prefix[0] ? openat(base, prefix, O_PATH | O_DIRECTORY | O_CLOEXEC) : fcntl(base, F_DUPFD_CLOEXEC, 0);
    if (dir >= 0) {
      char real[PATH_MAX];
      struct stat st;
      int e = real_path_of_fd(dir, real, sizeof real);
      if (!e && fstat(dir, &st) != 0) e = errno;
      close(dir);
      if (e || real[0] != '/') return;
      r->missing_dev = st.st_dev;
      size_t skip = strlen(prefix);
      const char *rest = parent + skip;
      while (*rest == '/') rest++;
      snprintf(r->missing, sizeof r->missing, "%s/%s%s%s", strcmp(real, "/") == 0 ? "" : real, rest, *rest ? "/" : "", name);
      return;
    }
    if (errno != ENOENT || prefix[0] == '\0' || strcmp(prefix, "/") == 0) return;
  }
}

/*
 * Resolves `path` for the caller: its directory opened here (following symlinks as the kernel
 * does), the final name, and the entry when it exists. `follow` follows a final symlink (what the
 * call itself would do), up to 40 links in all. Returns 0 or an errno; on success `r->dir` is open.
 */
static int resolve_at(pid_t tid, int base, const char *given, int follow, struct resolved *r, int depth) {
  if (depth > 40) return ELOOP;
  char path[PATH_MAX];
  int e = rewrite_self(tid, given, path, sizeof path);
  if (e) return e;
  if (path[0] == '\0') return ENOENT;
  size_t length = strlen(path);
  r->trailing_slash = 0;
  while (length > 1 && path[length - 1] == '/') {
    path[--length] = '\0';
    r->trailing_slash = 1;
  }
  const char *name;
  int dir;
  char *slash = strrchr(path, '/');
  if (slash == NULL) {
    dir = fcntl(base, F_DUPFD_CLOEXEC, 0);
    if (dir < 0) return errno;
    name = path;
  } else if (slash == path && path[1] == '\0') {
    /* "/" itself */
    dir = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) return errno;
    name = ".";
  } else {
    *slash = '\0';
    const char *parent = slash == path ? "/" : path;
    dir = openat(base, parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) {
      e = errno;
      if (e == ENOENT && r->want_missing) note_missing(base, path, slash + 1, r);
      return e;
    }
    name = slash + 1;
  }
  if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
    /* The path names a directory through "." or "..": that directory is the entry, judged by its own path. */
    int self = openat(dir, name, O_PATH | O_DIRECTORY | O_CLOEXEC);
    close(dir);
    if (self < 0) return errno;
    char real[PATH_MAX];
    e = real_path_of_fd(self, real, sizeof real);
    if (e) {
      close(self);
      return e;
    }
    r->dir = self;
    strcpy(r->name, ".");
    strcpy(r->path, real);
    r->exists = fstat(self, &r->st) == 0;
    r->anonymous = 0;
    return 0;
  }
  if (strlen(name) > NAME_MAX) {
    close(dir);
    return ENAMETOOLONG;
  }
  char real[PATH_MAX];
  e = real_path_of_fd(dir, real, sizeof real);
  if (e) {
    close(dir);
    return e;
  }
  if (real[0] != '/') {
    close(dir);
    return ENOENT;
  }
  size_t real_length = strlen(real);
  if (real_length >= 10 && strcmp(real + real_length - 10, " (deleted)") == 0) {
    close(dir);
    return ENOENT;
  }
  struct stat st;
  int exists = fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
  if (exists && S_ISLNK(st.st_mode) && (follow || r->trailing_slash) && !r->via[0]) {
    /* A protection belongs to the name: what is reached through it is judged by it too. */
    snprintf(r->via, sizeof r->via, "%s/%s", strcmp(real, "/") == 0 ? "" : real, name);
    r->via_st = st;
  }
  if (exists && S_ISLNK(st.st_mode) && (follow || r->trailing_slash)) {
    if (strncmp(real, "/proc/", 6) == 0 || strcmp(real, "/proc") == 0) {
      /* A link in /proc (a process's fd, cwd, root or exe; self): only the kernel can follow it. */
      int target = openat(dir, name, O_PATH | O_CLOEXEC);
      close(dir);
      if (target < 0) return errno;
      char where[PATH_MAX];
      e = real_path_of_fd(target, where, sizeof where);
      if (e == 0 && where[0] == '/' && strstr(where, " (deleted)") == NULL) {
        struct stat target_st, again_st;
        int ok = fstat(target, &target_st) == 0;
        e = resolve_at(tid, root_fd, where, 0, r, depth + 1);
        /* The path must still name what the link pointed at (it can have been renamed meanwhile). */
        if (e == 0 && ok && r->exists && fstat(target, &again_st) == 0 && r->st.st_ino == target_st.st_ino &&
            r->st.st_dev == target_st.st_dev) {
          close(target);
          return 0;
        }
        if (e == 0) close(r->dir);
      }
      /* Something without a path (a pipe, a socket, an anonymous or deleted file): opened through the link. */
      r->dir = target;
      r->anonymous = 1;
      strcpy(r->name, ".");
      snprintf(r->path, sizeof r->path, "%s", where[0] ? where : "anonymous");
      r->exists = fstat(target, &r->st) == 0;
      r->trailing_slash = 0;
      return 0;
    }
    char target[PATH_MAX];
    ssize_t n = readlinkat(dir, name, target, sizeof target - 1);
    if (n < 0) {
      e = errno;
      close(dir);
      return e;
    }
    target[n] = '\0';
    if (r->trailing_slash && n + 1 < (ssize_t)sizeof target) strcat(target, "/");
    e = resolve_at(tid, target[0] == '/' ? root_fd : dir, target, follow, r, depth + 1);
    close(dir);
    return e;
  }
  r->dir = dir;
  r->anonymous = 0;
  strcpy(r->name, name);
  if (snprintf(r->path, sizeof r->path, "%s/%s", strcmp(real, "/") == 0 ? "" : real, name) >= (int)sizeof r->path) {
    close(dir);
    return ENAMETOOLONG;
  }
  r->exists = exists;
  if (exists) r->st = st;
  return 0;
}

static int resolve_for(pid_t tid, int dirfd, const char *path, int follow, struct resolved *r, int want_missing) {
  memset(r, 0, sizeof *r);
  r->want_missing = want_missing;
  r->dir = -1;
  int base;
  if (path[0] == '/') {
    base = root_fd;
  } else {
    base = caller_dir(tid, dirfd);
    if (base < 0) return -base;
  }
  int e = resolve_at(tid, base, path, follow, r, 0);
  if (base != root_fd) close(base);
  if (e == 0 && r->trailing_slash && r->exists && !S_ISDIR(r->st.st_mode)) {
    close(r->dir);
    r->dir = -1;
    return ENOTDIR;
  }
  return e;
}

/* ---------------------------------------------------------------------------------------------- */
/* Performing the calls                                                                            */

static int caller_umask(pid_t tid) {
  char path[64], text[2048];
  snprintf(path, sizeof path, "/proc/%d/status", tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 022;
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return 022;
  text[n] = '\0';
  const char *line = strstr(text, "\nUmask:");
  return line ? (int)strtol(line + 7, NULL, 8) : 022;
}

/* The caller's controlling terminal, for an open of /dev/tty (the guard has none of its own). */
static int caller_tty(pid_t tid, char *out, size_t size) {
  char path[64], text[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ENXIO;
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return ENXIO;
  text[n] = '\0';
  const char *p = strrchr(text, ')');
  if (!p) return ENXIO;
  /* After ") ": state ppid pgrp session tty_nr */
  long fields[5] = {0};
  char state;
  if (sscanf(p + 2, "%c %ld %ld %ld %ld", &state, &fields[0], &fields[1], &fields[2], &fields[3]) != 5) return ENXIO;
  unsigned long tty = (unsigned long)fields[3];
  if (tty == 0) return ENXIO;
  unsigned major = (tty >> 8) & 0xfff, minor = (tty & 0xff) | ((tty >> 12) & 0xfff00);
  if (major >= 136 && major <= 143) snprintf(out, size, "/dev/pts/%u", (major - 136) * 256 + minor);
  else if (major == 4 && minor < 64) snprintf(out, size, "/dev/tty%u", minor);
  else if (major == 5 && minor == 1) snprintf(out, size, "/dev/console");
  else return ENXIO;
  return 0;
}

struct call {
  struct seccomp_notif *req;
  struct seccomp_notif_resp *resp;
  struct policy *policy;
};

static void reply_error(uint64_t id, int error) {
  struct seccomp_notif_resp resp;
  memset(&resp, 0, sizeof resp);
  resp.id = id;
  resp.error = error ? -error : 0;
  resp.val = 0;
  ioctl(listener_fd, SECCOMP_IOCTL_NOTIF_SEND, &resp);
}

static void reply_value(uint64_t id, long value) {
  struct seccomp_notif_resp resp;
  memset(&resp, 0, sizeof resp);
  resp.id = id;
  resp.val = value;
  ioctl(listener_fd, SECCOMP_IOCTL_NOTIF_SEND, &resp);
}

/* Lets the kernel perform the call as the caller made it (an O_PATH open: see handle_open). */
static void reply_continue(uint64_t id) {
  struct seccomp_notif_resp resp;
  memset(&resp, 0, sizeof resp);
  resp.id = id;
  resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
  ioctl(listener_fd, SECCOMP_IOCTL_NOTIF_SEND, &resp);
}

static void reply_fd(uint64_t id, int fd, int cloexec) {
  struct seccomp_notif_addfd addfd;
  memset(&addfd, 0, sizeof addfd);
  addfd.id = id;
  addfd.flags = SECCOMP_ADDFD_FLAG_SEND;
  addfd.srcfd = (uint32_t)fd;
  addfd.newfd_flags = cloexec ? O_CLOEXEC : 0;
  /* A descriptor the kernel will not install (the caller out of fds, a kind ADDFD refuses) is the
   * call's error: an unanswered notification would block the caller for ever. */
  if (ioctl(listener_fd, SECCOMP_IOCTL_NOTIF_ADDFD, &addfd) < 0 && errno != ENOENT) reply_error(id, errno);
}

/* The caller's spawn cookie (the host's name for the spawn it descends from), or "" when unknown. */
static void caller_cookie(const struct policy *p, pid_t tid, char *out, size_t size) {
  out[0] = '\0';
  if (!p || !p->cookie_var[0]) return;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/environ", tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  /* Heap, not a thread-local: a big static TLS block would not fit the workers' small stacks. */
  const size_t size_env = 128 * 1024;
  char *env = malloc(size_env);
  if (!env) {
    close(fd);
    return;
  }
  ssize_t n = read(fd, env, size_env - 1);
  close(fd);
  if (n <= 0) {
    free(env);
    return;
  }
  env[n] = '\0';
  size_t name_length = strlen(p->cookie_var);
  for (ssize_t at = 0; at < n;) {
    const char *entry = env + at;
    size_t length = strnlen(entry, (size_t)(n - at));
    if (length > name_length && strncmp(entry, p->cookie_var, name_length) == 0) {
      snprintf(out, size, "%.*s", (int)(length - name_length), entry + name_length);
      break;
    }
    at += (ssize_t)length + 1;
  }
  free(env);
}

/* Refusals are reported once per path and operation in a row (a program that retries is one report). */
static void report_refusal(const struct call *c, enum op op, const char *path, int error) {
  static char last[PATH_MAX + 160];
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  char payload[PATH_MAX + 192], cookie[128];
  caller_cookie(c->policy, (pid_t)c->req->pid, cookie, sizeof cookie);
  int n = snprintf(payload, sizeof payload, "%s%c%s%c%d%c%s", OP_NAMES[op], 0, path, 0, error, 0, cookie);
  if (n < 0 || n >= (int)sizeof payload) return;
  pthread_mutex_lock(&lock);
  int repeat = memcmp(last, payload, (size_t)n < sizeof last ? (size_t)n : sizeof last) == 0;
  if (!repeat) memcpy(last, payload, (size_t)n < sizeof last ? (size_t)n : sizeof last);
  pthread_mutex_unlock(&lock);
  if (!repeat) send_record('r', payload, (uint32_t)n);
}

static void report_write(const struct call *c, enum op op, const char *path) {
  if (!watched(c->policy, path)) return;
  char payload[PATH_MAX + 160], cookie[128];
  caller_cookie(c->policy, (pid_t)c->req->pid, cookie, sizeof cookie);
  int n = snprintf(payload, sizeof payload, "%s%c%s%c%s", OP_NAMES[op], 0, path, 0, cookie);
  if (n > 0 && n < (int)sizeof payload) send_record('w', payload, (uint32_t)n);
}

/* Whether a masked directory is still the empty tmpfs the sandbox mounted over it. */
static int still_masked_dir(int fd) {
  struct statfs sfs;
  if (fstatfs(fd, &sfs) != 0 || sfs.f_type != TMPFS_MAGIC) return 0;
  int copy = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (copy < 0) return 0;
  DIR *d = fdopendir(copy);
  if (!d) {
    close(copy);
    return 0;
  }
  int empty = 1;
  struct dirent *entry;
  while ((entry = readdir(d)) != NULL)
    if (strcmp(entry->d_name, ".") != 0 && strcmp(entry->d_name, "..") != 0) empty = 0;
  closedir(d);
  return empty;
}

/*
 * Work that may block (opening a FIFO waits for its other end) runs on a pool of threads made
 * before the program starts, so that their ids are in the filter (a signal to any thread id of the
 * guard, kill(tid) included, would take the whole guard down). Jobs beyond the pool wait in line.
 */
#define WORKERS 8

struct blocking_open {
  uint64_t id;
  int dir; /* an open: the directory; a connect: the socket's O_PATH entry, or -1 */
  char name[NAME_MAX + 1];
  int flags;
  int mode;
  int umask;
  int cloexec;
  int sock; /* a connect: the caller's socket (the guard's duplicate); -1 for an open */
  struct sockaddr_storage addr;
  socklen_t addr_len;
  struct blocking_open *next;
};

static pthread_mutex_t jobs_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t jobs_ready = PTHREAD_COND_INITIALIZER;
static struct blocking_open *jobs_head, *jobs_tail;
static pid_t worker_tids[WORKERS];
/* Threads (the workers and the listener) that have recorded their ids: the fork waits for all. */
static volatile int threads_started;

static void queue_blocking(struct blocking_open *job) {
  pthread_mutex_lock(&jobs_lock);
  job->next = NULL;
  if (jobs_tail) jobs_tail->next = job;
  else jobs_head = job;
  jobs_tail = job;
  pthread_cond_signal(&jobs_ready);
  pthread_mutex_unlock(&jobs_lock);
}

static void *worker(void *arg) {
  size_t index = (size_t)(uintptr_t)arg;
  unshare(CLONE_FS); /* its own umask */
  worker_tids[index] = (pid_t)syscall(SYS_gettid);
  __atomic_add_fetch(&threads_started, 1, __ATOMIC_SEQ_CST);
  for (;;) {
    pthread_mutex_lock(&jobs_lock);
    while (!jobs_head) pthread_cond_wait(&jobs_ready, &jobs_lock);
    struct blocking_open *job = jobs_head;
    jobs_head = job->next;
    if (!jobs_head) jobs_tail = NULL;
    pthread_mutex_unlock(&jobs_lock);
    if (job->sock >= 0) {
      /* A connect that may wait (a blocking socket: a listener's full backlog, a TCP handshake). */
      int failed = connect(job->sock, (const struct sockaddr *)&job->addr, job->addr_len) != 0;
      int e = errno;
      if (failed) reply_error(job->id, e);
      else reply_value(job->id, 0);
      close(job->sock);
      if (job->dir >= 0) close(job->dir);
      free(job);
      continue;
    }
    umask((mode_t)job->umask);
    int fd = openat(job->dir, job->name, job->flags, job->mode);
    int e = errno;
    if (fd < 0) reply_error(job->id, e);
    else {
      reply_fd(job->id, fd, job->cloexec);
      close(fd);
    }
    close(job->dir);
    free(job);
  }
  return NULL;
}

/* A detached thread; `stack` 0 keeps the default size. */
static int start_detached(void *(*fn)(void *), void *arg, size_t stack) {
  pthread_attr_t attr;
  pthread_t thread;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (stack) pthread_attr_setstacksize(&attr, stack);
  int e = pthread_create(&thread, &attr, fn, arg);
  pthread_attr_destroy(&attr);
  return e;
}

/* Hands a FIFO's open (which waits for the other end) to the pool. Takes `dir`. */
static void open_later(uint64_t id, int dir, const char *name, int flags, int mode, int umask_value, int cloexec) {
  struct blocking_open *job = calloc(1, sizeof *job);
  if (!job) {
    close(dir);
    reply_error(id, ENOMEM);
    return;
  }
  job->id = id;
  job->dir = dir;
  job->sock = -1;
  snprintf(job->name, sizeof job->name, "%s", name);
  job->flags = flags;
  job->mode = mode;
  job->umask = umask_value;
  job->cloexec = cloexec;
  queue_blocking(job);
}

/*
 * The answer to a path that could not be resolved (`e`): a change to a missing path below a closed
 * directory (the home, which reads as empty inside) is a write outside the sandbox, refused as
 * read-only and reported like any other refused write; a read stays ENOENT.
 */
static int missing_errno(const struct call *c, enum op op, const struct resolved *r, int e) {
  if (e != ENOENT || op == OP_READ || r->missing[0] == '\0') return e;
  const char *closed = list_covering(&c->policy->closed, r->missing);
  /* Only where the path stops on the closed directory's own (empty) filesystem: a missing path in
   * a workspace or toolchain bound inside it is an ordinary ENOENT. */
  struct stat st;
  if (!closed || stat(closed, &st) != 0 || st.st_dev != r->missing_dev) return e;
  report_refusal(c, op, r->missing, EROFS);
  return EROFS;
}

static void handle_open(const struct call *c, int dirfd, uint64_t path_address, int flags, int mode) {
  const struct seccomp_notif *req = c->req;
  pid_t tid = (pid_t)req->pid;
  char given[PATH_MAX];
  int e = read_string(tid, path_address, given, sizeof given);
  if (e) {
    reply_error(req->id, e);
    return;
  }
  int access = flags & O_ACCMODE;
  int tmpfile = (flags & O_TMPFILE) == O_TMPFILE;
  int creating = (flags & O_CREAT) && !tmpfile;
  int exclusive = creating && (flags & O_EXCL);
  int follow = !(flags & O_NOFOLLOW) && !exclusive;
  int cloexec = (flags & O_CLOEXEC) != 0;
  if (strcmp(given, "/dev/tty") == 0) {
    char tty[64];
    e = caller_tty(tid, tty, sizeof tty);
    if (e) {
      reply_error(req->id, e);
      return;
    }
    int fd = open(tty, (flags & ~(O_CREAT | O_EXCL | O_TRUNC)) | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) reply_error(req->id, errno);
    else if (!notification_valid(req->id)) close(fd);
    else {
      reply_fd(req->id, fd, cloexec);
      close(fd);
    }
    return;
  }
  /* A few rounds: an entry that changes between the check and the open (a symlink or a file put in
   * its place) is resolved and judged again. */
  for (int round = 0;; round++) {
    struct resolved r;
    e = resolve_for(tid, dirfd, given, follow, &r,
                    access != O_RDONLY || (flags & O_TRUNC) || tmpfile || creating);
    if (e) {
      int wants = access != O_RDONLY || (flags & O_TRUNC) || tmpfile || creating;
      reply_error(req->id, missing_errno(c, wants ? OP_CREATE : OP_READ, &r, e));
      return;
    }
    if (!notification_valid(req->id)) {
      close(r.dir);
      return;
    }
    int writes = access != O_RDONLY || (flags & O_TRUNC) || tmpfile;
    enum op op = writes ? OP_WRITE : OP_READ;
    if ((creating && !r.exists) || tmpfile) op = OP_CREATE;
    int verdict = judge(c->policy, tid, r.path, op, r.exists ? &r.st : NULL);
    if (verdict == ALLOW && r.via[0]) {
      int through = judge(c->policy, tid, r.via, op == OP_CREATE ? OP_WRITE : op, &r.via_st);
      if (through != ALLOW) verdict = through == MASK_DIR ? MASK_FILE : through;
    }
    if (verdict > 0) {
      report_refusal(c, op, r.path, verdict);
      close(r.dir);
      reply_error(req->id, verdict);
      return;
    }
    if (verdict == MASK_FILE) {
      /* A secret is unreadable (EACCES), as it is under bubblewrap's mask (/dev/null bound nodev):
       * the command fails where it would read it, and the host can say it met a secret. */
      close(r.dir);
      if (exclusive) {
        reply_error(req->id, EEXIST);
        return;
      }
      report_refusal(c, OP_READ, r.via[0] ? r.via : r.path, EACCES);
      reply_error(req->id, EACCES);
      return;
    }
    if (flags & O_PATH) {
      /* An O_PATH descriptor reads, writes and creates nothing (the kernel ignores every other flag
       * but O_DIRECTORY and O_NOFOLLOW), and ADDFD cannot hand one over (it takes no O_PATH file:
       * the caller hung for ever). The path was judged: the kernel opens it. What the descriptor is
       * used for later (an openat from it, /proc/self/fd/N, a link) comes back here and is judged. */
      close(r.dir);
      reply_continue(req->id);
      return;
    }
    int target_flags = flags | O_CLOEXEC | O_NOCTTY;
    if (r.anonymous) {
      /* What a /proc link points at (a pipe, an unlinked file): reopened through the link. */
      char link[64];
      snprintf(link, sizeof link, "/proc/self/fd/%d", r.dir);
      int fd = open(link, target_flags & ~(O_CREAT | O_EXCL | O_NOFOLLOW), mode);
      e = errno;
      close(r.dir);
      if (fd < 0) reply_error(req->id, e);
      else {
        reply_fd(req->id, fd, cloexec);
        close(fd);
      }
      return;
    }
    int umask_value = op == OP_CREATE ? caller_umask(tid) : 022;
    int is_dot = strcmp(r.name, ".") == 0;
    /* The entry was resolved already: a symlink put in its place meanwhile is not followed, and a
     * file that did not exist must be the one this open creates. */
    if (!is_dot && !tmpfile) target_flags |= O_NOFOLLOW;
    if (op == OP_CREATE && !tmpfile) target_flags |= O_EXCL;
    if (r.exists && S_ISFIFO(r.st.st_mode) && !(flags & O_NONBLOCK) && !(flags & O_PATH)) {
      open_later(req->id, r.dir, r.name, target_flags, mode, umask_value, cloexec);
      return;
    }
    if (op == OP_CREATE) umask((mode_t)umask_value);
    /* O_NONBLOCK: a FIFO put in place since the check cannot block the guard (cleared below). */
    int fd = openat(r.dir, r.name, target_flags | O_NONBLOCK, mode);
    e = errno;
    if (op == OP_CREATE) umask(022);
    if (fd < 0) {
      int raced = (e == ELOOP && !(flags & O_NOFOLLOW)) || (e == EEXIST && !exclusive && op == OP_CREATE);
      if (raced && round < 4) {
        close(r.dir);
        continue;
      }
      close(r.dir);
      reply_error(req->id, e);
      return;
    }
    struct stat opened;
    if (fstat(fd, &opened) != 0) {
      e = errno;
      close(fd);
      close(r.dir);
      reply_error(req->id, e);
      return;
    }
    if (S_ISFIFO(opened.st_mode) && !(flags & O_NONBLOCK) && !(flags & O_PATH)) {
      close(fd);
      open_later(req->id, r.dir, r.name, target_flags & ~O_EXCL, mode, umask_value, cloexec);
      return;
    }
    if (!(flags & O_NONBLOCK) && !(flags & O_PATH)) {
      /* F_SETFL sets only these of the open flags (O_ASYNC too, which open ignores): what the
       * open set, without O_NONBLOCK, and no F_GETFL to ask. */
      fcntl(fd, F_SETFL, target_flags & (O_APPEND | O_DIRECT | O_NOATIME));
    }
    if (verdict == MASK_DIR && !still_masked_dir(fd)) {
      close(fd);
      close(r.dir);
      reply_error(req->id, ENOENT);
      return;
    }
    if (r.exists && (opened.st_ino != r.st.st_ino || opened.st_dev != r.st.st_dev)) {
      /* Another entry was renamed into place meanwhile: judge what was opened. */
      int again = judge(c->policy, tid, r.path, op, &opened);
      if (again != ALLOW) {
        close(fd);
        close(r.dir);
        if (again < 0 && round < 4) continue; /* now masked: the mask is what it gets */
        report_refusal(c, op, r.path, again > 0 ? again : EACCES);
        reply_error(req->id, again > 0 ? again : EACCES);
        return;
      }
    }
    if (op == OP_CREATE && is_env_name(r.name)) own_add(&opened);
    if (op != OP_READ) report_write(c, op, r.path);
    close(r.dir);
    reply_fd(req->id, fd, cloexec);
    close(fd);
    return;
  }
}

/* A call on one name that the guard performs with the resolved directory: unlink, mkdir, ... */
static void handle_simple(const struct call *c, enum op op, int dirfd, uint64_t path_address, int follow, int nr,
                          uint64_t a, uint64_t b) {
  const struct seccomp_notif *req = c->req;
  pid_t tid = (pid_t)req->pid;
  char given[PATH_MAX];
  int e = read_string(tid, path_address, given, sizeof given);
  if (e) {
    reply_error(req->id, e);
    return;
  }
  struct resolved r;
  e = resolve_for(tid, dirfd, given, follow, &r, op != OP_READ);
  if (e) {
    reply_error(req->id, missing_errno(c, op, &r, e));
    return;
  }
  if (!notification_valid(req->id)) {
    close(r.dir);
    return;
  }
  if (r.anonymous) {
    close(r.dir);
    reply_error(req->id, op == OP_META ? EPERM : EINVAL);
    return;
  }
  int is_dot = strcmp(r.name, ".") == 0;
  int verdict;
  if (nr == 'u' && (a & AT_REMOVEDIR) && r.exists && S_ISDIR(r.st.st_mode) && !is_dot &&
      list_covering(&c->policy->read_only, r.path) == NULL && list_covering(&c->policy->masked, r.path) == NULL) {
    /* rmdir of a directory that holds protected paths: it is not empty, and the kernel says so
     * (ENOTEMPTY) as it would without the guard; git and others try such removals in passing. */
    verdict = ALLOW;
  } else {
    verdict = judge(c->policy, tid, r.path, op, r.exists ? &r.st : NULL);
  }
  if (verdict == ALLOW && r.via[0]) verdict = judge(c->policy, tid, r.via, op, &r.via_st);
  if (verdict != ALLOW) {
    if (verdict < 0) verdict = op == OP_READ ? ENOENT : EROFS;
    report_refusal(c, op, r.path, verdict);
    close(r.dir);
    reply_error(req->id, verdict);
    return;
  }
  long result = 0;
  switch (nr) {
    case 'u': /* unlinkat(dir, name, flags) */
      if (is_dot) result = -((a & AT_REMOVEDIR) ? EINVAL : EISDIR);
      else result = unlinkat(r.dir, r.name, (int)a) == 0 ? 0 : -errno;
      break;
    case 'd': { /* mkdirat(dir, name, mode) */
      if (is_dot) {
        result = -EEXIST;
        break;
      }
      umask((mode_t)caller_umask(tid));
      result = mkdirat(r.dir, r.name, (mode_t)a) == 0 ? 0 : -errno;
      umask(022);
      break;
    }
    case 'n': { /* mknodat(dir, name, mode, dev) */
      if (is_dot) {
        result = -EEXIST;
        break;
      }
      umask((mode_t)caller_umask(tid));
      result = mknodat(r.dir, r.name, (mode_t)a, (dev_t)b) == 0 ? 0 : -errno;
      umask(022);
      break;
    }
    case 't': { /* truncate(path, length) */
      if (r.exists && S_ISDIR(r.st.st_mode)) {
        result = -EISDIR;
        break;
      }
      int fd = openat(r.dir, r.name, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
      if (fd < 0) {
        result = -errno;
        break;
      }
      struct stat st;
      if (fstat(fd, &st) == 0 && !S_ISREG(st.st_mode)) result = -EINVAL;
      else result = ftruncate(fd, (off_t)a) == 0 ? 0 : -errno;
      close(fd);
      break;
    }
    case 'c': { /* chmod: through an O_PATH fd of the resolved entry (no symlink swapped in) */
      int fd = openat(r.dir, r.name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) {
        result = -errno;
        break;
      }
      struct stat st;
      if (fstat(fd, &st) == 0 && S_ISLNK(st.st_mode)) result = -EOPNOTSUPP;
      else {
        char link[64];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        result = chmod(link, (mode_t)a) == 0 ? 0 : -errno;
      }
      close(fd);
      break;
    }
    case 'o': { /* chown */
      int fd = openat(r.dir, r.name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) {
        result = -errno;
        break;
      }
      result = fchownat(fd, "", (uid_t)a, (gid_t)b, AT_EMPTY_PATH) == 0 ? 0 : -errno;
      close(fd);
      break;
    }
    default:
      result = -ENOSYS;
  }
  if (result == 0 && op != OP_READ) report_write(c, op, r.path);
  close(r.dir);
  if (result < 0) reply_error(req->id, (int)-result);
  else reply_value(req->id, result);
}

static void handle_symlink(const struct call *c, uint64_t target_address, int dirfd, uint64_t path_address) {
  const struct seccomp_notif *req = c->req;
  pid_t tid = (pid_t)req->pid;
  char target[PATH_MAX], given[PATH_MAX];
  int e = read_string(tid, target_address, target, sizeof target);
  if (!e) e = read_string(tid, path_address, given, sizeof given);
  if (e) {
    reply_error(req->id, e);
    return;
  }
  struct resolved r;
  e = resolve_for(tid, dirfd, given, 0, &r, 1);
  if (e) {
    reply_error(req->id, missing_errno(c, OP_CREATE, &r, e));
    return;
  }
  if (!notification_valid(req->id)) {
    close(r.dir);
    return;
  }
  int verdict = r.anonymous || strcmp(r.name, ".") == 0 ? EEXIST : judge(c->policy, tid, r.path, OP_CREATE, r.exists ? &r.st : NULL);
  if (verdict != ALLOW) {
    if (verdict < 0) verdict = EROFS;
    if (verdict != EEXIST) report_refusal(c, OP_CREATE, r.path, verdict);
    close(r.dir);
    reply_error(req->id, verdict);
    return;
  }
  long result = symlinkat(target, r.dir, r.name) == 0 ? 0 : -errno;
  if (result == 0) {
    struct stat made;
    if (is_env_name(r.name) && fstatat(r.dir, r.name, &made, AT_SYMLINK_NOFOLLOW) == 0) own_add(&made);
    report_write(c, OP_CREATE, r.path);
  }
  close(r.dir);
  if (result < 0) reply_error(req->id, (int)-result);
  else reply_value(req->id, 0);
}

static void handle_link(const struct call *c, int olddirfd, uint64_t old_address, int newdirfd, uint64_t new_address,
                        int flags) {
  const struct seccomp_notif *req = c->req;
  pid_t tid = (pid_t)req->pid;
  char old_path[PATH_MAX], new_path[PATH_MAX];
  int e = read_string(tid, old_address, old_path, sizeof old_path);
  if (!e) e = read_string(tid, new_address, new_path, sizeof new_path);
  if (e) {
    reply_error(req->id, e);
    return;
  }
  if (flags & AT_EMPTY_PATH) {
    reply_error(req->id, ENOENT); /* needs CAP_DAC_READ_SEARCH, which nothing here has */
    return;
  }
  struct resolved from, to;
  e = resolve_for(tid, olddirfd, old_path, (flags & AT_SYMLINK_FOLLOW) != 0, &from, 0);
  if (e) {
    reply_error(req->id, e);
    return;
  }
  e = resolve_for(tid, newdirfd, new_path, 0, &to, 1);
  if (e) {
    close(from.dir);
    reply_error(req->id, missing_errno(c, OP_CREATE, &to, e));
    return;
  }
  if (!notification_valid(req->id)) {
    close(from.dir);
    close(to.dir);
    return;
  }
  int verdict = from.anonymous ? EXDEV : judge(c->policy, tid, from.path, OP_LINK, from.exists ? &from.st : NULL);
  if (verdict == ALLOW && from.via[0]) verdict = judge(c->policy, tid, from.via, OP_LINK, &from.via_st);
  const char *refused = from.path;
  enum op refused_op = OP_LINK;
  if (verdict == ALLOW) {
    verdict = to.anonymous ? EEXIST : judge(c->policy, tid, to.path, OP_CREATE, to.exists ? &to.st : NULL);
    refused = to.path;
    refused_op = OP_CREATE;
  }
  if (verdict != ALLOW) {
    if (verdict < 0) verdict = EROFS;
    report_refusal(c, refused_op, refused, verdict);
    close(from.dir);
    close(to.dir);
    reply_error(req->id, verdict);
    return;
  }
  long result = linkat(from.dir, from.name, to.dir, to.name, 0) == 0 ? 0 : -errno;
  if (result == 0) report_write(c, OP_CREATE, to.path);
  close(from.dir);
  close(to.dir);
  if (result < 0) reply_error(req->id, (int)-result);
  else reply_value(req->id, 0);
}

static void handle_rename(const struct call *c, int olddirfd, uint64_t old_address, int newdirfd, uint64_t new_address,
                          unsigned flags) {
  const struct seccomp_notif *req = c->req;
  pid_t tid = (pid_t)req->pid;
  char old_path[PATH_MAX], new_path[PATH_MAX];
  int e = read_string(tid, old_address, old_path, sizeof old_path);
  if (!e) e = read_string(tid, new_address, new_path, sizeof new_path);
  if (e) {
    reply_error(req->id, e);
    return;
  }
  struct resolved from, to;
  e = resolve_for(tid, olddirfd, old_path, 0, &from, 1);
  if (e) {
    reply_error(req->id, missing_errno(c, OP_REMOVE, &from, e));
    return;
  }
  e = resolve_for(tid, newdirfd, new_path, 0, &to, 1);
  if (e) {
    close(from.dir);
    reply_error(req->id, missing_errno(c, OP_CREATE, &to, e));
    return;
  }
  if (!notification_valid(req->id)) {
    close(from.dir);
    close(to.dir);
    return;
  }
  if (from.anonymous || to.anonymous || strcmp(from.name, ".") == 0 || strcmp(to.name, ".") == 0) {
    close(from.dir);
    close(to.dir);
    reply_error(req->id, EBUSY);
    return;
  }
  /* The source name goes away; the target name is created, or replaced (a write of what it names).
   * With RENAME_EXCHANGE each name gets the other's entry: both are written. */
  int verdict = judge(c->policy, tid, from.path, (flags & RENAME_EXCHANGE) ? OP_WRITE : OP_REMOVE,
                      from.exists ? &from.st : NULL);
  const char *refused = from.path;
  enum op refused_op = (flags & RENAME_EXCHANGE) ? OP_WRITE : OP_REMOVE;
  if (verdict == ALLOW) {
    refused = to.path;
    refused_op = to.exists ? OP_WRITE : OP_CREATE;
    verdict = judge(c->policy, tid, to.path, refused_op, to.exists ? &to.st : NULL);
    if (verdict == ALLOW && to.exists && !(flags & RENAME_EXCHANGE)) {
      /* what is renamed over must be removable too: a directory holding protected paths is not */
      verdict = judge(c->policy, tid, to.path, OP_REMOVE, &to.st);
    }
  }
  if (verdict != ALLOW) {
    if (verdict < 0) verdict = EROFS;
    report_refusal(c, refused_op, refused, verdict);
    close(from.dir);
    close(to.dir);
    reply_error(req->id, verdict);
    return;
  }
  long result = syscall(SYS_renameat2, from.dir, from.name, to.dir, to.name, flags) == 0 ? 0 : -errno;
  if (result == 0) {
    /* A file the sandbox renamed to a secret's name is its own (it could read it under the old name). */
    if (is_env_name(to.name) && from.exists && !S_ISDIR(from.st.st_mode) && !own_has(&from.st)) own_add(&from.st);
    report_write(c, OP_CREATE, to.path);
    report_write(c, OP_REMOVE, from.path);
  }
  close(from.dir);
  close(to.dir);
  if (result < 0) reply_error(req->id, (int)-result);
  else reply_value(req->id, 0);
}

/* The caller's descriptor `fd` duplicated into the guard (the same open file), or -errno. */
static int caller_fd(pid_t tid, int fd) {
  pid_t tgid = tgid_of(tid);
  if (tgid <= 0) return -ESRCH;
  int pidfd = (int)syscall(__NR_pidfd_open, tgid, 0);
  if (pidfd < 0) return -errno;
  int copy = (int)syscall(__NR_pidfd_getfd, pidfd, fd, 0);
  int e = errno;
  close(pidfd);
  return copy < 0 ? -e : copy;
}

/*
 * connect(2). A socket is a file only to find it: the kernel checks no mount flag when a process
 * connects to one by its path, so a read-only bind of the host's tree still reaches every host
 * service listening on a socket in it (a database's /var/lib/mysql/mysql.sock, lxd's, the nix
 * daemon's) — what the sandbox's own network namespace does for TCP, nothing did for these. A
 * pathname socket is reachable only where the sandbox could have made it: on a writable mount
 * (the workspace, the sandbox's /tmp and /run), or conch's own sockets (the network proxy and the
 * container engine's policy proxy, under /run/conch and /run/conch-engine). Every other address
 * (TCP, UDP, abstract sockets: the sandbox's network namespace decides those) is connected as
 * given. The guard performs the call on a duplicate of the caller's socket with the address it
 * read once, so what connects is what was judged; a blocking socket's connect (a full backlog,
 * a handshake) runs on a worker.
 */
static void handle_connect(const struct call *c, int sockfd, uint64_t address, uint64_t length) {
  uint64_t id = c->req->id;
  pid_t tid = (pid_t)c->req->pid;
  struct blocking_open *job = calloc(1, sizeof *job);
  if (!job) {
    reply_error(id, ENOMEM);
    return;
  }
  job->id = id;
  job->dir = -1;
  job->sock = -1;
  if (length > sizeof job->addr || length < sizeof(sa_family_t)) {
    free(job);
    reply_error(id, EINVAL);
    return;
  }
  struct iovec local = {&job->addr, (size_t)length}, remote = {(void *)(uintptr_t)address, (size_t)length};
  if (process_vm_readv(tid, &local, 1, &remote, 1, 0) != (ssize_t)length) {
    int e = errno == ESRCH ? ESRCH : EFAULT;
    free(job);
    reply_error(id, e);
    return;
  }
  job->addr_len = (socklen_t)length;
  int sock = caller_fd(tid, sockfd);
  /* The caller may have gone (and its id been reused) while the guard read its memory. */
  if (sock < 0 || !notification_valid(id)) {
    if (sock >= 0) close(sock);
    free(job);
    reply_error(id, sock == -ESRCH ? ESRCH : EBADF);
    return;
  }
  job->sock = sock;
  struct sockaddr_un *un = (struct sockaddr_un *)&job->addr;
  const size_t head = offsetof(struct sockaddr_un, sun_path);
  if (un->sun_family == AF_UNIX && length > head && un->sun_path[0] != '\0') {
    char path[sizeof un->sun_path + 1];
    size_t n = (size_t)length - head;
    memcpy(path, un->sun_path, n);
    path[n] = '\0';
    struct resolved r;
    int e = resolve_for(tid, AT_FDCWD, path, 1, &r, 0);
    if (e == 0 && !r.exists) e = ENOENT;
    if (e == 0) {
      job->dir = openat(r.dir, r.name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
      if (job->dir < 0) e = errno;
    }
    if (r.dir >= 0) close(r.dir);
    struct stat st;
    struct statfs fs;
    if (e == 0 && (fstat(job->dir, &st) != 0 || !S_ISSOCK(st.st_mode))) e = ECONNREFUSED;
    if (e == 0 && fstatfs(job->dir, &fs) != 0) e = errno;
    int own = starts_with_dir(r.path, "/run/conch", strlen("/run/conch")) ||
              starts_with_dir(r.path, "/run/conch-engine", strlen("/run/conch-engine"));
    if (e == 0 && !own && (fs.f_flags & ST_RDONLY)) {
      e = EACCES;
      report_refusal(c, OP_CONNECT, r.path, e);
    }
    if (e != 0) {
      if (job->dir >= 0) close(job->dir);
      close(sock);
      free(job);
      reply_error(id, e);
      return;
    }
    /* The socket the guard judged, by its descriptor: a path swapped since cannot redirect it. */
    memset(&job->addr, 0, sizeof job->addr);
    un->sun_family = AF_UNIX;
    snprintf(un->sun_path, sizeof un->sun_path, "/proc/self/fd/%d", job->dir);
    job->addr_len = (socklen_t)(head + strlen(un->sun_path) + 1);
  }
  int flags = fcntl(sock, F_GETFL);
  if (flags >= 0 && !(flags & O_NONBLOCK)) {
    queue_blocking(job);
    return;
  }
  int failed = connect(sock, (const struct sockaddr *)&job->addr, job->addr_len) != 0;
  int e = errno;
  close(sock);
  if (job->dir >= 0) close(job->dir);
  free(job);
  if (failed) reply_error(id, e);
  else reply_value(id, 0);
}

/* One notification: which call, which arguments, then the handler above that performs it. */
static void handle(struct seccomp_notif *req) {
  struct call c = {req, NULL, NULL};
  pthread_rwlock_rdlock(&policy_lock);
  c.policy = current_policy;
  const uint64_t *a = (const uint64_t *)req->data.args;
  switch (req->data.nr) {
#ifdef __NR_open
    case __NR_open:
      handle_open(&c, AT_FDCWD, a[0], (int)a[1], (int)a[2]);
      break;
#endif
#ifdef __NR_creat
    case __NR_creat:
      handle_open(&c, AT_FDCWD, a[0], O_CREAT | O_WRONLY | O_TRUNC, (int)a[1]);
      break;
#endif
    case __NR_openat:
      handle_open(&c, (int)a[0], a[1], (int)a[2], (int)a[3]);
      break;
    case __NR_connect:
      handle_connect(&c, (int)a[0], a[1], (uint32_t)a[2]);
      break;
    case __NR_truncate:
      handle_simple(&c, OP_WRITE, AT_FDCWD, a[0], 1, 't', a[1], 0);
      break;
#ifdef __NR_unlink
    case __NR_unlink:
      handle_simple(&c, OP_REMOVE, AT_FDCWD, a[0], 0, 'u', 0, 0);
      break;
#endif
#ifdef __NR_rmdir
    case __NR_rmdir:
      handle_simple(&c, OP_REMOVE, AT_FDCWD, a[0], 0, 'u', AT_REMOVEDIR, 0);
      break;
#endif
    case __NR_unlinkat:
      handle_simple(&c, OP_REMOVE, (int)a[0], a[1], 0, 'u', a[2], 0);
      break;
#ifdef __NR_mkdir
    case __NR_mkdir:
      handle_simple(&c, OP_CREATE, AT_FDCWD, a[0], 0, 'd', a[1], 0);
      break;
#endif
    case __NR_mkdirat:
      handle_simple(&c, OP_CREATE, (int)a[0], a[1], 0, 'd', a[2], 0);
      break;
#ifdef __NR_mknod
    case __NR_mknod:
      handle_simple(&c, OP_CREATE, AT_FDCWD, a[0], 0, 'n', a[1], a[2]);
      break;
#endif
    case __NR_mknodat:
      handle_simple(&c, OP_CREATE, (int)a[0], a[1], 0, 'n', a[2], a[3]);
      break;
#ifdef __NR_chmod
    case __NR_chmod:
      handle_simple(&c, OP_META, AT_FDCWD, a[0], 1, 'c', a[1], 0);
      break;
#endif
    case __NR_fchmodat:
      handle_simple(&c, OP_META, (int)a[0], a[1], 1, 'c', a[2], 0);
      break;
    case __NR_fchmodat2:
      handle_simple(&c, OP_META, (int)a[0], a[1], !((int)a[3] & AT_SYMLINK_NOFOLLOW), 'c', a[2], 0);
      break;
#ifdef __NR_chown
    case __NR_chown:
      handle_simple(&c, OP_META, AT_FDCWD, a[0], 1, 'o', a[1], a[2]);
      break;
#endif
#ifdef __NR_lchown
    case __NR_lchown:
      handle_simple(&c, OP_META, AT_FDCWD, a[0], 0, 'o', a[1], a[2]);
      break;
#endif
    case __NR_fchownat:
      if (((int)a[4] & AT_EMPTY_PATH)) {
        /* fchownat(fd, "", ...): on an open file, which was judged when it was opened */
        char empty[2];
        if (read_string((pid_t)req->pid, a[1], empty, sizeof empty) == 0 && empty[0] == '\0') {
          reply_error(req->id, EPERM);
          break;
        }
      }
      handle_simple(&c, OP_META, (int)a[0], a[1], !((int)a[4] & AT_SYMLINK_NOFOLLOW), 'o', a[2], a[3]);
      break;
#ifdef __NR_symlink
    case __NR_symlink:
      handle_symlink(&c, a[0], AT_FDCWD, a[1]);
      break;
#endif
    case __NR_symlinkat:
      handle_symlink(&c, a[0], (int)a[1], a[2]);
      break;
#ifdef __NR_link
    case __NR_link:
      handle_link(&c, AT_FDCWD, a[0], AT_FDCWD, a[1], 0);
      break;
#endif
    case __NR_linkat:
      handle_link(&c, (int)a[0], a[1], (int)a[2], a[3], (int)a[4]);
      break;
#ifdef __NR_rename
    case __NR_rename:
      handle_rename(&c, AT_FDCWD, a[0], AT_FDCWD, a[1], 0);
      break;
#endif
#ifdef __NR_renameat
    case __NR_renameat:
      handle_rename(&c, (int)a[0], a[1], (int)a[2], a[3], 0);
      break;
#endif
    case __NR_renameat2:
      handle_rename(&c, (int)a[0], a[1], (int)a[2], a[3], (unsigned)a[4]);
      break;
    default:
      reply_error(req->id, ENOSYS);
  }
  pthread_rwlock_unlock(&policy_lock);
}

/* ---------------------------------------------------------------------------------------------- */
/* The seccomp filter                                                                              */

#define MAX_INSNS 4096
struct program {
  struct sock_filter insns[MAX_INSNS];
  unsigned count;
  /* forward jumps to patch: instruction index -> label */
  struct {
    unsigned at;
    int label;
  } fixups[2048];
  unsigned nfixups;
  unsigned labels[16];
};

enum { L_ALLOW, L_NOTIFY, L_EPERM, L_ENOSYS, L_KILL, L_LABELS };

static void emit(struct program *p, struct sock_filter insn) {
  if (p->count >= MAX_INSNS) abort(); /* a program this size is a bug here, not a runtime condition */
  p->insns[p->count++] = insn;
}

/* if (acc == k) goto label; (jeq to the next instruction or over it, then a 32-bit ja) */
static void jump_if(struct program *p, uint32_t k, int label) {
  emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, k, 0, 1));
  if (p->nfixups >= sizeof p->fixups / sizeof p->fixups[0]) abort();
  p->fixups[p->nfixups].at = p->count;
  p->fixups[p->nfixups++].label = label;
  emit(p, (struct sock_filter)BPF_STMT(BPF_JMP | BPF_JA, 0));
}

static void load_nr(struct program *p) { emit(p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr))); }

/* The low 32 bits of an argument (pids are 32-bit; high bits a caller sets are ignored by the kernel too). */
static void load_arg(struct program *p, int i) {
  emit(p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args) + 8 * i));
}

/*
 * Thread ids the filter protects. Signals: the sandbox's init, the guard and its threads (killing
 * them only ends the sandbox, but nothing should). Access (ptrace, memory, pidfds, limits,
 * profiling): those and the supervisor too, which holds the host's channels; the supervisor must
 * still signal itself (node re-raises a SIGSEGV it does not handle), so signals to it are allowed
 * (a command that kills it ends its own sandbox: reported as SUPERVISOR_LOST).
 */
static pid_t guarded_tids[64];
static size_t guarded_tid_count;
static pid_t supervisor_pid;

/* if a protected id is in argument `arg`: EPERM; else allow. `access`: the supervisor counts too. */
static void pid_block(struct program *p, int arg, int also_groups, int access) {
  load_arg(p, arg);
  for (size_t i = 0; i < guarded_tid_count; i++) jump_if(p, (uint32_t)guarded_tids[i], L_EPERM);
  if (access && supervisor_pid > 0) jump_if(p, (uint32_t)supervisor_pid, L_EPERM);
  if (also_groups) {
    jump_if(p, (uint32_t)-1, L_EPERM);
    for (size_t i = 0; i < protected_pid_count; i++)
      if (protected_pids[i] != supervisor_pid) jump_if(p, (uint32_t)-protected_pids[i], L_EPERM);
  }
  emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
}

static void build_filter(struct program *p) {
  memset(p, 0, sizeof *p);
  emit(p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)));
  emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, GUARD_ARCH, 1, 0));
  emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
  load_nr(p);
#if defined(__x86_64__)
  /* x32 syscalls (nr | 0x40000000) */
  emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1));
  emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS));
#endif
  static const long notify[] = {
#ifdef __NR_open
      __NR_open,
#endif
#ifdef __NR_creat
      __NR_creat,
#endif
      __NR_openat,   __NR_truncate, __NR_unlinkat, __NR_mkdirat,   __NR_mknodat,  __NR_fchmodat,
      __NR_fchmodat2, __NR_fchownat, __NR_symlinkat, __NR_linkat,   __NR_renameat2, __NR_connect,
#ifdef __NR_renameat
      __NR_renameat,
#endif
#ifdef __NR_unlink
      __NR_unlink,   __NR_rmdir,    __NR_mkdir,    __NR_mknod,     __NR_chmod,    __NR_chown,
      __NR_lchown,   __NR_symlink,  __NR_link,     __NR_rename,
#endif
  };
  for (size_t i = 0; i < sizeof notify / sizeof notify[0]; i++) jump_if(p, (uint32_t)notify[i], L_NOTIFY);
  static const long enosys[] = {
      __NR_openat2,
#ifdef __NR_uselib
      __NR_uselib,
#endif
  };
  for (size_t i = 0; i < sizeof enosys / sizeof enosys[0]; i++) jump_if(p, (uint32_t)enosys[i], L_ENOSYS);
  static const long eperm[] = {__NR_io_uring_setup, __NR_io_uring_enter, __NR_io_uring_register, __NR_keyctl,
                               __NR_add_key,        __NR_request_key,    __NR_open_by_handle_at};
  for (size_t i = 0; i < sizeof eperm / sizeof eperm[0]; i++) jump_if(p, (uint32_t)eperm[i], L_EPERM);
  /* Blocks that look at arguments: each starts with "nr != X: skip the block". */
  struct {
    long nr;
    int arg;
    int groups;
    int access;
  } pid_calls[] = {{__NR_kill, 0, 1, 0},           {__NR_tkill, 0, 0, 0},           {__NR_tgkill, 0, 0, 0},
                   {__NR_rt_sigqueueinfo, 0, 1, 0}, {__NR_rt_tgsigqueueinfo, 0, 0, 0}, {__NR_process_vm_readv, 0, 0, 1},
                   {__NR_process_vm_writev, 0, 0, 1}, {__NR_pidfd_open, 0, 0, 1},   {__NR_prlimit64, 0, 0, 1},
                   {__NR_perf_event_open, 1, 0, 1}, {__NR_get_robust_list, 0, 0, 1}, {__NR_kcmp, 0, 0, 1},
                   {__NR_kcmp, 1, 0, 1},            {__NR_migrate_pages, 0, 0, 1}, {__NR_move_pages, 0, 0, 1},
                   {__NR_ptrace, 1, 0, 1}};
  for (size_t i = 0; i < sizeof pid_calls / sizeof pid_calls[0]; i++) {
    load_nr(p);
    unsigned skip_at = p->count;
    emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)pid_calls[i].nr, 0, 0));
    unsigned start = p->count;
    if (pid_calls[i].nr == __NR_kcmp && pid_calls[i].arg == 0) {
      /* kcmp(pid1, pid2, ...): check both before allowing */
      load_arg(p, 0);
      for (size_t t = 0; t < guarded_tid_count; t++) jump_if(p, (uint32_t)guarded_tids[t], L_EPERM);
      if (supervisor_pid > 0) jump_if(p, (uint32_t)supervisor_pid, L_EPERM);
      load_arg(p, 1);
      for (size_t t = 0; t < guarded_tid_count; t++) jump_if(p, (uint32_t)guarded_tids[t], L_EPERM);
      if (supervisor_pid > 0) jump_if(p, (uint32_t)supervisor_pid, L_EPERM);
      emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    } else if (pid_calls[i].nr == __NR_ptrace) {
      load_arg(p, 0);
      emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0 /* PTRACE_TRACEME */, 0, 1));
      emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
      pid_block(p, 1, 0, 1);
    } else {
      pid_block(p, pid_calls[i].arg, pid_calls[i].groups, pid_calls[i].access);
    }
    unsigned length = p->count - start;
    if (length > 255) length = 255; /* never: blocks are short */
    p->insns[skip_at].jf = (unsigned char)length;
  }
  /* seccomp(SECCOMP_SET_MODE_FILTER, flags with NEW_LISTENER, ...): a second listener would win over this one. */
  load_nr(p);
  {
    unsigned skip_at = p->count;
    emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_seccomp, 0, 0));
    unsigned start = p->count;
    load_arg(p, 1);
    emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, SECCOMP_FILTER_FLAG_NEW_LISTENER, 0, 1));
    emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM));
    emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    p->insns[skip_at].jf = (unsigned char)(p->count - start);
  }
  emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  p->labels[L_ALLOW] = p->count;
  emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  p->labels[L_NOTIFY] = p->count;
  emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF));
  p->labels[L_EPERM] = p->count;
  emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM));
  p->labels[L_ENOSYS] = p->count;
  emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS));
  p->labels[L_KILL] = p->count;
  emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
  for (unsigned i = 0; i < p->nfixups; i++) {
    unsigned at = p->fixups[i].at;
    p->insns[at].k = p->labels[p->fixups[i].label] - (at + 1);
  }
}

/* ---------------------------------------------------------------------------------------------- */
/* Start-up: fd passing, the program, the loop                                                     */

static int send_fd(int socket, int fd) {
  char byte = 0;
  struct iovec io = {&byte, 1};
  union {
    char buffer[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } control;
  memset(&control, 0, sizeof control);
  struct msghdr msg = {0};
  msg.msg_iov = &io;
  msg.msg_iovlen = 1;
  msg.msg_control = control.buffer;
  msg.msg_controllen = sizeof control.buffer;
  struct cmsghdr *header = CMSG_FIRSTHDR(&msg);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(header), &fd, sizeof(int));
  return sendmsg(socket, &msg, 0) == 1 ? 0 : -1;
}

static int recv_fd(int socket) {
  char byte;
  struct iovec io = {&byte, 1};
  union {
    char buffer[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } control;
  struct msghdr msg = {0};
  msg.msg_iov = &io;
  msg.msg_iovlen = 1;
  msg.msg_control = control.buffer;
  msg.msg_controllen = sizeof control.buffer;
  ssize_t n;
  do n = recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n != 1) return -1;
  struct cmsghdr *header = CMSG_FIRSTHDR(&msg);
  if (!header || header->cmsg_type != SCM_RIGHTS) return -1;
  int fd;
  memcpy(&fd, CMSG_DATA(header), sizeof(int));
  return fd;
}

static unsigned long filter_flags = SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;

/* In the child, before exec: the filter (its listener to the guard), then the program. */
static int install_filter(struct program *prog) {
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
  struct sock_fprog fprog = {(unsigned short)prog->count, prog->insns};
  int fd = (int)syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, filter_flags, &fprog);
  if (fd < 0 && errno == EINVAL && (filter_flags & SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV)) {
    filter_flags &= ~SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
    fd = (int)syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, filter_flags, &fprog);
  }
  return fd;
}

/* Reads exactly `n` bytes (the channel is a stream). 0: done, -1: closed or failed. */
static int read_exact(int fd, void *buffer, size_t n) {
  size_t done = 0;
  while (done < n) {
    ssize_t got = read(fd, (char *)buffer + done, n - done);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return -1;
    done += (size_t)got;
  }
  return 0;
}

/* One record from the host into the pending policy; 'C' swaps it in. Returns 1 on commit, 0, or -1 (closed). */
static int read_policy_record(void) {
  unsigned char header[5];
  if (read_exact(channel_fd, header, 5) != 0) return -1;
  uint32_t length = header[1] | (header[2] << 8) | (header[3] << 16) | ((uint32_t)header[4] << 24);
  if (length > PATH_MAX * 4) return -1;
  char *payload = malloc(length + 1);
  if (!payload) abort();
  if (length && read_exact(channel_fd, payload, length) != 0) {
    free(payload);
    return -1;
  }
  payload[length] = '\0';
  if (!pending_policy) pending_policy = calloc(1, sizeof *pending_policy);
  if (!pending_policy) abort();
  struct policy *p = pending_policy;
  int committed = 0;
  switch (header[0]) {
    case 'R': list_add(&p->read_only, payload, length); break;
    case 'M': list_add(&p->masked, payload, length); break;
    case 'N': list_add(&p->roots, payload, length); break;
    case 'F': list_add(&p->file_names, payload, length); break;
    case 'D': list_add(&p->dir_names, payload, length); break;
    case 'X': list_add(&p->env_templates, payload, length); break;
    case 'P': list_add(&p->env_exposed, payload, length); break;
    case 'Z': list_add(&p->closed, payload, length); break;
    case 'W': list_add(&p->watch_names, payload, length); break;
    case 'O': list_add(&p->config_homes, payload, length); break;
    case 'Y': list_add(&p->config_exempt, payload, length); break;
    case 'E': p->env_rule = payload[0] == '1'; break;
    case 'H': p->hooks_rule = payload[0] == '1'; break;
    case 'G': p->watch_git = payload[0] == '1'; break;
    case 'K': snprintf(p->cookie_var, sizeof p->cookie_var, "%s=", payload); break;
    case 'C': {
      list_sort(&p->read_only);
      list_sort(&p->masked);
      list_sort(&p->env_exposed);
      list_sort(&p->closed);
      list_sort(&p->config_exempt);
      pthread_rwlock_wrlock(&policy_lock);
      struct policy *old = current_policy;
      current_policy = p;
      pthread_rwlock_unlock(&policy_lock);
      policy_free(old);
      pending_policy = NULL;
      committed = 1;
      send_record('A', "", 0);
      break;
    }
    default:
      break; /* unknown records are skipped: an older guard with a newer host */
  }
  free(payload);
  return committed;
}

/* --probe: can a listener be installed, the caller's memory read and an fd added here? */
static int probe(void) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return 1;
  protected_pids[0] = 1;
  protected_pid_count = 1;
  guarded_tids[0] = getpid();
  guarded_tid_count = 1;
  struct program prog;
  build_filter(&prog);
  pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) {
    close(sv[0]);
    int fd = install_filter(&prog);
    if (fd < 0 || send_fd(sv[1], fd) != 0) _exit(2);
    close(fd);
    char byte;
    if (read(sv[1], &byte, 1) != 1) _exit(3);
    int probe_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (probe_fd < 0) _exit(4);
    struct stat st;
    if (fstat(probe_fd, &st) != 0 || !S_ISCHR(st.st_mode)) _exit(5);
    if (syscall(__NR_io_uring_setup, 1, NULL) != -1 || errno != EPERM) _exit(6);
    _exit(0);
  }
  close(sv[1]);
  listener_fd = recv_fd(sv[0]);
  if (listener_fd < 0) {
    int status;
    waitpid(child, &status, 0);
    fprintf(stderr, "conch-guard: the seccomp listener could not be installed (exit %d)\n",
            WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 1;
  }
  ask_sync_wake();
  current_policy = calloc(1, sizeof *current_policy);
  struct seccomp_notif_sizes sizes;
  if (syscall(__NR_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) != 0) return 1;
  struct seccomp_notif *req = calloc(1, sizes.seccomp_notif > sizeof *req ? sizes.seccomp_notif : sizeof *req);
  if (write(sv[0], "x", 1) != 1) return 1;
  int status = -1;
  for (;;) {
    struct pollfd fds[1] = {{listener_fd, POLLIN, 0}};
    int ready = poll(fds, 1, 5000);
    if (ready <= 0) break;
    if (fds[0].revents & POLLHUP) break;
    memset(req, 0, sizes.seccomp_notif);
    if (ioctl(listener_fd, SECCOMP_IOCTL_NOTIF_RECV, req) != 0) {
      if (errno == EINTR) continue;
      break;
    }
    handle(req);
  }
  waitpid(child, &status, 0);
  int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  printf("{\"ok\":%s,\"waitKillable\":%s,\"syncWake\":%s,\"exit\":%d}\n", ok ? "true" : "false",
         (filter_flags & SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV) ? "true" : "false", sync_wake ? "true" : "false",
         WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return ok ? 0 : 1;
}

static void close_other_fds(int keep_a, int keep_b, int keep_c) {
  DIR *d = opendir("/proc/self/fd");
  if (!d) return;
  int own = dirfd(d);
  int fds[1024];
  size_t count = 0;
  struct dirent *entry;
  while ((entry = readdir(d)) != NULL && count < 1024) {
    int fd = atoi(entry->d_name);
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    if (fd <= 2 || fd == own || fd == keep_a || fd == keep_b || fd == keep_c) continue;
    fds[count++] = fd;
  }
  closedir(d);
  for (size_t i = 0; i < count; i++) close(fds[i]);
}

/*
 * The listener: one thread that waits for notifications in SECCOMP_IOCTL_NOTIF_RECV itself and
 * handles each. Why not the main loop's poll: a poll on three descriptors, then the RECV, is one
 * more system call and three wait queues joined and left per notification, on the path of every
 * open a sandboxed process makes (measured: ~10 µs of a `true`'s two notifications each, ~1.5% of
 * the spawn). The main thread keeps the rest (the child's exit, policy updates). Started before
 * the fork, so the filter knows its thread id; it waits until the listener is received.
 */
static pthread_mutex_t listener_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t listener_cond = PTHREAD_COND_INITIALIZER;
static size_t listener_req_size; /* 0 until the listener descriptor is there */
static pid_t listener_tid;

static void *listener(void *arg) {
  (void)arg;
  unshare(CLONE_FS); /* its own umask and cwd (real_path_of_fd) */
  umask(022);
  listener_tid = (pid_t)syscall(SYS_gettid);
  __atomic_add_fetch(&threads_started, 1, __ATOMIC_SEQ_CST);
  pthread_mutex_lock(&listener_lock);
  while (listener_req_size == 0) pthread_cond_wait(&listener_cond, &listener_lock);
  size_t req_size = listener_req_size;
  pthread_mutex_unlock(&listener_lock);
  struct seccomp_notif *req = malloc(req_size);
  if (!req) abort();
  for (;;) {
    memset(req, 0, req_size);
    if (ioctl(listener_fd, SECCOMP_IOCTL_NOTIF_RECV, req) == 0) {
      handle(req);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != ENOENT) {
      report_error("receive");
      return NULL;
    }
    /* ENOENT: the caller died before its notification was read, or no process is left under the
     * filter (then RECV fails at once for ever; the listener reports POLLHUP). */
    struct pollfd fds[1] = {{listener_fd, POLLIN, 0}};
    if (poll(fds, 1, -1) < 0 && errno != EINTR) return NULL;
    if (fds[0].revents & (POLLHUP | POLLERR | POLLNVAL)) return NULL;
  }
}

/* The pool (small stacks: an open each) and the listener (the default stack: handle() keeps
 * several PATH_MAX buffers per level of a path's resolution), each with its id recorded. */
static int start_threads(void) {
  for (size_t i = 0; i < WORKERS; i++) {
    int e = start_detached(worker, (void *)(uintptr_t)i, 128 * 1024);
    if (e) return e;
  }
  int e = start_detached(listener, NULL, 0);
  if (e) return e;
  while (__atomic_load_n(&threads_started, __ATOMIC_SEQ_CST) < WORKERS + 1) usleep(100);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "--probe") == 0) return probe();
  int program_at = -1;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--channel") == 0 && i + 1 < argc) channel_fd = atoi(argv[++i]);
    else if (strcmp(argv[i], "--") == 0) {
      program_at = i + 1;
      break;
    }
  }
  if (program_at < 0 || program_at >= argc || channel_fd < 0) {
    fprintf(stderr, "usage: conch-guard --channel <fd> -- <program> [args...]\n       conch-guard --probe\n");
    return 2;
  }
  fcntl(channel_fd, F_SETFD, FD_CLOEXEC);
  signal(SIGPIPE, SIG_IGN);
  /* The policy first: the program's first syscall is judged by it. */
  for (;;) {
    int r = read_policy_record();
    if (r < 0) {
      fprintf(stderr, "conch-guard: the host closed the channel before sending a policy\n");
      return 70;
    }
    if (r == 1) break;
  }
  unshare(CLONE_FS); /* this thread's umask is its own (it is set per call) */
  umask(022);
  if (getpid() != getsid(0)) setsid();
  prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  sigprocmask(SIG_BLOCK, &mask, NULL);
  int sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  int sv[2];
  if (sigfd < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    report_error("start");
    return 71;
  }
  pid_t guard = getpid();
  /* The pool's threads and the listener exist before the fork: the filter names every thread id of the guard. */
  int thread_error = start_threads();
  if (thread_error != 0) {
    errno = thread_error;
    report_error("threads");
    return 71;
  }
  protected_pids[0] = 1;
  protected_pids[1] = guard;
  protected_pid_count = 2;
  guarded_tids[0] = 1;
  guarded_tids[1] = guard;
  guarded_tid_count = 2;
  for (size_t i = 0; i < WORKERS; i++) guarded_tids[guarded_tid_count++] = worker_tids[i];
  guarded_tids[guarded_tid_count++] = listener_tid;
  pid_t child = fork();
  if (child < 0) {
    report_error("fork");
    return 71;
  }
  if (child == 0) {
    /* The program's side: no signal blocked, no channel, the filter, then exec. */
    sigprocmask(SIG_UNBLOCK, &mask, NULL);
    close(sv[0]);
    close(channel_fd);
    pid_t self = getpid();
    protected_pids[protected_pid_count++] = self;
    supervisor_pid = self;
    static struct program prog;
    build_filter(&prog);
    int fd = install_filter(&prog);
    if (fd < 0) {
      char text[128];
      int n = snprintf(text, sizeof text, "conch-guard: the seccomp filter could not be installed: %s\n", strerror(errno));
      if (n > 0 && write(2, text, (size_t)n) < 0) _exit(72);
      _exit(72);
    }
    if (send_fd(sv[1], fd) != 0) _exit(72);
    close(fd);
    close(sv[1]);
    execvp(argv[program_at], argv + program_at);
    _exit(127);
  }
  protected_pids[protected_pid_count++] = child;
  supervisor_pid = child;
  close(sv[1]);
  listener_fd = recv_fd(sv[0]);
  close(sv[0]);
  if (listener_fd < 0) {
    int status;
    waitpid(child, &status, 0);
    send_text('e', "the program could not install the seccomp filter");
    return WIFEXITED(status) ? WEXITSTATUS(status) : 72;
  }
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  close_other_fds(channel_fd, listener_fd, sigfd);
  root_fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root_fd < 0) {
    report_error("open /");
    return 71;
  }
  ask_sync_wake();
  {
    /* Features: comma-separated, no spaces (the host splits the record on spaces). */
    char started[128];
    int killable = (filter_flags & SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV) != 0;
    snprintf(started, sizeof started, "%d %d %s%s%s", guard, child, killable ? "wait-killable" : "",
             killable && sync_wake ? "," : "", sync_wake ? "sync-wake" : "");
    send_text('S', started);
  }
  struct seccomp_notif_sizes sizes;
  if (syscall(__NR_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) != 0) {
    report_error("notif sizes");
    return 71;
  }
  size_t req_size = sizes.seccomp_notif > sizeof(struct seccomp_notif) ? sizes.seccomp_notif : sizeof(struct seccomp_notif);
  pthread_mutex_lock(&listener_lock);
  listener_req_size = req_size;
  pthread_cond_signal(&listener_cond);
  pthread_mutex_unlock(&listener_lock);
  int channel_open = 1;
  for (;;) {
    struct pollfd fds[2] = {{sigfd, POLLIN, 0}, {channel_open ? channel_fd : -1, POLLIN, 0}};
    int ready = poll(fds, 2, -1);
    if (ready < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents & POLLIN) {
      struct signalfd_siginfo info;
      while (read(sigfd, &info, sizeof info) > 0) {
      }
      int status;
      pid_t done;
      while ((done = waitpid(-1, &status, WNOHANG)) > 0) {
        if (done == child) {
          /* The program ended: so does the sandbox (bwrap's init exits with us; the kernel kills the rest). */
          if (WIFEXITED(status)) return WEXITSTATUS(status);
          return 128 + WTERMSIG(status);
        }
      }
    }
    if (fds[1].revents & (POLLIN | POLLHUP)) {
      /* Policy updates; a closed channel (the host went away) leaves the last policy in force. */
      int r = read_policy_record();
      if (r < 0) channel_open = 0;
    }
  }
  return 0;
}
