/*
 * siesta-fs: the sandbox's workspace file operations, confined to /mnt/work.
 *
 * The service runs this inside a conversation's container (docker exec) for
 * writeFile, readFile, listFiles, publishFiles and staging. Every path is
 * resolved by the kernel with openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
 * from the workspace root, so neither "..", an absolute symlink nor a symlink
 * that climbs out can make an operation touch anything outside /mnt/work, and
 * there is no window between a check and the use of a path. Where openat2 is
 * missing (older gVisor), walk_beneath does the same one component at a time.
 *
 *   siesta-fs read  PATH MAX_BYTES [strict]   file to stdout (at most MAX_BYTES;
 *                                             "strict": refuse larger files)
 *   siesta-fs write PATH MAX_BYTES            stdin to the file, atomically
 *                                             (parent folders are created)
 *   siesta-fs list  PATH MAX_ENTRIES          "TYPE SIZE NAME\0" per entry,
 *                                             sorted by name (TYPE: d f l o)
 *   siesta-fs stat  PATH                      "TYPE SIZE" of the entry
 *   siesta-fs watch ABSPATH RECURSIVE [NETWORK]  "EVENT\tNAME\0" per change under the
 *                                             folder, until killed (E2B's watchDir); a
 *                                             folder on NFS, CIFS, SMB or FUSE only
 *                                             with NETWORK "1" (envd's allowNetworkMounts)
 *   siesta-fs setmeta PATH [KEY VALUE]...     the file's metadata (user.e2b.KEY xattrs)
 *                                             replaced by these pairs (none: cleared)
 *   siesta-fs getmeta PATH MAX_BYTES MAX_KEYS  "META\0": the file's metadata, encoded
 *   siesta-fs entries FIELDS MAX_BYTES MAX_KEYS PROGRAM ARG...
 *                                             PROGRAM's NUL-ended records (find -printf),
 *                                             each as "META\tRECORD\0" with the metadata
 *                                             of the path after its FIELDS-th tab; exits
 *                                             as PROGRAM does
 *   siesta-fs connect PORT                    a TCP connection to 127.0.0.1:PORT (else
 *                                             [::1]:PORT): stdin to it, it to stdout
 *
 * watch, setmeta, getmeta and entries are not confined to the workspace: the
 * service runs them as the sandbox's user (setpriv), as it runs find and cat for
 * E2B's files, so the kernel's permission checks decide what they may touch.
 * EVENT is create, write, remove, rename (the old name; the new one is a create)
 * or chmod; NAME is relative to the watched folder ("overflow\t\0": the kernel
 * dropped events). entries says nothing on stderr when it succeeds: PROGRAM's
 * stderr and exit status are what the caller reads.
 *
 * connect is how the service reaches a sandbox's ports without a network interface:
 * each proxied connection is one such process, run over the agent's channel. Once
 * connected it says "siesta-fs: connected PORT" on stderr (the service waits for
 * that line before it sends anything); a refused connection exits 111 (ECONNREFUSED).
 * EOF on stdin half-closes the socket (shutdown SHUT_WR); the process ends when the
 * server closes its side.
 *
 * META is "KEY=VALUE&..." in the order of the keys, each byte outside 0x20-0x7e and
 * each of "%&=" as %XX: any bytes a command in the sandbox stored come through.
 * Reading keeps to MAX_KEYS keys and MAX_BYTES bytes (the xattr names, "user.e2b."
 * included, plus values, as envd counts them): keys past either are left out, so a
 * file given thousands of xattrs inside the sandbox costs the service no more. The
 * service checks what it writes against the same limits before it writes.
 *
 * The last line on stderr is "siesta-fs: ok key=value..." or
 * "siesta-fs: CODE detail"; the exit status says the same (see enum status).
 * Built static so it runs in any image: gcc -static -O2 -o siesta-fs siesta-fs.c
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#define WORKSPACE "/mnt/work"
#define CHUNK 65536

enum status {
    OK = 0,
    NOT_FOUND = 10,
    OUTSIDE = 11,        /* resolution would leave the workspace */
    NOT_A_FILE = 12,     /* a directory or something else that is not a regular file */
    NOT_A_DIRECTORY = 13,
    TOO_LARGE = 14,
    IO_ERROR = 15,
    USAGE = 16,
    NETWORK_MOUNT = 17,  /* watch: the folder is on a network file system, not allowed */
    REFUSED = 111,       /* connect: nothing listens on the port (ECONNREFUSED) */
};

