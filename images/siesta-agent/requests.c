/* Requests: spawning commands, their output, their input, their EXIT. */
#include "agent.h"

static unsigned char readbuf[CHUNK];
static char argv_bytes[MAX_ARGV_BYTES];
char *argv_ptrs[MAX_ARGC + 1];

/* ---- requests ---- */

struct request *find_request(uint64_t id) {
    for (int i = 0; i < MAX_SLOTS; i++)
        if (slots[i].used && slots[i].id == id) return &slots[i];
    return NULL;
}

int count_requests(int live_only) {
    int n = 0;
    for (int i = 0; i < MAX_SLOTS; i++)
        if (slots[i].used && !(live_only && slots[i].killed)) n++;
    return n;
}

void signal_group(struct request *r, int sig) {
    /* The group may already be empty (its members escaped or exited): ESRCH is fine. */
    kill(-r->pid, sig);
    /* Before exec the child may not have called setsid yet (say, it was stopped). */
    if (r->starting) kill(r->pid, sig);
}

void kill_request(struct request *r) {
    signal_group(r, SIGKILL);
    r->killed = 1;
    r->term_at = r->kill_at = 0;
    if (!r->abandon_at) r->abandon_at = now + ABANDON_MS;
}

void drop_input(struct request *r) {
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
unsigned char *put_tail(unsigned char *p, const struct capture *c) {
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

uint64_t cgroup_counter(const char *const files[], const char *key) {
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
uint64_t free_bytes(const char *path) {
    struct statvfs st;
    if (statvfs(path, &st) != 0) return UINT64_MAX;
    if (st.f_files && !st.f_favail) return 0;
    return (uint64_t)st.f_bavail * st.f_frsize;
}

int exit_code(const struct request *r) {
    if (r->killed) return 137;
    if (r->timed_out) return 124;
    if (WIFEXITED(r->status)) return WEXITSTATUS(r->status);
    if (WIFSIGNALED(r->status)) return 128 + WTERMSIG(r->status);
    return 255;
}

void release(struct request *r) {
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

void finish(struct request *r) {
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
    keep_frame(r->id, frame_send(r->chan, p + 24));
    if (r->proc) proc_exited(r->proc, exit_code(r), (uint32_t)(now - r->started));
    release(r);
}

/* EXIT waits for the leader and both pipes; after a SIGKILL, only for the
 * leader and ABANDON_MS, since setsid'ed escapees can hold a pipe forever. */
void maybe_finish(struct request *r) {
    if (!r->used || !r->reaped || r->starting) return;
    int pipes_done = r->out[0].fd < 0 && r->out[1].fd < 0;
    if (pipes_done || (r->abandon_at && now >= r->abandon_at)) finish(r);
}

/* ---- output capture ---- */

void keep_output(struct capture *c, const unsigned char *data, size_t n) {
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

void read_output(struct request *r, int k) {
    struct capture *c = &r->out[k];
    ssize_t n = read(c->fd, readbuf, sizeof readbuf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {
        close_fd(&c->fd);
        maybe_finish(r);
        return;
    }
    c->total += (uint64_t)n;
    if (r->proc) proc_output(r->proc, k + 1, readbuf, (size_t)n);
    if (r->cap == 0) {
        send_out(r->chan, r->id, k + 1, readbuf, (size_t)n);
        return;
    }
    if ((r->flags & FLAG_STREAM) && c->streamed < r->cap) {
        uint64_t left = r->cap - c->streamed;
        size_t send = (uint64_t)n < left ? (size_t)n : (size_t)left;
        send_out(r->chan, r->id, k + 1, readbuf, send);
        c->streamed += send;
    }
    keep_output(c, readbuf, (size_t)n);
}

/* ---- input to commands ---- */

void feed_input(struct request *r) {
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

void take_input(struct request *r, const unsigned char *data, size_t n) {
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
        note("request %llx: out of memory for stdin; closing it", (unsigned long long)r->id);
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

void end_input(struct request *r) {
    if (!r || r->in_fd < 0) return;
    r->in_accept = 0;
    r->in_eof = 1;
    if (!r->in_first) close_fd(&r->in_fd);
}

/* ---- starting commands ---- */

void close_from(int lowest) {
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

int make_pipe(int fds[2]) {
    return pipe2(fds, O_CLOEXEC);
}

/* A new terminal, 80x24 until RESIZE: fds[0] the master (the agent's side), fds[1]
 * the slave (the command's stdin, stdout and stderr). */
int make_pty(int fds[2]) {
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
static void start(int ch, struct request *r, uint64_t id, uint32_t timeout_ms, uint32_t grace_ms,
                  uint32_t cap, uint32_t flags, const struct table_spec *spec) {
    int outp[2] = { -1, -1 }, errp[2] = { -1, -1 }, inp[2] = { -1, -1 }, statp[2] = { -1, -1 };
    int ptyp[2] = { -1, -1 }, pty_master = -1;
    unsigned char *buffer = NULL;
    if (cap && !(buffer = malloc(2 * (size_t)cap))) {
        send_error(ch, id, ENOMEM, "no memory for a %u byte cap", cap);
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
            send_error(ch, id, e, "terminal: %s", strerror(e));
            goto cleanup;
        }
        errp[1] = ptyp[1];
        ptyp[1] = -1;
        pty_master = ptyp[0];
        ptyp[0] = -1;
    } else if (make_pipe(outp) < 0 || make_pipe(errp) < 0 || make_pipe(statp) < 0 ||
               ((flags & FLAG_STDIN) && make_pipe(inp) < 0)) {
        int e = errno;
        send_error(ch, id, e, "pipe: %s", strerror(e));
        goto cleanup;
    }
    /* Before the fork: a fork refused for the pids limit counts for this request. */
    uint64_t oom_at_spawn = cgroup_counter(OOM_FILES, "oom_kill");
    uint64_t pids_at_spawn = cgroup_counter(PIDS_FILES, "max");
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        keep_frame(id, send_error(ch, id, e, "fork: %s", strerror(e)));
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
        .chan = ch,
    };
    if ((flags & FLAG_DETACHED) && proc_create(r, spec->ring_bytes, spec->tag, spec->tag_len, argv_bytes, spec->argv_len) < 0)
        note("request %llx: no memory for its table entry", (unsigned long long)id);
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
void send_started(const struct request *r) {
    unsigned char *p = frame_begin(T_STARTED, r->id);
    put32(p, (uint32_t)r->pid);
    frame_send(r->chan, p + 4);
}

/* EOF on the status pipe: exec happened (or the child died trying, which
 * then shows as its exit status). A message: ERROR instead of EXIT, and the
 * request is gone; the child is reaped like any orphan. */
void read_status(struct request *r) {
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
    keep_frame(r->id, send_error(r->chan, r->id, err, "%.*s", len, (const char *)msg + sizeof err));
    proc_abandon(r);
    release(r);
}

void spawn(int ch, uint64_t id, const unsigned char *payload, size_t n) {
    struct reader rd = { payload, n };
    uint32_t timeout_ms, grace_ms, cap, flags, argc;
    if (!read32(&rd, &timeout_ms) || !read32(&rd, &grace_ms) || !read32(&rd, &cap) ||
        !read32(&rd, &flags) || !read32(&rd, &argc)) {
        send_error(ch, id, EINVAL, "SPAWN payload of %zu bytes is too short", n);
        return;
    }
    if (id == 0) { send_error(ch, id, EINVAL, "SPAWN needs a request id"); return; }
    if (flags & ~ALL_FLAGS) { send_error(ch, id, EINVAL, "unknown SPAWN flags 0x%x", flags); return; }
    if (cap > MAX_CAP) { send_error(ch, id, EINVAL, "cap_bytes %u above %u (EXIT must fit in a frame)", cap, MAX_CAP); return; }
    if (argc == 0) { send_error(ch, id, EINVAL, "SPAWN without arguments"); return; }
    if (argc > MAX_ARGC) { send_error(ch, id, E2BIG, "%u arguments, at most %u", argc, MAX_ARGC); return; }
    size_t used = 0;
    for (uint32_t i = 0; i < argc; i++) {
        uint32_t len;
        if (!read32(&rd, &len) || len > rd.left) { send_error(ch, id, EINVAL, "argument %u is truncated", i); return; }
        if (memchr(rd.p, '\0', len)) { send_error(ch, id, EINVAL, "argument %u contains a NUL byte", i); return; }
        if (len + 1 > MAX_ARGV_BYTES - used) { send_error(ch, id, E2BIG, "arguments exceed %u bytes", MAX_ARGV_BYTES); return; }
        memcpy(argv_bytes + used, rd.p, len);
        argv_bytes[used + len] = '\0';
        argv_ptrs[i] = argv_bytes + used;
        used += len + 1;
        rd.p += len;
        rd.left -= len;
    }
    argv_ptrs[argc] = NULL;
    struct table_spec spec = { .ring_bytes = RING_DEFAULT, .tag = "", .argv_len = used ? (uint32_t)used - 1 : 0 };
    if (flags & FLAG_RING) {
        uint32_t tag_len;
        if (!(flags & FLAG_DETACHED)) { send_error(ch, id, EINVAL, "RING is for DETACHED requests"); return; }
        if (!read32(&rd, &spec.ring_bytes) || !read32(&rd, &tag_len) || tag_len != rd.left) {
            send_error(ch, id, EINVAL, "RING needs u32 ring_bytes and a string tag after the arguments");
            return;
        }
        if (tag_len > MAX_TAG) { send_error(ch, id, E2BIG, "tag of %u bytes, at most %u", tag_len, MAX_TAG); return; }
        spec.tag = (const char *)rd.p;
        spec.tag_len = tag_len;
        rd.left = 0;
    }
    if ((flags & FLAG_DETACHED) && !ring_room(spec.ring_bytes)) {
        send_error(ch, id, ENOMEM, "a ring of %u bytes: the rings' %u bytes in all would be exceeded (%zu used)",
                   spec.ring_bytes, RINGS_TOTAL, rings_total);
        return;
    }
    if (rd.left) { send_error(ch, id, EINVAL, "%zu stray bytes after the arguments", rd.left); return; }
    if (shutting_down) { send_error(ch, id, ESHUTDOWN, "the agent is shutting down"); return; }
    if (find_request(id)) { send_error(ch, id, EEXIST, "request %llx is running", (unsigned long long)id); return; }
    if (flags & FLAG_KILL_RUNNING)
        for (int i = 0; i < MAX_SLOTS; i++)
            if (slots[i].used && !(slots[i].flags & FLAG_DETACHED)) kill_request(&slots[i]);
    struct request *r = NULL;
    for (int i = 0; i < MAX_SLOTS && !r; i++)
        if (!slots[i].used) r = &slots[i];
    if (!r || count_requests(1) >= MAX_LIVE) {
        send_error(ch, id, EBUSY, "%d requests running, at most %d", count_requests(1), MAX_LIVE);
        return;
    }
    start(ch, r, id, timeout_ms, grace_ms, cap, flags, &spec);
}

