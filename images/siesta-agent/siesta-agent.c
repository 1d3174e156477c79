/*
 * siesta-agent: PID 1 of every sandbox container, and the sandbox's one channel.
 *
 * The service attaches to the container (Docker attach, Kubernetes attach) and
 * talks to this program over its stdin/stdout in the frames of PROTOCOL.md:
 * SPAWN starts a command, STDIN/STDIN_EOF feed it, OUT/EXIT report it, CANCEL,
 * PING and RESULT do what they say. As init it also reaps every orphan of the
 * container (the job tini used to do). stderr gets one line per diagnostic.
 *
 * Shape: one thread, one poll() loop. Signals arrive through a signalfd,
 * timers (timeouts, grace kills, giving up on escaped pipe holders, shutdown)
 * become the poll timeout, and everything else is a descriptor: stdin, and per
 * request the stdout/stderr pipes and the stdin pipe. Frames to stdout are
 * written with blocking writes, so a slow reader slows the agent down
 * (backpressure) instead of making it buffer. Whether a child managed to
 * exec arrives on a close-on-exec status pipe, also polled, so a child stuck
 * before exec never stalls the loop.
 *
 * Only SIGTERM (or SIGINT) from outside the sandbox stops the agent: as PID 1
 * of a namespace, a sender it can see is a sandbox process (read_signals).
 *
 * The channel belongs to the service: the agent makes itself non-dumpable
 * first thing, so the kernel refuses every sandbox process (root, but without
 * CAP_SYS_PTRACE) the links in /proc/1/fd (the channel's pipes), /proc/1/mem,
 * environ, maps, root, cwd and exe, ptrace, process_vm_readv and pidfd_getfd.
 * A forked child keeps the flag until its execve makes the command dumpable
 * again (it is the sandbox's own), and inherits none of the agent's
 * descriptors. gVisor (runsc) refuses ptrace, mem, root, cwd and exe but not
 * fd, environ or maps: there a sandbox process can still write into the
 * channel, which the service then treats as it treats any broken agent (it
 * closes that channel and attaches again).
 *
 * Bounded by design, whatever a client sends or a command does:
 *   - input: one frame buffer (the largest frame); STDIN bytes queued for a
 *     command that does not read them stop the reading of stdin at the next
 *     STDIN frame for it (4 MiB per request, 16 MiB in all);
 *   - output: with a cap, head + tail buffers of cap bytes per stream, however
 *     much is printed; without a cap every read goes straight out as OUT;
 *   - at most 64 live requests, argv at most 64 KiB and 4096 arguments,
 *     the final frames of the last 16 requests for RESULT.
 *
 * Given a command (`docker run IMAGE bash`), it is only an init for that
 * command instead, as tini was: it runs it, passes it the signals it gets, reaps
 * orphans, and exits with its status. The service never starts it that way.
 *
 * Built static so it runs in any image:
 *   gcc -static -O2 -Wall -Wextra -Werror -o siesta-agent siesta-agent.c
 * SIESTA_AGENT_WORKDIR overrides the commands' working directory (/mnt/work),
 * which is how it is tested outside a container.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROTOCOL_VERSION 2
#define WORKSPACE "/mnt/work"

#define HEADER 13                         /* u32 length, u8 type, u64 id */
#define MAX_LENGTH (1048576u + 9)         /* largest value of the length field */
#define MAX_PAYLOAD (MAX_LENGTH - 9)
/* EXIT carries 65 bytes of fields plus both streams' head and tail; with full
 * buffers it must still fit in one frame. */
#define EXIT_FIXED 65
#define MAX_CAP ((MAX_PAYLOAD - EXIT_FIXED) / 2)
#define CHUNK 65536                       /* one read of a command's output */
#define MAX_LIVE 64                       /* requests not yet killed */
#define MAX_SLOTS 128                     /* killed ones linger until reaped */
#define MAX_ARGV_BYTES 65536              /* arguments plus their NULs */
#define MAX_ARGC 4096
#define INPUT_HIGH (4u << 20)             /* queued STDIN bytes per request */
#define INPUT_TOTAL_HIGH (16u << 20)      /* ... and for all requests */
#define CHUNK_OVERHEAD 64                 /* what a queued STDIN frame costs beyond its bytes */
#define KEPT 16
#define ABANDON_MS 2000                   /* after SIGKILL, stop waiting for escaped pipe holders */
#define SHUTDOWN_MS 2000

enum frame_type {
    T_SPAWN = 1, T_STDIN = 2, T_STDIN_EOF = 3, T_CANCEL = 4, T_PING = 5, T_RESULT = 6,
    T_SIGNAL = 7, T_RESIZE = 8,
    T_OUT = 10, T_EXIT = 11, T_PONG = 12, T_ERROR = 13, T_STARTED = 14,
};

/* DETACHED (protocol 2): a process of its own that outlives the call that started
 * it (E2B's processes); KILL_RUNNING and CANCEL 0 leave it alone, and STARTED
 * tells its pid. PTY (protocol 2): its stdin, stdout and stderr are a new
 * terminal (its controlling one), whose output is stream 1 and whose size
 * RESIZE sets. */
enum spawn_flag {
    FLAG_STDIN = 1, FLAG_STREAM = 2, FLAG_KILL_RUNNING = 4, FLAG_DETACHED = 8, FLAG_PTY = 16,
};
#define ALL_FLAGS (FLAG_STDIN | FLAG_STREAM | FLAG_KILL_RUNNING | FLAG_DETACHED | FLAG_PTY)


struct capture {                 /* one output stream of a request */
    int fd;                      /* read end of the pipe; -1 after EOF */
    uint64_t total;
    uint64_t streamed;           /* bytes sent as OUT while a cap applies */
    unsigned char *head, *tail;  /* parts of the request's capture buffer */
    uint32_t head_cap, head_len;
    uint32_t tail_cap, tail_len, tail_pos;  /* tail is a ring ending at tail_pos */
};