static const char *status_name(enum status s) {
    switch (s) {
    case OK: return "ok";
    case NOT_FOUND: return "not_found";
    case OUTSIDE: return "outside";
    case NOT_A_FILE: return "not_a_file";
    case NOT_A_DIRECTORY: return "not_a_directory";
    case TOO_LARGE: return "too_large";
    case IO_ERROR: return "io_error";
    case NETWORK_MOUNT: return "network_mount";
    case REFUSED: return "refused";
    default: return "usage";
    }
}

static int finish(enum status s, const char *fmt, ...) {
    va_list args;
    fprintf(stderr, "siesta-fs: %s ", status_name(s));
    va_start(args, fmt);
    vfprintf(stderr, fmt, args);
    va_end(args);
    fputc('\n', stderr);
    return s;
}

static enum status from_errno(int err) {
    switch (err) {
    case ENOENT: return NOT_FOUND;
    case EXDEV: case ELOOP: return OUTSIDE;
    case EISDIR: return NOT_A_FILE;
    case ENOTDIR: return NOT_A_DIRECTORY;
    default: return IO_ERROR;
    }
}

#define MAX_DEPTH 256
#define MAX_LINKS 40

/* Without openat2 (gVisor releases before 2023, kernels before 5.6): the same
 * confinement by hand. One component at a time, each opened with O_NOFOLLOW from
 * the folder before it; symlinks are followed here (relative ones only, at most
 * MAX_LINKS), ".." pops a folder and never past the root. A symlink swapped in
 * between our look and our open makes the open fail (ELOOP): refused, never
 * followed. */
