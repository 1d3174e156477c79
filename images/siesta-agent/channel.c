/* Channels: the engine's attach (channel 0: stdin and stdout) and up to 16
 * connections to the abstract unix socket @siesta-agent, each with its own
 * input buffer and (sockets) its own bounded queue of unwritten frames. Also
 * `siesta-agent --channel`, the relay an engine exec runs to reach the socket. */
#include "agent.h"

struct channel channels[MAX_CHANNELS];
int listen_fd = -1;
static unsigned char inbuf0[4 + MAX_LENGTH];

void channels_init(void) {
    channels[0] = (struct channel){ .used = 1, .fd = -1, .reading = 1, .inbuf = inbuf0 };
    if (self_pid != 1) return;       /* the peer check means something only as a namespace's init */
    listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    memcpy(addr.sun_path + 1, SOCKET_NAME, strlen(SOCKET_NAME));
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(SOCKET_NAME));
    /* Credentials ride on what peers send (accepted sockets inherit the flag): under
     * gVisor, a relay's first byte carries the only proof of who it is. */
    int on = 1;
    if (listen_fd >= 0) setsockopt(listen_fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof on);
    if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&addr, len) < 0 || listen(listen_fd, 16) < 0) {
        note("socket @%s: %s; channel 0 only", SOCKET_NAME, strerror(errno));
        close_fd(&listen_fd);
    }
}

static void read_hello(int ch);

/* ---- frames out ---- */

static void queue_frame(struct channel *c, const unsigned char *p, size_t n) {
    size_t queued = c->q_end - c->q_start;
    if (queued + n > CHANNEL_QUEUE_MAX) {
        note("channel %d: over %u bytes unread; closing it", (int)(c - channels), CHANNEL_QUEUE_MAX);
        c->dead = 1;
        return;
    }
    if (c->q_end + n > c->q_cap) {
        memmove(c->queue, c->queue + c->q_start, queued);
        c->q_start = 0;
        c->q_end = queued;
        if (queued + n > c->q_cap) {
            size_t cap = c->q_cap ? c->q_cap : 65536;
            while (cap < queued + n) cap *= 2;
            unsigned char *q = realloc(c->queue, cap);
            if (!q) { note("channel %d: no memory for its queue; closing it", (int)(c - channels)); c->dead = 1; return; }
            c->queue = q;
            c->q_cap = cap;
        }
    }
    memcpy(c->queue + c->q_end, p, n);
    c->q_end += n;
}

/* Writes what the socket takes now; the rest waits for POLLOUT. */
void flush_channel(struct channel *c) {
    while (c->q_start < c->q_end) {
        ssize_t w = send(c->fd, c->queue + c->q_start, c->q_end - c->q_start, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno == EAGAIN) return;
        if (w <= 0) { c->dead = 1; return; }
        c->q_start += (size_t)w;
    }
    c->q_start = c->q_end = 0;
    if (c->q_cap > 65536) {          /* a burst's buffer goes back */
        free(c->queue);
        c->queue = NULL;
        c->q_cap = 0;
    }
}

/* A frame to a channel: channel 0 as always (blocking writes to stdout), a
 * socket without ever blocking; a closed channel (-1) drops it. */
void chan_write(int ch, const unsigned char *p, size_t n) {
    if (ch < 0 || ch >= MAX_CHANNELS) return;
    struct channel *c = &channels[ch];
    if (!c->used || c->dead) return;
    if (ch == 0) { write_stdout(p, n); return; }
    queue_frame(c, p, n);
    if (!c->dead && c->q_end - c->q_start == n) flush_channel(c);
}

/* DATA waits while a socket's queue is half full (credit or not), so a reader
 * that reads slowly is never closed for what it asked for. */
int chan_room(int ch) {
    return ch == 0 || channels[ch].q_end - channels[ch].q_start < CHANNEL_QUEUE_MAX / 2;
}

int chan_open(int ch) {
    return ch >= 0 && ch < MAX_CHANNELS && channels[ch].used && !channels[ch].dead;
}

/* ---- frames in ---- */