struct chunk {                   /* one queued STDIN frame */
    struct chunk *next;
    size_t len, off;
    unsigned char data[];
};

struct request {
    int used;
    unsigned gen;                /* tells a reused slot from the one poll() saw */
    uint64_t id;
    pid_t pid;                   /* leader, and so process group id */
    int starting;                /* status pipe open: exec has not happened or failed yet */
    int status_fd;               /* close-on-exec pipe from the child: EOF means exec worked */
    int reaped, status;
    uint32_t cap, flags, grace_ms;
    int timed_out;               /* SIGTERM sent at the deadline */
    int killed;                  /* SIGKILL sent: timeout grace, CANCEL, KILL_RUNNING */
    int64_t started, term_at, kill_at, abandon_at;   /* 0: not set */
    uint64_t oom_kills_at_start, pids_refusals_at_start;
    struct capture out[2];       /* stdout, stderr */
    unsigned char *buffer;       /* head + tail of both streams, 2 * cap bytes */
    int in_fd;                   /* write end of the command's stdin; -1: none or closed */
    int pty_fd;                  /* the terminal's master side (PTY), for RESIZE; else -1 */
    int in_accept;               /* STDIN frames are still wanted */
    int in_eof;                  /* close in_fd once the queue is written */
    struct chunk *in_first, *in_last;
    size_t in_queued;            /* bytes plus CHUNK_OVERHEAD per chunk */
};

static struct request slots[MAX_SLOTS];
static int64_t now;
static pid_t self_pid;
static const char *workdir = WORKSPACE;
static int devnull = -1;
static int sigfd = -1;
static int stdin_open = 1;
static int input_blocked;        /* the next frame waits for a command to read its stdin */
static size_t input_total;
static int shutting_down;
static int64_t shutdown_at;
static int stdout_failing;
static uint64_t ignored_logged;  /* signals already reported as ignored */

static unsigned char inbuf[4 + MAX_LENGTH];
static size_t in_start, in_end;
static uint64_t in_skip;         /* bytes of an oversized or bogus frame still to drop */
static unsigned char outbuf[4 + MAX_LENGTH];
static unsigned char readbuf[CHUNK];
static char argv_bytes[MAX_ARGV_BYTES];
static char *argv_ptrs[MAX_ARGC + 1];

static struct kept {             /* final frames (EXIT, or ERROR of a failed start) */
    uint64_t id;
    unsigned char *frame;
    size_t len;
} kept[KEPT];
static unsigned kept_next;

/* ---- small helpers ---- */

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...) {
    /* One write per line, so lines from here never interleave mid-way. */
    char line[512];
    int n = snprintf(line, sizeof line, "siesta-agent: ");
    va_list args;
    va_start(args, fmt);
    n += vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, args);
    va_end(args);
    if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
    line[n++] = '\n';
    ssize_t ignored = write(STDERR_FILENO, line, (size_t)n);
    (void)ignored;
}

