/* The channel: frames in, and what each request type does. */
#include "agent.h"

int stdin_open = 1;
int input_blocked;
static unsigned char inbuf[4 + MAX_LENGTH];
static size_t in_start, in_end;
static uint64_t in_skip;         /* bytes of an oversized or bogus frame still to drop */

/* ---- frames in ---- */

void cancel(uint64_t id) {
    for (int i = 0; i < MAX_SLOTS; i++)
        if (slots[i].used && (id == 0 ? !(slots[i].flags & FLAG_DETACHED) : slots[i].id == id))
            kill_request(&slots[i]);
}

/* RESIZE: a terminal's new size (u16 columns, u16 rows); its foreground group gets SIGWINCH. */
void resize(uint64_t id, const unsigned char *payload, size_t n) {
    if (n != 4) { send_error(id, EINVAL, "RESIZE takes u16 columns and u16 rows, got %zu bytes", n); return; }
    struct winsize size = { .ws_col = (unsigned short)(payload[0] | payload[1] << 8),
                            .ws_row = (unsigned short)(payload[2] | payload[3] << 8) };
    struct request *r = find_request(id);
    if (r && r->pty_fd >= 0) ioctl(r->pty_fd, TIOCSWINSZ, &size);
}

/* SIGNAL: one signal to a request's process group (a terminal's ^C, a polite TERM). */
void send_signal(uint64_t id, const unsigned char *payload, size_t n) {
    if (n != 4) { send_error(id, EINVAL, "SIGNAL takes a u32 signal number, got %zu bytes", n); return; }
    uint32_t signo = get32(payload);
    if (signo == 0 || signo >= 65) { send_error(id, EINVAL, "no signal %u", signo); return; }
    struct request *r = find_request(id);
    if (r) signal_group(r, (int)signo);
}


void send_result(uint64_t id) {
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

void pong(uint64_t id) {
    unsigned char *p = frame_begin(T_PONG, id);
    put32(p, PROTOCOL_VERSION);
    put32(p + 4, (uint32_t)count_requests(0));
    frame_send(p + 8);
}

void handle_frame(unsigned type, uint64_t id, const unsigned char *payload, size_t n) {
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
int must_wait(unsigned type, uint64_t id) {
    if (type != T_STDIN) return 0;
    struct request *r = find_request(id);
    if (!r || !r->in_accept || r->in_fd < 0) return 0;
    return r->in_queued > INPUT_HIGH || input_total > INPUT_TOTAL_HIGH;
}

void process_input(void) {
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

void read_stdin(void) {
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