void process_input(int ch) {
    struct channel *c = &channels[ch];
    c->blocked = 0;
    for (;;) {
        if (c->dead) return;
        size_t avail = c->in_end - c->in_start;
        if (c->in_skip) {
            size_t drop = c->in_skip < avail ? (size_t)c->in_skip : avail;
            c->in_start += drop;
            c->in_skip -= drop;
            if (c->in_skip) break;
            continue;
        }
        if (avail < 4) break;
        const unsigned char *f = c->inbuf + c->in_start;
        uint32_t len = get32(f);
        if (len < 9) {
            /* No id to answer to; dropping exactly `len` bytes keeps a sender
             * that framed correctly in step. */
            note("frame length %u is below 9; dropped", len);
            send_error(ch, 0, EINVAL, "frame length %u below 9", len);
            c->in_start += 4;
            c->in_skip = len;
            continue;
        }
        if (len > MAX_LENGTH) {
            if (avail < HEADER) break;
            uint64_t id = get64(f + 5);
            note("frame of %u bytes for %llx is over the limit; skipping it", len, (unsigned long long)id);
            send_error(ch, id, EINVAL, "frame length %u above %u", len, MAX_LENGTH);
            c->in_start += HEADER;
            c->in_skip = len - 9;
            continue;
        }
        if (avail < 4 + (size_t)len) break;
        if (must_wait(f[4], get64(f + 5), f + HEADER, len - 9)) {
            c->blocked = 1;
            break;
        }
        c->in_start += 4 + (size_t)len;
        handle_frame(ch, f[4], get64(f + 5), f + HEADER, len - 9);
    }
    if (c->in_start == c->in_end) c->in_start = c->in_end = 0;
}

void read_channel(int ch) {
    struct channel *c = &channels[ch];
    if (ch && c->hello) { read_hello(ch); return; }
    if (c->in_start > 0) {
        memmove(c->inbuf, c->inbuf + c->in_start, c->in_end - c->in_start);
        c->in_end -= c->in_start;
        c->in_start = 0;
    }
    ssize_t n = read(ch ? c->fd : STDIN_FILENO, c->inbuf + c->in_end, 4 + MAX_LENGTH - c->in_end);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n > 0) { c->in_end += (size_t)n; return; }
    if (ch) { c->dead = 1; return; }  /* a socket's peer left: closed at the loop's next turn */
    /* The service is gone for now; commands keep running and are reaped. */
    note("stdin %s; %zu bytes of a partial frame dropped", n == 0 ? "closed" : strerror(errno),
         c->in_end - c->in_start);
    c->reading = 0;
    c->in_start = c->in_end = 0;
    c->in_skip = 0;
}

/* What a closed channel leaves: its requests run on, their frames dropped
 * (RESULT from any channel collects them); its attachments end. */
void close_channel(int ch) {
    struct channel *c = &channels[ch];
    for (int i = 0; i < MAX_SLOTS; i++)
        if (slots[i].used && slots[i].chan == ch) slots[i].chan = -1;
    drop_attachments(ch);
    close_fd(&c->fd);
    free(c->inbuf);
    free(c->queue);
    memset(c, 0, sizeof *c);
    c->fd = -1;
    note("channel %d closed", ch);
}

/* ---- the socket ---- */

/* Whether pid is named as a relay is (`Name:` in its status, the executable's
 * name: /proc/<pid>/exe cannot be read, a relay being non-dumpable). */
static int named_as_relay(pid_t pid) {
    char path[64], text[4096];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    int sfd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = sfd >= 0 ? read(sfd, text, sizeof text - 1) : -1;
    if (sfd >= 0) close(sfd);
    if (n <= 0) return 0;
    text[n] = 0;
    return strncmp(text, "Name:\tsiesta-agent\n", 19) == 0;
}

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

/* The peer must have entered the sandbox's PID namespace from outside (an
 * engine exec): its parent is not in the namespace, so /proc says PPid 0.
 * Every process the sandbox starts has its parent inside (orphans go to us).
 * The pidfd (Linux 6.5+; -1 where there is none), checked after /proc was
 * read, proves the pid was not reused meanwhile by another process. */