static int64_t clock_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const unsigned char *p) {
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static void set_nonblock(int fd) {
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static void close_fd(int *fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

/* ---- frames out ---- */

static void write_stdout(const unsigned char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(STDOUT_FILENO, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) {
                /* Someone made the pipe non-blocking; we still want backpressure. */
                struct pollfd pfd = { .fd = STDOUT_FILENO, .events = POLLOUT };
                poll(&pfd, 1, -1);
                continue;
            }
            /* Nobody to tell: drop the frame, say so once per failing stretch. */
            if (!stdout_failing) note("stdout: %s; dropping frames", strerror(errno));
            stdout_failing = 1;
            return;
        }
        stdout_failing = 0;
        p += w;
        n -= (size_t)w;
    }
}

/* Frames are assembled in outbuf: header here, payload by the caller. */
static unsigned char *frame_begin(enum frame_type type, uint64_t id) {
    outbuf[4] = (unsigned char)type;
    put64(outbuf + 5, id);
    return outbuf + HEADER;
}

static size_t frame_send(unsigned char *end) {
    size_t len = (size_t)(end - outbuf);
    put32(outbuf, (uint32_t)(len - 4));
    write_stdout(outbuf, len);
    return len;
}

static void keep_frame(uint64_t id, size_t len) {
    struct kept *k = &kept[kept_next % KEPT];
    unsigned char *copy = malloc(len);
    if (!copy) return;           /* RESULT will answer ENOENT; nothing else suffers */
    free(k->frame);
    memcpy(copy, outbuf, len);
    *k = (struct kept){ .id = id, .frame = copy, .len = len };
    kept_next++;
}

static size_t send_error(uint64_t id, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static size_t send_error(uint64_t id, int err, const char *fmt, ...) {
    unsigned char *p = frame_begin(T_ERROR, id);
    put32(p, (uint32_t)err);
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf((char *)p + 8, 1024, fmt, args);
    va_end(args);
    if (n < 0) n = 0;
    if (n > 1023) n = 1023;
    put32(p + 4, (uint32_t)n);
    return frame_send(p + 8 + n);
}

static void send_out(uint64_t id, int stream, const unsigned char *data, size_t n) {
    unsigned char *p = frame_begin(T_OUT, id);
    *p++ = (unsigned char)stream;
    memcpy(p, data, n);
    frame_send(p + n);
}

/* ---- requests ---- */

static struct request *find_request(uint64_t id) {
    for (int i = 0; i < MAX_SLOTS; i++)
        if (slots[i].used && slots[i].id == id) return &slots[i];
    return NULL;
}

static int count_requests(int live_only) {
    int n = 0;
    for (int i = 0; i < MAX_SLOTS; i++)
        if (slots[i].used && !(live_only && slots[i].killed)) n++;
    return n;
}

static void signal_group(struct request *r, int sig) {
    /* The group may already be empty (its members escaped or exited): ESRCH is fine. */
    kill(-r->pid, sig);
    /* Before exec the child may not have called setsid yet (say, it was stopped). */
    if (r->starting) kill(r->pid, sig);
}

static void kill_request(struct request *r) {
    signal_group(r, SIGKILL);
    r->killed = 1;
    r->term_at = r->kill_at = 0;
    if (!r->abandon_at) r->abandon_at = now + ABANDON_MS;
}

static void drop_input(struct request *r) {
    while (r->in_first) {
        struct chunk *c = r->in_first;
        r->in_first = c->next;
        free(c);
    }
    r->in_last = NULL;
    input_total -= r->in_queued;
    r->in_queued = 0;
    r->in_accept = 0;
    close_fd(&r->in_fd);
}

/* Copies a capture's tail ring, oldest byte first. */
static unsigned char *put_tail(unsigned char *p, const struct capture *c) {
    put32(p, c->tail_len);
    p += 4;
    if (c->tail_len == 0) return p;
    uint32_t start = (c->tail_pos + c->tail_cap - c->tail_len) % c->tail_cap;
    uint32_t first = c->tail_len < c->tail_cap - start ? c->tail_len : c->tail_cap - start;
    memcpy(p, c->tail + start, first);
    memcpy(p + first, c->tail, c->tail_len - first);
    return p + c->tail_len;
}

/* Limits the sandbox hit, read from its cgroup (v2 files first, then v1): how
 * often the kernel killed for memory, how often a fork met the pids limit. */
static const char *const OOM_FILES[] = {"/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control", 0};
static const char *const PIDS_FILES[] = {"/sys/fs/cgroup/pids.events", "/sys/fs/cgroup/pids/pids.events", 0};

static uint64_t cgroup_counter(const char *const files[], const char *key) {
    char text[4096];
    size_t key_len = strlen(key);
    for (int i = 0; files[i]; i++) {
        int fd = open(files[i], O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ssize_t n = read(fd, text, sizeof text - 1);
        close(fd);
        if (n <= 0) continue;
        text[n] = 0;
        for (char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : 0)
            if (!strncmp(line, key, key_len) && line[key_len] == ' ')
                return strtoull(line + key_len + 1, 0, 10);
    }
    return 0;
}

/* Room left for writing: 0 when either the blocks or the inodes are used up. */
static uint64_t free_bytes(const char *path) {
    struct statvfs st;
    if (statvfs(path, &st) != 0) return UINT64_MAX;
    if (st.f_files && !st.f_favail) return 0;
    return (uint64_t)st.f_bavail * st.f_frsize;
}

static int exit_code(const struct request *r) {
    if (r->killed) return 137;
    if (r->timed_out) return 124;
    if (WIFEXITED(r->status)) return WEXITSTATUS(r->status);
    if (WIFSIGNALED(r->status)) return 128 + WTERMSIG(r->status);
    return 255;
}

static void release(struct request *r) {
    for (int k = 0; k < 2; k++) close_fd(&r->out[k].fd);
    close_fd(&r->status_fd);
    drop_input(r);
    close_fd(&r->pty_fd);
    free(r->buffer);
    unsigned gen = r->gen;
    memset(r, 0, sizeof *r);
    r->gen = gen + 1;
    r->in_fd = r->status_fd = r->out[0].fd = r->out[1].fd = r->pty_fd = -1;
}

static void finish(struct request *r) {
    unsigned char *p = frame_begin(T_EXIT, r->id);
    put32(p, (uint32_t)exit_code(r));
    p[4] = (unsigned char)r->timed_out;
    put32(p + 5, (uint32_t)(now - r->started));
    p += 9;
    for (int k = 0; k < 2; k++) {
        const struct capture *c = &r->out[k];
        put64(p, c->total);
        put32(p + 8, c->head_len);
        if (c->head_len) memcpy(p + 12, c->head, c->head_len);
        p = put_tail(p + 12 + c->head_len, c);
    }
    uint64_t oom = cgroup_counter(OOM_FILES, "oom_kill");
    uint64_t pids = cgroup_counter(PIDS_FILES, "max");
    put32(p, (uint32_t)(oom - r->oom_kills_at_start));
    put32(p + 4, (uint32_t)(pids - r->pids_refusals_at_start));
    put64(p + 8, free_bytes(WORKSPACE));
    put64(p + 16, free_bytes("/"));
    keep_frame(r->id, frame_send(p + 24));
    release(r);
}

/* EXIT waits for the leader and both pipes; after a SIGKILL, only for the
 * leader and ABANDON_MS, since setsid'ed escapees can hold a pipe forever. */
static void maybe_finish(struct request *r) {
    if (!r->used || !r->reaped || r->starting) return;
    int pipes_done = r->out[0].fd < 0 && r->out[1].fd < 0;
    if (pipes_done || (r->abandon_at && now >= r->abandon_at)) finish(r);
}

/* ---- output capture ---- */

static void keep_output(struct capture *c, const unsigned char *data, size_t n) {
    size_t take = c->head_cap - c->head_len;
    if (take > n) take = n;
    memcpy(c->head + c->head_len, data, take);
    c->head_len += (uint32_t)take;
    data += take;
    n -= take;
    if (n == 0 || c->tail_cap == 0) return;
    if (n >= c->tail_cap) {      /* only the last tail_cap bytes can survive */
        memcpy(c->tail, data + n - c->tail_cap, c->tail_cap);
        c->tail_pos = 0;
        c->tail_len = c->tail_cap;
        return;
    }
    size_t first = c->tail_cap - c->tail_pos;
    if (first > n) first = n;
    memcpy(c->tail + c->tail_pos, data, first);
    memcpy(c->tail, data + first, n - first);
    c->tail_pos = (uint32_t)((c->tail_pos + n) % c->tail_cap);
    c->tail_len = c->tail_len + n > c->tail_cap ? c->tail_cap : c->tail_len + (uint32_t)n;
}

static void read_output(struct request *r, int k) {
    struct capture *c = &r->out[k];
    ssize_t n = read(c->fd, readbuf, sizeof readbuf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {
        close_fd(&c->fd);
        maybe_finish(r);
        return;
    }
    c->total += (uint64_t)n;
    if (r->cap == 0) {
        send_out(r->id, k + 1, readbuf, (size_t)n);
        return;
    }
    if ((r->flags & FLAG_STREAM) && c->streamed < r->cap) {
        uint64_t left = r->cap - c->streamed;
        size_t send = (uint64_t)n < left ? (size_t)n : (size_t)left;
        send_out(r->id, k + 1, readbuf, send);
        c->streamed += send;
    }
    keep_output(c, readbuf, (size_t)n);
}

/* ---- input to commands ---- */

static void feed_input(struct request *r) {
    while (r->in_first) {
        struct chunk *c = r->in_first;
        ssize_t w = write(r->in_fd, c->data + c->off, c->len - c->off);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) return;
            drop_input(r);       /* EPIPE: nobody reads; the rest goes nowhere */
            return;
        }
        c->off += (size_t)w;
        if (c->off < c->len) continue;
        r->in_first = c->next;
        if (!r->in_first) r->in_last = NULL;
        r->in_queued -= c->len + CHUNK_OVERHEAD;
        input_total -= c->len + CHUNK_OVERHEAD;
        free(c);
    }
    if (r->in_eof) close_fd(&r->in_fd);
}

static void take_input(uint64_t id, const unsigned char *data, size_t n) {
    struct request *r = find_request(id);
    /* Input for a request that ended, never asked for it or was closed: the
     * command cannot use it; dropping it is the answer. */
    if (!r || !r->in_accept || r->in_fd < 0 || n == 0) return;
    if (!r->in_first) {          /* write what the pipe takes now, queue the rest */
        for (;;) {
            ssize_t w = write(r->in_fd, data, n);
            if (w < 0 && errno == EINTR) continue;
            if (w < 0 && errno != EAGAIN) {
                drop_input(r);
                return;
            }
            if (w > 0) {
                data += w;
                n -= (size_t)w;
            }
            break;
        }
        if (n == 0) return;
    }
    struct chunk *c = malloc(sizeof *c + n);
    if (!c) {
        note("request %llx: out of memory for stdin; closing it", (unsigned long long)id);
        drop_input(r);
        return;
    }
    c->next = NULL;
    c->len = n;
    c->off = 0;
    memcpy(c->data, data, n);
    if (r->in_last) r->in_last->next = c;
    else r->in_first = c;
    r->in_last = c;
    r->in_queued += n + CHUNK_OVERHEAD;
    input_total += n + CHUNK_OVERHEAD;
}

static void end_input(uint64_t id) {
    struct request *r = find_request(id);
    if (!r || r->in_fd < 0) return;
    r->in_accept = 0;
    r->in_eof = 1;
    if (!r->in_first) close_fd(&r->in_fd);
}

/* ---- starting commands ---- */

static void close_from(int lowest) {
    if (close_range((unsigned)lowest, ~0u, 0) == 0) return;
    struct rlimit rl;                /* kernels before 5.9 */
    long max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? (long)rl.rlim_cur : 65536;
    for (long fd = lowest; fd < max; fd++) close((int)fd);
}

/* The child's last words when it cannot exec: errno and the message of the
 * ERROR frame, in one write (below PIPE_BUF, so the parent reads it whole). */
static void fail_child(int fd, const char *what, const char *arg) __attribute__((noreturn));
static void fail_child(int fd, const char *what, const char *arg) {
    int err = errno;
    char msg[1024];
    memcpy(msg, &err, sizeof err);
    int n = snprintf(msg + sizeof err, sizeof msg - sizeof err, "%s %.300s: %s", what, arg, strerror(err));
    if (n < 0) n = 0;
    if (n > (int)(sizeof msg - sizeof err - 1)) n = (int)(sizeof msg - sizeof err - 1);
    ssize_t ignored = write(fd, msg, sizeof err + (size_t)n);
    (void)ignored;
    _exit(127);
}

/* Runs in the forked child. fork rather than vfork/posix_spawn: the child has
 * several steps (setsid, chdir, every signal disposition, dup2, close_range)
 * that posix_spawn cannot all express, and vfork would make each of them a
 * hazard on the parent's memory; the agent is small, so the page tables fork
 * copies cost next to nothing. */
static void child(int in, int out, int err, int status, int tty, char **argv) __attribute__((noreturn));
static void child(int in, int out, int err, int status, int tty, char **argv) {
    struct sigaction dfl = { .sa_handler = SIG_DFL };
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, NULL);
    setsid();
    if (tty && ioctl(in, TIOCSCTTY, 0) < 0) fail_child(status, "ioctl", "TIOCSCTTY");
    if (chdir(workdir) < 0) fail_child(status, "chdir", workdir);
    if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) fail_child(status, "dup2", "stdio");
    /* The status pipe moves to 3 (close-on-exec) so everything above can go. */
    if (status != 3) {
        if (dup3(status, 3, O_CLOEXEC) < 0) fail_child(status, "dup3", "status");
        status = 3;
    }
    close_from(4);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execvp(argv[0], argv);
    fail_child(status, "exec", argv[0]);
}

