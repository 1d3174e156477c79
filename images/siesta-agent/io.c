/* Framing and I/O helpers: diagnostics, integers, frames out. */
#include "agent.h"

static int stdout_failing;
static unsigned char outbuf[4 + MAX_LENGTH];
struct kept kept[KEPT];
unsigned kept_next;

/* ---- small helpers ---- */

void note(const char *fmt, ...) {
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

int64_t clock_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

void put64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

uint32_t get32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint64_t get64(const unsigned char *p) {
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

void set_nonblock(int fd) {
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

void close_fd(int *fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

/* ---- frames out ---- */

void write_stdout(const unsigned char *p, size_t n) {
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
unsigned char *frame_begin(enum frame_type type, uint64_t id) {
    outbuf[4] = (unsigned char)type;
    put64(outbuf + 5, id);
    return outbuf + HEADER;
}

/* Sends to channel `ch` (-1: a closed one, nowhere); the length, for keep_frame. */
size_t frame_send(int ch, unsigned char *end) {
    size_t len = (size_t)(end - outbuf);
    put32(outbuf, (uint32_t)(len - 4));
    chan_write(ch, outbuf, len);
    return len;
}

void keep_frame(uint64_t id, size_t len) {
    struct kept *k = &kept[kept_next % KEPT];
    unsigned char *copy = malloc(len);
    if (!copy) return;           /* RESULT will answer ENOENT; nothing else suffers */
    free(k->frame);
    memcpy(copy, outbuf, len);
    *k = (struct kept){ .id = id, .frame = copy, .len = len };
    kept_next++;
}

size_t send_error(int ch, uint64_t id, int err, const char *fmt, ...) {
    unsigned char *p = frame_begin(T_ERROR, id);
    put32(p, (uint32_t)err);
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf((char *)p + 8, 1024, fmt, args);
    va_end(args);
    if (n < 0) n = 0;
    if (n > 1023) n = 1023;
    put32(p + 4, (uint32_t)n);
    return frame_send(ch, p + 8 + n);
}

void send_out(int ch, uint64_t id, int stream, const unsigned char *data, size_t n) {
    unsigned char *p = frame_begin(T_OUT, id);
    *p++ = (unsigned char)stream;
    memcpy(p, data, n);
    frame_send(ch, p + n);
}