static int pid_is_outside(pid_t pid, int pidfd, char *why, size_t why_len) {
    if (pid <= 0) { snprintf(why, why_len, "peer pid %d is not in this namespace", (int)pid); return 0; }
    char path[64], text[4096];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    int sfd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = sfd >= 0 ? read(sfd, text, sizeof text - 1) : -1;
    if (sfd >= 0) close(sfd);
    if (n <= 0) { snprintf(why, why_len, "pid %d: no status", (int)pid); return 0; }
    text[n] = 0;
    char *ppid = strstr(text, "\nPPid:");
    long parent = ppid ? strtol(ppid + 6, NULL, 10) : -1;
    if (parent != 0) {
        snprintf(why, why_len, "pid %d has parent %ld inside the sandbox", (int)pid, parent);
        return 0;
    }
    if (pidfd >= 0 && syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0) {
        snprintf(why, why_len, "pid %d exited while checked", (int)pid);
        return 0;
    }
    return 1;
}

/* At accept: the peer by SO_PEERCRED. gVisor answers it with the listener's
 * own credentials, so there the check waits for the relay's first byte and
 * the credentials the kernel checked on it (SCM_CREDENTIALS: a sender names
 * only its own pid without CAP_SYS_ADMIN, which sandboxes do not have). */
static int peer_is_outside(int fd, int *peer, int *hello, char *why, size_t why_len) {
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
        snprintf(why, why_len, "SO_PEERCRED: %s", strerror(errno));
        return 0;
    }
    *peer = (int)cred.pid;
    if (cred.pid == self_pid) {
        *hello = HELLO_CHECK;
        return 1;
    }
    *hello = HELLO_TAKE;
    int pidfd = -1;
    len = sizeof pidfd;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) < 0) pidfd = -1;
    int ok = pid_is_outside(cred.pid, pidfd, why, why_len);
    if (pidfd >= 0) close(pidfd);
    return ok;
}

/* The relay's first byte. Under gVisor its credentials are the check: the
 * pid must be a process from outside named as a relay is, and still be alive
 * once /proc was read (its pidfd, where pidfd_open works). What
 * is left is a pid reused between a sandbox process's send and this read by
 * a relay exec'd that moment: pids are not reused until they wrap. */
static void read_hello(int ch) {
    struct channel *c = &channels[ch];
    unsigned char byte;
    union { struct cmsghdr align; char buf[CMSG_SPACE(sizeof(struct ucred))]; } control;
    struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
                          .msg_control = control.buf, .msg_controllen = sizeof control.buf };
    ssize_t n = recvmsg(c->fd, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) { c->dead = 1; return; }
    if (c->hello == HELLO_CHECK) {
        struct ucred cred = { .pid = 0 };
        for (struct cmsghdr *h = CMSG_FIRSTHDR(&msg); h; h = CMSG_NXTHDR(&msg, h))
            if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_CREDENTIALS)
                memcpy(&cred, CMSG_DATA(h), sizeof cred);
        char why[160];
        int pidfd = cred.pid > 0 ? (int)syscall(SYS_pidfd_open, cred.pid, 0) : -1;
        int ok = pid_is_outside(cred.pid, pidfd, why, sizeof why);
        if (ok && !named_as_relay(cred.pid)) {
            snprintf(why, sizeof why, "pid %d is not a relay (siesta-agent --channel)", (int)cred.pid);
            ok = 0;
        }
        if (pidfd >= 0) close(pidfd);
        if (!ok) {
            note("socket channel %d refused: %s (by the credentials of its first byte)", ch, why);
            c->dead = 1;
            return;
        }
        note("channel %d open: pid %d (by its credentials)", ch, (int)cred.pid);
    }
    c->hello = HELLO_NONE;
}

void accept_channels(void) {
    for (;;) {
        int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno != EAGAIN) note("accept: %s", strerror(errno));
            return;
        }
        char why[160];
        int peer = 0, hello = HELLO_TAKE;
        if (!peer_is_outside(fd, &peer, &hello, why, sizeof why)) {
            note("socket channel refused: %s", why);
            close(fd);
            continue;
        }
        int ch = 1;
        while (ch < MAX_CHANNELS && channels[ch].used) ch++;
        unsigned char *buf = ch < MAX_CHANNELS ? malloc(4 + MAX_LENGTH) : NULL;
        if (!buf) {
            note("socket channel refused: %s", ch < MAX_CHANNELS ? "no memory" : "16 channels open");
            close(fd);
            continue;
        }
        channels[ch] = (struct channel){ .used = 1, .fd = fd, .reading = 1, .inbuf = buf, .hello = hello };
        if (hello == HELLO_CHECK) {
            int on = 1;
            setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof on);
        } else {
            note("channel %d open: pid %d", ch, peer);
        }
    }
}