static int make_pipe(int fds[2]) {
    return pipe2(fds, O_CLOEXEC);
}

/* A new terminal, 80x24 until RESIZE: fds[0] the master (the agent's side), fds[1]
 * the slave (the command's stdin, stdout and stderr). */
static int make_pty(int fds[2]) {
    fds[0] = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (fds[0] < 0) return -1;
    char name[128];
    struct winsize size = { .ws_row = 24, .ws_col = 80 };
    if (grantpt(fds[0]) < 0 || unlockpt(fds[0]) < 0 || ptsname_r(fds[0], name, sizeof name) != 0 ||
        (fds[1] = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0) {
        int e = errno;
        close(fds[0]);
        fds[0] = -1;
        errno = e;
        return -1;
    }
    ioctl(fds[0], TIOCSWINSZ, &size);
    return 0;
}

/* The request runs from here on, but answers nothing until the status pipe
 * says whether exec worked: the loop never blocks on a child that is slow
 * to get there (a hung mount, or a sandbox process stopping it). */
static void start(struct request *r, uint64_t id, uint32_t timeout_ms, uint32_t grace_ms,
                  uint32_t cap, uint32_t flags) {
    int outp[2] = { -1, -1 }, errp[2] = { -1, -1 }, inp[2] = { -1, -1 }, statp[2] = { -1, -1 };
    int ptyp[2] = { -1, -1 }, pty_master = -1;
    unsigned char *buffer = NULL;
    if (cap && !(buffer = malloc(2 * (size_t)cap))) {
        send_error(id, ENOMEM, "no memory for a %u byte cap", cap);
        return;
    }
    if (flags & FLAG_PTY) {
        /* One terminal for all three: the agent reads and writes its master through
         * two descriptors (output, input) and keeps a third for RESIZE. */
        if (make_pty(ptyp) < 0 || make_pipe(statp) < 0 ||
            (outp[0] = fcntl(ptyp[0], F_DUPFD_CLOEXEC, 0)) < 0 ||
            (inp[1] = fcntl(ptyp[0], F_DUPFD_CLOEXEC, 0)) < 0 ||
            (outp[1] = fcntl(ptyp[1], F_DUPFD_CLOEXEC, 0)) < 0 ||
            (inp[0] = fcntl(ptyp[1], F_DUPFD_CLOEXEC, 0)) < 0) {
            int e = errno;
            send_error(id, e, "terminal: %s", strerror(e));
            goto cleanup;
        }
        errp[1] = ptyp[1];
        ptyp[1] = -1;
        pty_master = ptyp[0];
        ptyp[0] = -1;
    } else if (make_pipe(outp) < 0 || make_pipe(errp) < 0 || make_pipe(statp) < 0 ||
               ((flags & FLAG_STDIN) && make_pipe(inp) < 0)) {
        int e = errno;
        send_error(id, e, "pipe: %s", strerror(e));
        goto cleanup;
    }
    /* Before the fork: a fork refused for the pids limit counts for this request. */
    uint64_t oom_at_spawn = cgroup_counter(OOM_FILES, "oom_kill");
    uint64_t pids_at_spawn = cgroup_counter(PIDS_FILES, "max");
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        keep_frame(id, send_error(id, e, "fork: %s", strerror(e)));
        goto cleanup;
    }
    if (pid == 0)
        child((flags & (FLAG_STDIN | FLAG_PTY)) ? inp[0] : devnull, outp[1], errp[1], statp[1],
              (flags & FLAG_PTY) != 0, argv_ptrs);

    close_fd(&outp[1]);
    close_fd(&errp[1]);
    close_fd(&inp[0]);
    close_fd(&statp[1]);
    *r = (struct request){
        .used = 1, .gen = r->gen, .id = id, .pid = pid, .starting = 1, .status_fd = statp[0],
        .cap = cap, .flags = flags, .grace_ms = grace_ms, .started = now,
        .term_at = timeout_ms ? now + timeout_ms : 0,
        .oom_kills_at_start = oom_at_spawn, .pids_refusals_at_start = pids_at_spawn,
        .buffer = buffer, .in_fd = inp[1], .in_accept = inp[1] >= 0, .pty_fd = pty_master,
    };
    set_nonblock(r->status_fd);
    for (int k = 0; k < 2; k++) {
        struct capture *c = &r->out[k];
        c->fd = k ? errp[0] : outp[0];  /* a terminal has no stderr of its own: -1 */
        set_nonblock(c->fd);
        if (cap) {
            c->head = buffer + (size_t)k * cap;
            c->head_cap = cap / 2;
            c->tail = c->head + c->head_cap;
            c->tail_cap = cap - cap / 2;
        }
    }
    if (r->in_fd >= 0) set_nonblock(r->in_fd);
    return;

cleanup:
    free(buffer);
    close_fd(&ptyp[0]); close_fd(&ptyp[1]); close_fd(&pty_master);
    close_fd(&outp[0]); close_fd(&outp[1]);
    close_fd(&errp[0]); close_fd(&errp[1]);
    close_fd(&inp[0]); close_fd(&inp[1]);
    close_fd(&statp[0]); close_fd(&statp[1]);
}

