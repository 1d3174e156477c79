/* Frames in: what each request type does (replies go to the channel it came from). */
#include "agent.h"

static void cancel(uint64_t id) {
    for (int i = 0; i < MAX_SLOTS; i++)
        if (slots[i].used && (id == 0 ? !(slots[i].flags & FLAG_DETACHED) : slots[i].id == id))
            kill_request(&slots[i]);
}

/* RESIZE: a terminal's new size (u16 columns, u16 rows); its foreground group gets SIGWINCH. */
static void resize(int ch, uint64_t id, const unsigned char *payload, size_t n) {
    if (n != 4) { send_error(ch, id, EINVAL, "RESIZE takes u16 columns and u16 rows, got %zu bytes", n); return; }
    struct winsize size = { .ws_col = (unsigned short)(payload[0] | payload[1] << 8),
                            .ws_row = (unsigned short)(payload[2] | payload[3] << 8) };
    struct request *r = find_request(id);
    if (r && r->pty_fd >= 0) ioctl(r->pty_fd, TIOCSWINSZ, &size);
}

/* SIGNAL: one signal to a request's process group (a terminal's ^C, a polite TERM). */
static void send_signal(int ch, uint64_t id, const unsigned char *payload, size_t n) {
    if (n != 4) { send_error(ch, id, EINVAL, "SIGNAL takes a u32 signal number, got %zu bytes", n); return; }
    uint32_t signo = get32(payload);
    if (signo == 0 || signo >= 65) { send_error(ch, id, EINVAL, "no signal %u", signo); return; }
    struct request *r = find_request(id);
    if (r) signal_group(r, (int)signo);
}

/* RESULT: the kept EXIT (or ERROR) again; a request still running moves to
 * this channel, so another service instance collects what a dead one started. */
static void send_result(int ch, uint64_t id) {
    for (unsigned i = 1; i <= KEPT; i++) {
        struct kept *k = &kept[(kept_next - i) % KEPT];
        if (k->frame && k->id == id) {
            chan_write(ch, k->frame, k->len);
            return;
        }
    }
    struct request *r = find_request(id);
    if (r) {                         /* still running: its EXIT is on the way, here */
        r->chan = ch;
        return;
    }
    send_error(ch, id, ENOENT, "no result kept for request %llx", (unsigned long long)id);
}

static void pong(int ch, uint64_t id) {
    unsigned char *p = frame_begin(T_PONG, id);
    put32(p, PROTOCOL_VERSION);
    put32(p + 4, (uint32_t)count_requests(0));
    frame_send(ch, p + 8);
}

void handle_frame(int ch, unsigned type, uint64_t id, const unsigned char *payload, size_t n) {
    const char *empty_only = NULL;
    switch (type) {
    case T_SPAWN: spawn(ch, id, payload, n); return;
    case T_STDIN: take_input(find_request(id), payload, n); return;
    case T_STDIN_EOF: if (!n) { end_input(find_request(id)); return; } empty_only = "STDIN_EOF"; break;
    case T_CANCEL: if (!n) { cancel(id); return; } empty_only = "CANCEL"; break;
    case T_PING: if (!n) { pong(ch, id); return; } empty_only = "PING"; break;
    case T_RESULT: if (!n) { send_result(ch, id); return; } empty_only = "RESULT"; break;
    case T_SIGNAL: send_signal(ch, id, payload, n); return;
    case T_RESIZE: resize(ch, id, payload, n); return;
    case T_LIST: if (!n) { send_table(ch, id); return; } empty_only = "LIST"; break;
    case T_DETACH: if (!n) { detach(ch, id); return; } empty_only = "DETACH"; break;
    case T_ATTACH: case T_CREDIT: case T_PINPUT: case T_PEOF: case T_PSIGNAL: case T_PRESIZE:
    case T_FORGET: case T_TAKE:
        table_frame(ch, type, id, payload, n);
        return;
    default:
        send_error(ch, id, EINVAL, "unknown frame type %u", type);
        return;
    }
    send_error(ch, id, EINVAL, "%s takes no payload, got %zu bytes", empty_only, n);
}

/* A STDIN (or PINPUT) frame for a command that is not reading must wait, and
 * with it everything behind it on that channel: frames are handled in order. */
int must_wait(unsigned type, uint64_t id, const unsigned char *payload, size_t n) {
    struct request *r;
    if (type == T_STDIN) r = find_request(id);
    else if (type == T_PINPUT && n >= 4) r = running_by_pid(get32(payload));
    else return 0;
    if (!r || !r->in_accept || r->in_fd < 0) return 0;
    return r->in_queued > INPUT_HIGH || input_total > INPUT_TOTAL_HIGH;
}