static int walk_beneath(int root, const char *path, int flags, mode_t mode) {
    char queue[8192], link[4096];
    if (path[0] == '/') { errno = EXDEV; return -1; }
    if (strlen(path) >= sizeof queue) { errno = ENAMETOOLONG; return -1; }
    strcpy(queue, path);
    int dirs[MAX_DEPTH], depth = 0, links = 0, result = -1;
    if ((dirs[0] = dup(root)) < 0) return -1;
    char *rest = queue;
    for (;;) {
        while (*rest == '/') rest++;
        char *end = strchr(rest, '/');
        size_t len = end ? (size_t)(end - rest) : strlen(rest);
        char name[256];
        if (len >= sizeof name) { errno = ENAMETOOLONG; break; }
        memcpy(name, rest, len);
        name[len] = '\0';
        rest += len;
        while (*rest == '/') rest++;
        int last = *rest == '\0';
        if (len == 0 || !strcmp(name, ".")) {
            if (last) { result = openat(dirs[depth], ".", flags | O_CLOEXEC, mode); break; }
            continue;
        }
        if (!strcmp(name, "..")) {
            if (depth == 0) { errno = EXDEV; break; }
            close(dirs[depth--]);
            if (last) { result = openat(dirs[depth], ".", flags | O_CLOEXEC, mode); break; }
            continue;
        }
        struct stat st;
        if (fstatat(dirs[depth], name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
            ssize_t n = readlinkat(dirs[depth], name, link, sizeof link - 1);
            if (n < 0) break;
            link[n] = '\0';
            if (link[0] == '/' || ++links > MAX_LINKS) { errno = link[0] == '/' ? EXDEV : ELOOP; break; }
            /* The link's target, then what was left: walked from the same folder. */
            char joined[8192];
            if ((size_t)snprintf(joined, sizeof joined, "%s/%s", link, rest) >= sizeof joined) {
                errno = ENAMETOOLONG;
                break;
            }
            strcpy(queue, joined);
            rest = queue;
            continue;
        }
        if (last) { result = openat(dirs[depth], name, flags | O_NOFOLLOW | O_CLOEXEC, mode); break; }
        if (depth + 1 >= MAX_DEPTH) { errno = ENAMETOOLONG; break; }
        int next = openat(dirs[depth], name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0) break;
        dirs[++depth] = next;
    }
    int saved = errno;
    while (depth >= 0) close(dirs[depth--]);
    errno = saved;
    return result;
}

static int open_beneath(int root, const char *path, int flags, mode_t mode) {
    static int no_openat2;
    struct open_how how = {
        .flags = (unsigned long long)flags | O_CLOEXEC,
        .mode = (flags & O_CREAT) ? mode : 0,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
    };
    if (!no_openat2) {
        int fd = (int)syscall(SYS_openat2, root, path, &how, sizeof how);
        if (fd >= 0 || errno != ENOSYS) return fd;
        no_openat2 = 1;
    }
    return walk_beneath(root, path, flags, mode);
}

static int fail_errno(const char *what, const char *path) {
    int err = errno;
    return finish(from_errno(err), "%s %s: %s", what, path, strerror(err));
}

static char type_of(mode_t mode) {
    if (S_ISDIR(mode)) return 'd';
    if (S_ISREG(mode)) return 'f';
    if (S_ISLNK(mode)) return 'l';
    return 'o';
}

static int write_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

static int do_read(int root, const char *path, long long max, int strict) {
    /* O_NONBLOCK: opening a FIFO must not hang; fstat then refuses it. */
    int fd = open_beneath(root, path, O_RDONLY | O_NONBLOCK, 0);
    if (fd < 0) return fail_errno("open", path);
    struct stat st;
    if (fstat(fd, &st) < 0) return fail_errno("stat", path);
    if (!S_ISREG(st.st_mode))
        return finish(NOT_A_FILE, "type=%c %s is not a regular file", type_of(st.st_mode), path);
    if (strict && st.st_size > max)
        return finish(TOO_LARGE, "size=%lld limit=%lld", (long long)st.st_size, max);
    static char buf[CHUNK];
    long long left = max;
    while (left > 0) {
        ssize_t n = read(fd, buf, left < CHUNK ? (size_t)left : CHUNK);
        if (n < 0) {
            if (errno == EINTR) continue;
            return fail_errno("read", path);
        }
        if (n == 0) break;
        if (write_all(STDOUT_FILENO, buf, (size_t)n) < 0) return fail_errno("write", "stdout");
        left -= n;
    }
    return finish(OK, "size=%lld", (long long)st.st_size);
}

/* Opens the folder PATH (relative to root), creating missing folders on the way. */
static int open_or_make_dir(int root, const char *path) {
    int fd = open_beneath(root, path, O_DIRECTORY | O_RDONLY, 0);
    if (fd >= 0 || errno != ENOENT) return fd;
    char partial[4096];
    if (strlen(path) >= sizeof partial) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(partial, path);
    /* Walk the components: create each missing one inside its (already confined) parent. */
    for (char *slash = partial;; slash++) {
        slash = strchr(slash, '/');
        if (slash) *slash = '\0';
        int dir = open_beneath(root, partial, O_DIRECTORY | O_RDONLY, 0);
        if (dir < 0 && errno == ENOENT) {
            char *base = strrchr(partial, '/');
            const char *name = base ? base + 1 : partial;
            int parent;
            if (base) {
                *base = '\0';
                parent = open_beneath(root, partial, O_DIRECTORY | O_RDONLY, 0);
                *base = '/';
            } else {
                parent = dup(root);
            }
            if (parent < 0) return -1;
            if (mkdirat(parent, name, 0755) < 0 && errno != EEXIST) {
                close(parent);
                return -1;
            }
            close(parent);
            dir = open_beneath(root, partial, O_DIRECTORY | O_RDONLY, 0);
        }
        if (dir < 0) return -1;
        if (!slash) return dir;
        close(dir);
        *slash = '/';
    }
}

static int do_write(int root, const char *path, long long max) {
    char parent_path[4096];
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    if (!*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return finish(USAGE, "not a file name: %s", path);
    size_t parent_len = slash ? (size_t)(slash - path) : 1;
    if (parent_len >= sizeof parent_path) return finish(USAGE, "path too long");
    if (slash) {
        memcpy(parent_path, path, parent_len);
        parent_path[parent_len] = '\0';
    } else {
        strcpy(parent_path, ".");
    }
    int dir = open_or_make_dir(root, parent_path);
    if (dir < 0) return fail_errno("folder", parent_path);
    struct stat existing;
    if (fstatat(dir, name, &existing, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(existing.st_mode))
        return finish(NOT_A_FILE, "type=d %s is a folder", path);

    char temp[64];
    snprintf(temp, sizeof temp, ".siesta-fs-%ld.tmp", (long)getpid());
    int fd = openat(dir, temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return fail_errno("create", path);
    static char buf[CHUNK];
    long long total = 0;
    for (;;) {
        ssize_t n = read(STDIN_FILENO, buf, CHUNK);
        if (n < 0) {
            if (errno == EINTR) continue;
            unlinkat(dir, temp, 0);
            return fail_errno("read", "stdin");
        }
        if (n == 0) break;
        total += n;
        if (total > max) {
            unlinkat(dir, temp, 0);
            return finish(TOO_LARGE, "size>%lld limit=%lld", max, max);
        }
        if (write_all(fd, buf, (size_t)n) < 0) {
            unlinkat(dir, temp, 0);
            return fail_errno("write", path);
        }
    }
    if (close(fd) < 0 || renameat(dir, temp, dir, name) < 0) {
        int err = errno;
        unlinkat(dir, temp, 0);
        errno = err;
        return fail_errno("rename", path);
    }
    return finish(OK, "size=%lld", total);
}

struct entry {
    char *name;
    char type;
    long long size;
};

static int by_name(const void *a, const void *b) {
    return strcmp(((const struct entry *)a)->name, ((const struct entry *)b)->name);
}

static int do_list(int root, const char *path, long long max) {
    int fd = open_beneath(root, path, O_DIRECTORY | O_RDONLY, 0);
    if (fd < 0) return fail_errno("open", path);
    DIR *dir = fdopendir(fd);
    if (!dir) return fail_errno("list", path);
    size_t count = 0, capacity = 64;
    struct entry *entries = malloc(capacity * sizeof *entries);
    struct dirent *d;
    while (entries && (d = readdir(dir)) != NULL) {
        if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0) continue;
        struct stat st;
        if (fstatat(dirfd(dir), d->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) continue;
        if (count == capacity) {
            capacity *= 2;
            struct entry *grown = realloc(entries, capacity * sizeof *entries);
            if (!grown) break;
            entries = grown;
        }
        entries[count].name = strdup(d->d_name);
        entries[count].type = type_of(st.st_mode);
        entries[count].size = (long long)st.st_size;
        count++;
    }
    if (!entries) return finish(IO_ERROR, "out of memory");
    qsort(entries, count, sizeof *entries, by_name);
    for (size_t i = 0; i < count && (long long)i < max; i++)
        printf("%c %lld %s%c", entries[i].type, entries[i].size, entries[i].name, '\0');
    fflush(stdout);
    return finish(OK, "total=%zu", count);
}

static int do_stat(int root, const char *path) {
    int fd = open_beneath(root, path, O_PATH, 0);
    if (fd < 0) return fail_errno("open", path);
    struct stat st;
    if (fstat(fd, &st) < 0) return fail_errno("stat", path);
    printf("%c %lld", type_of(st.st_mode), (long long)st.st_size);
    fflush(stdout);
    return finish(OK, "type=%c size=%lld", type_of(st.st_mode), (long long)st.st_size);
}

#define MAX_WATCHES 8192
static char *watched[MAX_WATCHES];   /* by watch descriptor: the folder relative to the root */
static int watching;                 /* folders watched now */

/* Watches ``relative`` and, when recursive, every folder under it. ``announce`` is set
 * for a folder made after the watch started: whatever was made in it before its own
 * watch was added (``mkdir d && echo x > d/f`` is faster than the event's reader) would
 * otherwise never be reported, so each entry found is reported as made. The watch is
 * added before the folder is read: an entry made in between may be reported twice,
 * never missed. */
static void watch_tree(int fd, const char *root, const char *relative, int recursive,
                       int announce) {
    char full[PATH_MAX];
    if (snprintf(full, sizeof full, "%s%s%s", root, *relative ? "/" : "", relative) >= (int)sizeof full)
        return;
    int wd = inotify_add_watch(fd, full, IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM |
                                         IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF | IN_ONLYDIR);
    if (wd < 0) return;
    if (wd >= MAX_WATCHES) {     /* descriptors only grow: past the table, no more folders */
        inotify_rm_watch(fd, wd);
        return;
    }
    if (!watched[wd]) watching++;
    free(watched[wd]);
    watched[wd] = strdup(relative);
    if (!recursive) return;
    DIR *dir = opendir(full);
    if (!dir) return;
    struct dirent *e;
    while ((e = readdir(dir))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (!announce && e->d_type != DT_DIR) continue;
        char child[PATH_MAX];
        if (snprintf(child, sizeof child, "%s%s%s", relative, *relative ? "/" : "", e->d_name) >=
            (int)sizeof child)
            continue;
        if (announce) printf("create\t%s%c", child, 0);
        if (e->d_type == DT_DIR) watch_tree(fd, root, child, recursive, announce);
    }
    closedir(dir);
}

static int on_network_mount(const char *path);

static int do_watch(const char *root, int recursive, int network) {
    struct stat st;
    if (stat(root, &st) < 0) return fail_errno("stat", root);
    if (!S_ISDIR(st.st_mode)) return finish(NOT_A_DIRECTORY, "%s", root);
    if (!network && on_network_mount(root))
        return finish(NETWORK_MOUNT, "cannot watch path on network filesystem: %s", root);
    int fd = inotify_init1(IN_CLOEXEC);
    if (fd < 0) return fail_errno("inotify_init1", root);
    watch_tree(fd, root, "", recursive, 0);
    if (!watching) return fail_errno("inotify_add_watch", root);
    printf("ready\t%c", 0);
    fflush(stdout);
    char buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        ssize_t got = read(fd, buf, sizeof buf);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return fail_errno("read", root);
        for (char *p = buf; p < buf + got;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            p += sizeof *ev + ev->len;
            if (ev->mask & IN_Q_OVERFLOW) {
                printf("overflow\t%c", 0);
                continue;
            }
            const char *folder = ev->wd >= 0 && ev->wd < MAX_WATCHES ? watched[ev->wd] : NULL;
            if (!folder) continue;
            if (ev->mask & IN_DELETE_SELF) {
                if (!*folder) return finish(NOT_FOUND, "%s was removed", root);
                continue;
            }
            if (ev->mask & IN_IGNORED) {   /* the folder is gone: its descriptor too */
                free(watched[ev->wd]);
                watched[ev->wd] = NULL;
                watching--;
                continue;
            }
            if (!ev->len) continue;
            const char *kind = ev->mask & (IN_CREATE | IN_MOVED_TO) ? "create"
                             : ev->mask & IN_MODIFY ? "write"
                             : ev->mask & IN_DELETE ? "remove"
                             : ev->mask & IN_MOVED_FROM ? "rename"
                             : ev->mask & IN_ATTRIB ? "chmod" : NULL;
            if (!kind) continue;
            char name[PATH_MAX];
            snprintf(name, sizeof name, "%s%s%s", folder, *folder ? "/" : "", ev->name);
            printf("%s\t%s%c", kind, name, 0);
            if (recursive && (ev->mask & IN_ISDIR) && (ev->mask & (IN_CREATE | IN_MOVED_TO)))
                watch_tree(fd, root, name, recursive, 1);
        }
        fflush(stdout);
    }
}

/* ---- metadata: user.e2b.* extended attributes (envd 0.6.2's file metadata) ---- */

#define META_PREFIX "user.e2b."
#define XATTR_BYTES 65536        /* the kernel's cap on a list of names and on one value */

static int is_meta(const char *name) {
    return strncmp(name, META_PREFIX, sizeof META_PREFIX - 1) == 0 && name[sizeof META_PREFIX - 1];
}

static int by_string(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The file's user.e2b.* names, sorted, in ``names`` (pointers into ``list``); -1 when
 * they cannot be listed (no such file, no xattrs on this file system: no metadata). */
static int meta_names(const char *path, char *list, char **names, int most) {
    ssize_t got = listxattr(path, list, XATTR_BYTES);
    if (got < 0) return -1;
    int count = 0;
    for (char *name = list; name < list + got && count < most; name += strlen(name) + 1)
        if (is_meta(name)) names[count++] = name;
    qsort(names, (size_t)count, sizeof *names, by_string);
    return count;
}

static void put_encoded(FILE *out, const char *bytes, size_t len) {
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)bytes[i];
        if (c < 0x20 || c > 0x7e || c == '%' || c == '&' || c == '=')
            fprintf(out, "%%%02X", c);
        else
            fputc(c, out);
    }
}

/* Writes the encoded metadata of ``path`` (no terminator): at most max_keys keys and
 * max_bytes bytes, counted as envd counts them. */
static void put_meta(FILE *out, const char *path, long long max_bytes, long long max_keys) {
    static char list[XATTR_BYTES], value[XATTR_BYTES];
    static char *names[XATTR_BYTES / 2];
    int count = meta_names(path, list, names, (int)(sizeof names / sizeof *names));
    long long used = 0, kept = 0;
    for (int i = 0; i < count && kept < max_keys; i++) {
        ssize_t len = getxattr(path, names[i], value, sizeof value);
        if (len < 0) continue;   /* removed since, or unreadable: not shown */
        long long cost = (long long)strlen(names[i]) + len;
        if (used + cost > max_bytes) continue;
        used += cost;
        if (kept++) fputc('&', out);
        const char *key = names[i] + sizeof META_PREFIX - 1;
        put_encoded(out, key, strlen(key));
        fputc('=', out);
        put_encoded(out, value, (size_t)len);
    }
}

static int do_setmeta(const char *path, int pairs, char **args) {
    static char list[XATTR_BYTES];
    static char *names[XATTR_BYTES / 2];
    struct stat st;
    if (stat(path, &st) < 0) return fail_errno("stat", path);
    int count = meta_names(path, list, names, (int)(sizeof names / sizeof *names));
    if (count < 0 && errno != ENOTSUP) return fail_errno("listxattr", path);
    /* Replaced, as envd does: a key the new set leaves out is removed (an overwrite
     * keeps a file's xattrs, and must not keep stale metadata). */
    for (int i = 0; i < count; i++) {
        int kept = 0;
        for (int j = 0; j < pairs && !kept; j++)
            kept = strcmp(names[i] + sizeof META_PREFIX - 1, args[2 * j]) == 0;
        if (!kept && removexattr(path, names[i]) < 0 && errno != ENODATA)
            return fail_errno("removexattr", path);
    }
    for (int j = 0; j < pairs; j++) {
        char name[256];
        if ((size_t)snprintf(name, sizeof name, "%s%s", META_PREFIX, args[2 * j]) >= sizeof name)
            return finish(TOO_LARGE, "key %s: a metadata key is at most %zu bytes", args[2 * j],
                          sizeof name - sizeof META_PREFIX);
        const char *value = args[2 * j + 1];
        if (setxattr(path, name, value, strlen(value), 0) < 0) {
            /* A file system without xattrs (/proc, some FUSE): envd writes the file and
             * answers the metadata it reads back, none. */
            if (errno == ENOTSUP) return finish(OK, "keys=0 unsupported");
            return fail_errno("setxattr", path);
        }
    }
    return finish(OK, "keys=%d", pairs);
}

static int do_getmeta(const char *path, long long max_bytes, long long max_keys) {
    put_meta(stdout, path, max_bytes, max_keys);
    fputc('\0', stdout);
    fflush(stdout);
    return finish(OK, "path=%s", path);
}

#define MAX_RECORD (4 * PATH_MAX + 4096)

/* One record of PROGRAM's out, with the metadata of the path its FIELDS-th tab starts. */
static void put_record(char *record, size_t len, long long fields, long long max_bytes,
                       long long max_keys) {
    record[len] = '\0';
    const char *path = record;
    for (long long i = 0; i < fields && path; i++) {
        path = memchr(path, '\t', (size_t)(record + len - path));
        if (path) path++;
    }
    if (path && len > 0) put_meta(stdout, path, max_bytes, max_keys);
    fputc('\t', stdout);
    fwrite(record, 1, len, stdout);
    fputc('\0', stdout);
}

/* Runs PROGRAM with its stdout into a pipe; each of its records comes out prefixed by
 * the metadata of the path it names. Quiet on success: PROGRAM's stderr and exit status
 * are what the caller reads. Bounded: a "record" longer than any real one (a PROGRAM
 * the sandbox replaced, printing without end) is passed on as it comes, without
 * metadata, so the caller's byte limit stops it, instead of growing here. */
static int do_entries(long long fields, long long max_bytes, long long max_keys, char **program) {
    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC) < 0) return fail_errno("pipe", program[0]);
    pid_t child = fork();
    if (child < 0) return fail_errno("fork", program[0]);
    if (child == 0) {
        dup2(pipe_fds[1], STDOUT_FILENO);
        execvp(program[0], program);
        _exit(127);
    }
    close(pipe_fds[1]);
    FILE *in = fdopen(pipe_fds[0], "r");
    if (!in) return fail_errno("fdopen", program[0]);
    static char record[MAX_RECORD + 1];
    size_t len = 0;
    int passing = 0;             /* an overlong record is being passed on raw */
    int c;
    while ((c = getc_unlocked(in)) != EOF) {
        if (c == '\0') {
            if (passing) {
                fwrite(record, 1, len, stdout);
                fputc('\0', stdout);
            } else {
                put_record(record, len, fields, max_bytes, max_keys);
            }
            len = 0;
            passing = 0;
            continue;
        }
        if (len == MAX_RECORD) {
            if (!passing) fputc('\t', stdout);
            fwrite(record, 1, len, stdout);
            len = 0;
            passing = 1;
        }
        record[len++] = (char)c;
    }
    if (len && !passing) put_record(record, len, fields, max_bytes, max_keys);
    if (len && passing) fwrite(record, 1, len, stdout);
    fclose(in);
    fflush(stdout);
    int status;
    while (waitpid(child, &status, 0) < 0)
        if (errno != EINTR) return fail_errno("wait", program[0]);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

/* envd's list (include/uapi/linux/magic.h): events there may never come. */
static int on_network_mount(const char *path) {
    struct statfs fs;
    if (statfs(path, &fs) < 0) return 0;
    switch ((unsigned long)fs.f_type) {
    case 0x6969:                 /* NFS */
    case 0xFF534D42:             /* CIFS */
    case 0x517B:                 /* SMB */
    case 0xFE534D42:             /* SMB2 */
    case 0x65735546:             /* FUSE */
        return 1;
    default:
        return 0;
    }
}

static int connect_loopback(int port) {
    struct sockaddr_in v4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct sockaddr_in6 v6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port),
                              .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&v4, sizeof v4) == 0) return fd;
    int first = errno;
    if (fd >= 0) close(fd);
    /* A server bound to ::1 only (or an IPv6-only wildcard) */
    fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&v6, sizeof v6) == 0) return fd;
    if (fd >= 0) close(fd);
    errno = first;
    return -1;
}