/* STARTED: a detached request's process runs; its pid, for the service to show. */
static void send_started(const struct request *r) {
    unsigned char *p = frame_begin(T_STARTED, r->id);
    put32(p, (uint32_t)r->pid);
    frame_send(p + 4);
}

/* EOF on the status pipe: exec happened (or the child died trying, which
 * then shows as its exit status). A message: ERROR instead of EXIT, and the
 * request is gone; the child is reaped like any orphan. */
static void read_status(struct request *r) {
    unsigned char msg[1024];
    ssize_t got = read(r->status_fd, msg, sizeof msg);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) return;
    close_fd(&r->status_fd);
    r->starting = 0;
    if (got < (ssize_t)sizeof(int)) {
        if (r->flags & FLAG_DETACHED) send_started(r);
        maybe_finish(r);
        return;
    }
    int err;
    memcpy(&err, msg, sizeof err);
    int len = (int)(got - (ssize_t)sizeof err);
    keep_frame(r->id, send_error(r->id, err, "%.*s", len, (const char *)msg + sizeof err));
    release(r);
}

struct reader {
    const unsigned char *p;
    size_t left;
};

static int read32(struct reader *rd, uint32_t *v) {
    if (rd->left < 4) return 0;
    *v = get32(rd->p);
    rd->p += 4;
    rd->left -= 4;
    return 1;
}