/* ---- `siesta-agent --channel` ---- */

struct pump { int from, to; unsigned char buf[65536]; size_t start, end; int done; };

static int pump_step(struct pump *p, short revents_from, short revents_to) {
    if (p->start == p->end && (revents_from & (POLLIN | POLLHUP | POLLERR))) {
        ssize_t n = read(p->from, p->buf, sizeof p->buf);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) return 1;
        if (n <= 0) return 0;
        p->start = 0;
        p->end = (size_t)n;
    }
    if (p->start < p->end && (revents_to & (POLLOUT | POLLERR | POLLHUP) || revents_from)) {
        ssize_t w = send(p->to, p->buf + p->start, p->end - p->start, MSG_NOSIGNAL);
        if (w < 0 && errno == ENOTSOCK) w = write(p->to, p->buf + p->start, p->end - p->start);
        if (w < 0 && (errno == EINTR || errno == EAGAIN)) return 1;
        if (w < 0) return 0;
        p->start += (size_t)w;
    }
    return 1;
}

/* Copies stdin to the socket and the socket to stdout until either ends. Not
 * dumpable (main did that first), so no sandbox process reaches its descriptors. */
int run_relay(void) {
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    memcpy(addr.sun_path + 1, SOCKET_NAME, strlen(SOCKET_NAME));
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(SOCKET_NAME));
    int on = 1;  /* and on this side: the kernel then adds them whatever the agent's timing */
    if (s >= 0) setsockopt(s, SOL_SOCKET, SO_PASSCRED, &on, sizeof on);
    if (s < 0 || connect(s, (struct sockaddr *)&addr, len) < 0) {
        fprintf(stderr, "siesta-agent --channel: connect @%s: %s\n", SOCKET_NAME, strerror(errno));
        return 2;
    }
    /* The first byte carries the relay's credentials (the agent's check under
     * gVisor, where SO_PEERCRED names the agent itself). */
    struct ucred me = { .pid = getpid(), .uid = getuid(), .gid = getgid() };
    union { struct cmsghdr align; char buf[CMSG_SPACE(sizeof me)]; } control;
    memset(&control, 0, sizeof control);
    unsigned char hello = 0;
    struct iovec iov = { .iov_base = &hello, .iov_len = 1 };
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
                          .msg_control = control.buf, .msg_controllen = sizeof control.buf };
    struct cmsghdr *h = CMSG_FIRSTHDR(&msg);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_CREDENTIALS;
    h->cmsg_len = CMSG_LEN(sizeof me);
    memcpy(CMSG_DATA(h), &me, sizeof me);
    if (sendmsg(s, &msg, MSG_NOSIGNAL) != 1) {
        fprintf(stderr, "siesta-agent --channel: hello: %s\n", strerror(errno));
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    set_nonblock(s);
    set_nonblock(STDIN_FILENO);
    set_nonblock(STDOUT_FILENO);
    static struct pump up, down;
    up.from = STDIN_FILENO; up.to = s;
    down.from = s; down.to = STDOUT_FILENO;
    for (;;) {
        struct pollfd pfds[4] = {
            { .fd = up.start == up.end ? up.from : -1, .events = POLLIN },
            { .fd = up.start < up.end ? up.to : -1, .events = POLLOUT },
            { .fd = down.start == down.end ? down.from : -1, .events = POLLIN },
            { .fd = down.start < down.end ? down.to : -1, .events = POLLOUT },
        };
        if (poll(pfds, 4, -1) < 0) {
            if (errno == EINTR) continue;
            return 0;
        }
        if (!pump_step(&up, pfds[0].revents, pfds[1].revents)) return 0;
        if (!pump_step(&down, pfds[2].revents, pfds[3].revents)) return 0;
    }
}