/* Copies what is readable on from to to; 0 at EOF, -1 on an error. */
static ssize_t relay(int from, int to, char *buf) {
    ssize_t got = read(from, buf, CHUNK);
    if (got <= 0) return got;
    for (ssize_t sent = 0; sent < got;) {
        ssize_t n = write(to, buf + sent, (size_t)(got - sent));
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        sent += n;
    }
    return got;
}

static int do_connect(const char *text) {
    char *end;
    long port = strtol(text, &end, 10);
    if (*end || port < 1 || port > 65535) return finish(USAGE, "bad port %s", text);
    int sock = connect_loopback((int)port);
    if (sock < 0) {
        if (errno == ECONNREFUSED) return finish(REFUSED, "port=%ld nothing listens", port);
        return fail_errno("connect", text);
    }
    fprintf(stderr, "siesta-fs: connected %ld\n", port);
    static char buf[CHUNK];
    struct pollfd fds[2] = {{.fd = STDIN_FILENO, .events = POLLIN}, {.fd = sock, .events = POLLIN}};
    /* Until the server is done: its EOF ends the connection; ours only half-closes it. */
    for (;;) {
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR) continue;
            return fail_errno("poll", text);
        }
        if (fds[0].revents) {
            ssize_t n = relay(STDIN_FILENO, sock, buf);
            if (n <= 0) {
                shutdown(sock, SHUT_WR);
                fds[0].fd = -1;  /* poll ignores it from now on */
            }
        }
        if (fds[1].revents) {
            ssize_t n = relay(sock, STDOUT_FILENO, buf);
            if (n == 0) break;
            if (n < 0) return errno == ECONNRESET ? finish(OK, "port=%ld reset", port)
                                                  : fail_errno("relay", text);
        }
    }
    return finish(OK, "port=%ld closed", port);
}