static void spawn(uint64_t id, const unsigned char *payload, size_t n) {
    struct reader rd = { payload, n };
    uint32_t timeout_ms, grace_ms, cap, flags, argc;
    if (!read32(&rd, &timeout_ms) || !read32(&rd, &grace_ms) || !read32(&rd, &cap) ||
        !read32(&rd, &flags) || !read32(&rd, &argc)) {
        send_error(id, EINVAL, "SPAWN payload of %zu bytes is too short", n);
        return;
    }
    if (id == 0) { send_error(id, EINVAL, "SPAWN needs a request id"); return; }
    if (flags & ~ALL_FLAGS) { send_error(id, EINVAL, "unknown SPAWN flags 0x%x", flags); return; }
    if (cap > MAX_CAP) { send_error(id, EINVAL, "cap_bytes %u above %u (EXIT must fit in a frame)", cap, MAX_CAP); return; }
    if (argc == 0) { send_error(id, EINVAL, "SPAWN without arguments"); return; }
    if (argc > MAX_ARGC) { send_error(id, E2BIG, "%u arguments, at most %u", argc, MAX_ARGC); return; }
    size_t used = 0;
    for (uint32_t i = 0; i < argc; i++) {
        uint32_t len;
        if (!read32(&rd, &len) || len > rd.left) { send_error(id, EINVAL, "argument %u is truncated", i); return; }
        if (memchr(rd.p, '\0', len)) { send_error(id, EINVAL, "argument %u contains a NUL byte", i); return; }
        if (len + 1 > MAX_ARGV_BYTES - used) { send_error(id, E2BIG, "arguments exceed %u bytes", MAX_ARGV_BYTES); return; }
        memcpy(argv_bytes + used, rd.p, len);
        argv_bytes[used + len] = '\0';
        argv_ptrs[i] = argv_bytes + used;
        used += len + 1;
        rd.p += len;
        rd.left -= len;
    }
    argv_ptrs[argc] = NULL;
    if (rd.left) { send_error(id, EINVAL, "%zu stray bytes after the arguments", rd.left); return; }
    if (shutting_down) { send_error(id, ESHUTDOWN, "the agent is shutting down"); return; }
    if (find_request(id)) { send_error(id, EEXIST, "request %llx is running", (unsigned long long)id); return; }
    if (flags & FLAG_KILL_RUNNING)
        for (int i = 0; i < MAX_SLOTS; i++)
            if (slots[i].used && !(slots[i].flags & FLAG_DETACHED)) kill_request(&slots[i]);
    struct request *r = NULL;
    for (int i = 0; i < MAX_SLOTS && !r; i++)
        if (!slots[i].used) r = &slots[i];
    if (!r || count_requests(1) >= MAX_LIVE) {
        send_error(id, EBUSY, "%d requests running, at most %d", count_requests(1), MAX_LIVE);
        return;
    }
    start(r, id, timeout_ms, grace_ms, cap, flags);
}

/* ---- frames in ---- */

static void cancel(uint64_t id) {
    for (int i = 0; i < MAX_SLOTS; i++)
        if (slots[i].used && (id == 0 ? !(slots[i].flags & FLAG_DETACHED) : slots[i].id == id))
            kill_request(&slots[i]);
}

/* RESIZE: a terminal's new size (u16 columns, u16 rows); its foreground group gets SIGWINCH. */
static void resize(uint64_t id, const unsigned char *payload, size_t n) {
    if (n != 4) { send_error(id, EINVAL, "RESIZE takes u16 columns and u16 rows, got %zu bytes", n); return; }
    struct winsize size = { .ws_col = (unsigned short)(payload[0] | payload[1] << 8),
                            .ws_row = (unsigned short)(payload[2] | payload[3] << 8) };
    struct request *r = find_request(id);
    if (r && r->pty_fd >= 0) ioctl(r->pty_fd, TIOCSWINSZ, &size);
}

/* SIGNAL: one signal to a request's process group (a terminal's ^C, a polite TERM). */
static void send_signal(uint64_t id, const unsigned char *payload, size_t n) {
    if (n != 4) { send_error(id, EINVAL, "SIGNAL takes a u32 signal number, got %zu bytes", n); return; }
    uint32_t signo = get32(payload);
    if (signo == 0 || signo >= 65) { send_error(id, EINVAL, "no signal %u", signo); return; }
    struct request *r = find_request(id);
    if (r) signal_group(r, (int)signo);
}


static void send_result(uint64_t id) {
    for (unsigned i = 1; i <= KEPT; i++) {
        struct kept *k = &kept[(kept_next - i) % KEPT];
        if (k->frame && k->id == id) {
            write_stdout(k->frame, k->len);
            return;
        }
    }
    if (find_request(id)) return;    /* still running: its EXIT is on the way */
    send_error(id, ENOENT, "no result kept for request %llx", (unsigned long long)id);
}

static void pong(uint64_t id) {
    unsigned char *p = frame_begin(T_PONG, id);
    put32(p, PROTOCOL_VERSION);
    put32(p + 4, (uint32_t)count_requests(0));
    frame_send(p + 8);
}

static void handle_frame(unsigned type, uint64_t id, const unsigned char *payload, size_t n) {
    const char *empty_only = NULL;
    switch (type) {
    case T_SPAWN: spawn(id, payload, n); return;
    case T_STDIN: take_input(id, payload, n); return;
    case T_STDIN_EOF: if (!n) { end_input(id); return; } empty_only = "STDIN_EOF"; break;
    case T_CANCEL: if (!n) { cancel(id); return; } empty_only = "CANCEL"; break;
    case T_PING: if (!n) { pong(id); return; } empty_only = "PING"; break;
    case T_RESULT: if (!n) { send_result(id); return; } empty_only = "RESULT"; break;
    case T_SIGNAL: send_signal(id, payload, n); return;
    case T_RESIZE: resize(id, payload, n); return;
    default:
        send_error(id, EINVAL, "unknown frame type %u", type);
        return;
    }
    send_error(id, EINVAL, "%s takes no payload, got %zu bytes", empty_only, n);
}

/* A STDIN frame for a command that is not reading must wait, and with it
 * everything behind it: frames are handled in order. */
static int must_wait(unsigned type, uint64_t id) {
    if (type != T_STDIN) return 0;
    struct request *r = find_request(id);
    if (!r || !r->in_accept || r->in_fd < 0) return 0;
    return r->in_queued > INPUT_HIGH || input_total > INPUT_TOTAL_HIGH;
}

