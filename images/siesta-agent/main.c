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
 *   gcc -static -O2 -Wall -Wextra -Werror -o siesta-agent *.c
 * SIESTA_AGENT_WORKDIR overrides the commands' working directory (/mnt/work),
 * which is how it is tested outside a container.
 */
#include "agent.h"

struct request slots[MAX_SLOTS];
int64_t now;
pid_t self_pid;
const char *workdir = WORKSPACE;
int devnull = -1;
int sigfd = -1;
size_t input_total;
int shutting_down;
int64_t shutdown_at;
static uint64_t ignored_logged;  /* signals already reported as ignored */

/* ---- signals, timers, reaping ---- */

void reap(void) {
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

void begin_shutdown(int sig) {
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

void read_signals(void) {
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

void run_timers(void) {
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

int poll_timeout(void) {
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

void setup(void) {
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
    trust_authority();
    channels_init();
    note("ready: pid %d, protocol %d, workdir %s%s", (int)self_pid, PROTOCOL_VERSION, workdir,
         listen_fd >= 0 ? ", socket @" SOCKET_NAME : "");
}

enum ref_kind { REF_SIGNALS, REF_LISTEN, REF_CHAN_IN, REF_CHAN_OUT, REF_OUT0, REF_OUT1, REF_IN, REF_STATUS };

struct ref {
    int slot;
    unsigned gen;
    enum ref_kind kind;
};

static pid_t init_child = -1;

void forward_signal(int sig) {
    if (init_child > 0) kill(init_child, sig);
}

/* `siesta-agent CMD...`: be a plain init for CMD (see the header). */
int run_as_init(char **command) {
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
    if (argc == 2 && !strcmp(argv[1], "--channel")) return run_relay();
    if (argc > 1) return run_as_init(argv + 1);
    static struct pollfd pfds[2 + 2 * MAX_CHANNELS + 4 * MAX_SLOTS];
    static struct ref refs[2 + 2 * MAX_CHANNELS + 4 * MAX_SLOTS];
    now = clock_ms();
    setup();
    for (;;) {
        now = clock_ms();
        run_timers();
        for (int ch = 0; ch < MAX_CHANNELS; ch++) {
            if (channels[ch].dead) close_channel(ch);
            if (channels[ch].used && channels[ch].reading) process_input(ch);
        }
        int n = 0;
        if (sigfd >= 0) {
            pfds[n] = (struct pollfd){ .fd = sigfd, .events = POLLIN };
            refs[n++] = (struct ref){ .kind = REF_SIGNALS };
        }
        if (listen_fd >= 0) {
            pfds[n] = (struct pollfd){ .fd = listen_fd, .events = POLLIN };
            refs[n++] = (struct ref){ .kind = REF_LISTEN };
        }
        for (int ch = 0; ch < MAX_CHANNELS; ch++) {
            struct channel *c = &channels[ch];
            if (!c->used || c->dead) continue;
            if (c->reading && !c->blocked) {
                pfds[n] = (struct pollfd){ .fd = ch ? c->fd : STDIN_FILENO, .events = POLLIN };
                refs[n++] = (struct ref){ .slot = ch, .kind = REF_CHAN_IN };
            }
            if (c->q_start < c->q_end) {
                pfds[n] = (struct pollfd){ .fd = c->fd, .events = POLLOUT };
                refs[n++] = (struct ref){ .slot = ch, .kind = REF_CHAN_OUT };
            }
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
                /* Backpressure: a command's output is read no faster than the channel
                 * it goes to takes it (the attach blocks the same way), so a slow
                 * reader stalls its own command, never loses its channel. */
                if (r->out[k].fd >= 0 && (r->chan <= 0 || chan_room(r->chan))) {
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
            if (refs[j].kind == REF_LISTEN) { accept_channels(); continue; }
            if (refs[j].kind == REF_CHAN_IN || refs[j].kind == REF_CHAN_OUT) {
                struct channel *c = &channels[refs[j].slot];
                if (!c->used || c->dead) continue;
                if (refs[j].kind == REF_CHAN_IN) read_channel(refs[j].slot);
                else {
                    flush_channel(c);
                    if (c->q_start == c->q_end) pump_channel(refs[j].slot);
                }
                continue;
            }
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