static long long parse_limit(const char *text) {
    char *end;
    long long value = strtoll(text, &end, 10);
    return (*end || value < 0) ? -1 : value;
}

int main(int argc, char **argv) {
    if (argc < 3) return finish(USAGE, "usage: siesta-fs read|write|list|stat|watch|setmeta|getmeta|entries|connect PATH ...");
    const char *op = argv[1], *path = argv[2];
    if (strcmp(op, "connect") == 0) return do_connect(path);
    if (strcmp(op, "watch") == 0) {
        if (path[0] != '/') return finish(USAGE, "watch takes an absolute path: %s", path);
        return do_watch(path, argc > 3 && strcmp(argv[3], "1") == 0,
                        argc > 4 && strcmp(argv[4], "1") == 0);
    }
    if (strcmp(op, "setmeta") == 0) {
        if ((argc - 3) % 2) return finish(USAGE, "setmeta takes KEY VALUE pairs");
        return do_setmeta(path, (argc - 3) / 2, argv + 3);
    }
    if (strcmp(op, "getmeta") == 0) {
        long long bytes = argc > 4 ? parse_limit(argv[3]) : -1;
        long long keys = argc > 4 ? parse_limit(argv[4]) : -1;
        if (bytes < 0 || keys < 0) return finish(USAGE, "getmeta PATH MAX_BYTES MAX_KEYS");
        return do_getmeta(path, bytes, keys);
    }
    if (strcmp(op, "entries") == 0) {
        long long fields = parse_limit(path);
        long long bytes = argc > 5 ? parse_limit(argv[3]) : -1;
        long long keys = argc > 5 ? parse_limit(argv[4]) : -1;
        if (fields < 0 || bytes < 0 || keys < 0)
            return finish(USAGE, "entries FIELDS MAX_BYTES MAX_KEYS PROGRAM ARG...");
        return do_entries(fields, bytes, keys, argv + 5);
    }
    if (!*path || path[0] == '/') return finish(OUTSIDE, "path must be relative: %s", path);
    int root = open(WORKSPACE, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
    if (root < 0) return fail_errno("open", WORKSPACE);
    if (strcmp(op, "stat") == 0) return do_stat(root, path);
    long long limit = argc > 3 ? parse_limit(argv[3]) : -1;
    if (limit < 0) return finish(USAGE, "missing or bad limit");
    if (strcmp(op, "read") == 0)
        return do_read(root, path, limit, argc > 4 && strcmp(argv[4], "strict") == 0);
    if (strcmp(op, "write") == 0) return do_write(root, path, limit);
    if (strcmp(op, "list") == 0) return do_list(root, path, limit);
    return finish(USAGE, "unknown operation %s", op);
}