static void process_input(void) {
    input_blocked = 0;
    for (;;) {
        size_t avail = in_end - in_start;
        if (in_skip) {
            size_t drop = in_skip < avail ? (size_t)in_skip : avail;
            in_start += drop;
            in_skip -= drop;
            if (in_skip) break;
            continue;
        }
        if (avail < 4) break;
        const unsigned char *f = inbuf + in_start;
        uint32_t len = get32(f);
        if (len < 9) {
            /* No id to answer to; dropping exactly `len` bytes keeps a sender
             * that framed correctly in step. */
            note("frame length %u is below 9; dropped", len);
            send_error(0, EINVAL, "frame length %u below 9", len);
            in_start += 4;
            in_skip = len;
            continue;
        }
        if (len > MAX_LENGTH) {
            if (avail < HEADER) break;
            uint64_t id = get64(f + 5);
            note("frame of %u bytes for %llx is over the limit; skipping it", len, (unsigned long long)id);
            send_error(id, EINVAL, "frame length %u above %u", len, MAX_LENGTH);
            in_start += HEADER;
            in_skip = len - 9;
            continue;
        }
        if (avail < 4 + (size_t)len) break;
        if (must_wait(f[4], get64(f + 5))) {
            input_blocked = 1;
            break;
        }
        in_start += 4 + (size_t)len;
        handle_frame(f[4], get64(f + 5), f + HEADER, len - 9);
    }
    if (in_start == in_end) in_start = in_end = 0;
}

static void read_stdin(void) {
    if (in_start > 0) {
        memmove(inbuf, inbuf + in_start, in_end - in_start);
        in_end -= in_start;
        in_start = 0;
    }
    ssize_t n = read(STDIN_FILENO, inbuf + in_end, sizeof inbuf - in_end);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {
        /* The service is gone for now; commands keep running and are reaped. */
        note("stdin %s; %zu bytes of a partial frame dropped", n == 0 ? "closed" : strerror(errno),
             in_end - in_start);
        stdin_open = 0;
        in_start = in_end = 0;
        in_skip = 0;
        return;
    }
    in_end += (size_t)n;
}

/* ---- signals, timers, reaping ---- */

static void reap(void) {
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid < 0 && errno == EINTR) continue;
        if (pid <= 0) return;
        /* Orphans are only reaped; exit statuses matter for our own leaders. */
        for (int i = 0; i < MAX_SLOTS; i++) {
            struct request *r = &slots[i];
            if (r->used && !r->reaped && r->pid == pid) {
                r->reaped = 1;
                r->status = status;
                maybe_finish(r);
                break;
            }
        }
    }
}

static void begin_shutdown(int sig) {
    if (shutting_down) return;
    shutting_down = 1;
    shutdown_at = now + SHUTDOWN_MS;
    note("%s: stopping %d requests", strsignal(sig), count_requests(0));
    for (int i = 0; i < MAX_SLOTS; i++)
        if (slots[i].used) {
            signal_group(&slots[i], SIGTERM);
            signal_group(&slots[i], SIGCONT);
        }
}

static void read_signals(void) {
    struct signalfd_siginfo si;
    while (read(sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
        int sig = (int)si.ssi_signo;
        if (sig == SIGCHLD) continue;
        /* As init of a PID namespace, a sender we can see (ssi_pid != 0) is a
         * process inside the sandbox: commands must not stop the agent. Blocked
         * signals reach init even from inside, so this check is what guards it. */
        if ((sig == SIGTERM || sig == SIGINT) && (self_pid != 1 || si.ssi_pid == 0)) {
            begin_shutdown(sig);
            continue;
        }
        if (sig < 64 && !(ignored_logged & (1ull << sig))) {
            ignored_logged |= 1ull << sig;
            note("ignoring %s from pid %u (reported once)", strsignal(sig), si.ssi_pid);
        }
    }
    reap();
}

static void run_timers(void) {
    for (int i = 0; i < MAX_SLOTS; i++) {
        struct request *r = &slots[i];
        if (!r->used) continue;
        if (r->term_at && now >= r->term_at) {
            r->timed_out = 1;
            signal_group(r, SIGTERM);
            signal_group(r, SIGCONT);    /* a stopped group would never see SIGTERM */
            r->kill_at = r->term_at + r->grace_ms;
            r->term_at = 0;
        }
        if (r->kill_at && now >= r->kill_at) kill_request(r);
        maybe_finish(r);
    }
    if (shutting_down && (count_requests(0) == 0 || now >= shutdown_at)) {
        for (int i = 0; i < MAX_SLOTS; i++)
            if (slots[i].used) signal_group(&slots[i], SIGKILL);
        note("stopped");
        exit(0);
    }
}

static int poll_timeout(void) {
    int64_t next = shutting_down ? shutdown_at : INT64_MAX;
    for (int i = 0; i < MAX_SLOTS; i++) {
        const struct request *r = &slots[i];
        if (!r->used) continue;
        if (r->term_at && r->term_at < next) next = r->term_at;
        if (r->kill_at && r->kill_at < next) next = r->kill_at;
        /* Abandoning waits for the reap too; SIGCHLD wakes us for that. */
        if (r->abandon_at && r->reaped && r->abandon_at < next) next = r->abandon_at;
    }
    if (sigfd < 0 && next > now + 1000) next = now + 1000;   /* reap without SIGCHLD */
    if (next == INT64_MAX) return -1;
    if (next <= now) return 0;
    return next - now > 3600000 ? 3600000 : (int)(next - now);
}

/* ---- setup and the loop ---- */

static void setup(void) {
    /* Descriptors 0-2 must exist, or pipes would land there and be clobbered. */
    for (int fd = 0; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) < 0) open("/dev/null", O_RDWR);
    self_pid = getpid();
    for (int i = 0; i < MAX_SLOTS; i++)
        slots[i].in_fd = slots[i].status_fd = slots[i].out[0].fd = slots[i].out[1].fd =
            slots[i].pty_fd = -1;
    const char *dir = getenv("SIESTA_AGENT_WORKDIR");
    if (dir && *dir) workdir = dir;
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) note("subreaper: %s", strerror(errno));
    /* Big buffers (capture, queued input) always come from mmap and go back on free. */
    mallopt(M_MMAP_THRESHOLD, 64 * 1024);
    mallopt(M_TRIM_THRESHOLD, 128 * 1024);
    signal(SIGPIPE, SIG_IGN);        /* a closed pipe is an EPIPE to handle, not death */
    sigset_t set;
    sigfillset(&set);
    /* Faults stay fatal: hiding a crash in a signalfd would spin forever. */
    int faults[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT, SIGPIPE };
    for (size_t i = 0; i < sizeof faults / sizeof *faults; i++) sigdelset(&set, faults[i]);
    sigprocmask(SIG_BLOCK, &set, NULL);
    sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sigfd < 0) note("signalfd: %s", strerror(errno));
    devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull < 0) {
        /* A pipe with no writer reads as empty, which is all /dev/null is for here. */
        int p[2];
        if (pipe2(p, O_CLOEXEC) == 0) {
            close(p[1]);
            devnull = p[0];
        }
    }
    note("ready: pid %d, protocol %d, workdir %s", (int)self_pid, PROTOCOL_VERSION, workdir);
}

enum ref_kind { REF_SIGNALS, REF_STDIN, REF_OUT0, REF_OUT1, REF_IN, REF_STATUS };

struct ref {
    int slot;
    unsigned gen;
    enum ref_kind kind;
};

static pid_t init_child = -1;

static void forward_signal(int sig) {
    if (init_child > 0) kill(init_child, sig);
}

/* `siesta-agent CMD...`: be a plain init for CMD (see the header). */
static int run_as_init(char **command) {
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    init_child = fork();
    if (init_child < 0) {
        fprintf(stderr, "siesta-agent: fork: %s\n", strerror(errno));
        return 126;
    }
    if (init_child == 0) {
        execvp(command[0], command);
        fprintf(stderr, "siesta-agent: exec %s: %s\n", command[0], strerror(errno));
        _exit(errno == ENOENT ? 127 : 126);
    }
    const int forwarded[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH };
    for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++) {
        struct sigaction action = { .sa_handler = forward_signal };
        sigemptyset(&action.sa_mask);
        sigaction(forwarded[i], &action, NULL);
    }
    for (;;) {
        int status;
        pid_t done = waitpid(-1, &status, 0);
        if (done < 0 && errno == EINTR) continue;
        if (done < 0) return 0;
        if (done == init_child)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
}

int main(int argc, char **argv) {
    /* Before anything else: nothing in the sandbox may open our descriptors,
     * read our memory or ptrace us (see the header). */
    if (prctl(PR_SET_DUMPABLE, 0) < 0) note("non-dumpable: %s", strerror(errno));
    if (argc > 1) return run_as_init(argv + 1);
    static struct pollfd pfds[2 + 4 * MAX_SLOTS];
    static struct ref refs[2 + 4 * MAX_SLOTS];
    now = clock_ms();
    setup();
    for (;;) {
        now = clock_ms();
        run_timers();
        if (stdin_open) process_input();
        int n = 0;
        if (sigfd >= 0) {
            pfds[n] = (struct pollfd){ .fd = sigfd, .events = POLLIN };
            refs[n++] = (struct ref){ .kind = REF_SIGNALS };
        }
        if (stdin_open && !input_blocked) {
            pfds[n] = (struct pollfd){ .fd = STDIN_FILENO, .events = POLLIN };
            refs[n++] = (struct ref){ .kind = REF_STDIN };
        }
        for (int i = 0; i < MAX_SLOTS; i++) {
            struct request *r = &slots[i];
            if (!r->used) continue;
            /* The status pipe first: a command's output can only be ready once it has
             * exec'd, and then its STARTED (a detached request's) must go out before
             * any OUT of it, whatever else this pass finds ready. */
            if (r->status_fd >= 0) {
                pfds[n] = (struct pollfd){ .fd = r->status_fd, .events = POLLIN };
                refs[n++] = (struct ref){ i, r->gen, REF_STATUS };
            }
            for (int k = 0; k < 2; k++)
                if (r->out[k].fd >= 0) {
                    pfds[n] = (struct pollfd){ .fd = r->out[k].fd, .events = POLLIN };
                    refs[n++] = (struct ref){ i, r->gen, k ? REF_OUT1 : REF_OUT0 };
                }
            if (r->in_fd >= 0 && r->in_first) {
                pfds[n] = (struct pollfd){ .fd = r->in_fd, .events = POLLOUT };
                refs[n++] = (struct ref){ i, r->gen, REF_IN };
            }
        }
        int ready = poll(pfds, (nfds_t)n, poll_timeout());
        if (ready < 0) {
            if (errno != EINTR) note("poll: %s", strerror(errno));
            continue;
        }
        now = clock_ms();
        if (sigfd < 0) reap();       /* no signalfd: at least reap on every wake-up */
        for (int j = 0; j < n && ready > 0; j++) {
            if (!pfds[j].revents) continue;
            ready--;
            if (refs[j].kind == REF_SIGNALS) { read_signals(); continue; }
            if (refs[j].kind == REF_STDIN) { read_stdin(); continue; }
            struct request *r = &slots[refs[j].slot];
            /* The request may have finished (and the slot been reused) earlier in this pass. */
            if (!r->used || r->gen != refs[j].gen) continue;
            if (refs[j].kind == REF_STATUS) {
                if (r->status_fd == pfds[j].fd) read_status(r);
            } else if (refs[j].kind == REF_IN) {
                if (r->in_fd == pfds[j].fd) feed_input(r);
            } else {
                int k = refs[j].kind == REF_OUT1;
                if (r->out[k].fd == pfds[j].fd) read_output(r, k);
            }
        }
    }
}
