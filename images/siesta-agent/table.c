/* The process table (protocol 3): detached requests, kept after they exit
 * until FORGET, each with a ring of its recent output that any channel can
 * read from an offset with ATTACH, at the pace of the credit it gives. */
#include "agent.h"

static struct proc procs[MAX_PROCS];
size_t rings_total;

struct attachment {
    int used, chan;
    uint64_t id;
    struct proc *p;
    uint64_t next, credit;
    uint32_t pos;                /* a cursor: the record at offset rec_off starts at pos */
    uint64_t rec_off;
    int cursor;
};
static struct attachment attachments[MAX_ATTACHMENTS];

static uint64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- rings ---- */

static void ring_put(struct ring *g, uint32_t pos, const unsigned char *data, size_t n) {
    size_t first = g->cap - pos < n ? g->cap - pos : n;
    memcpy(g->buf + pos, data, first);
    memcpy(g->buf, data + first, n - first);
}

static void ring_get(const struct ring *g, uint32_t pos, unsigned char *out, size_t n) {
    pos %= g->cap;
    size_t first = g->cap - pos < n ? g->cap - pos : n;
    memcpy(out, g->buf + pos, first);
    memcpy(out + first, g->buf, n - first);
}

static uint32_t record_len(const struct ring *g, uint32_t pos) {
    unsigned char h[RECORD_HEADER];
    ring_get(g, pos, h, RECORD_HEADER);
    return get32(h + 1);
}

/* Appends one read of output as a record, dropping whole oldest records for room. */
static void ring_append(struct ring *g, int stream, const unsigned char *data, size_t n) {
    uint64_t end = g->end + n;
    if (g->cap <= RECORD_HEADER) { g->first = g->end = end; return; }
    if (n > g->cap - RECORD_HEADER) {        /* only its last bytes fit: the ring restarts */
        data += n - (g->cap - RECORD_HEADER);
        n = g->cap - RECORD_HEADER;
        g->head = g->used = 0;
        g->first = end - n;
    }
    while (g->cap - g->used < RECORD_HEADER + n) {
        uint32_t len = record_len(g, g->head);
        g->head = (uint32_t)((g->head + RECORD_HEADER + len) % g->cap);
        g->used -= RECORD_HEADER + len;
        g->first += len;
    }
    unsigned char h[RECORD_HEADER];
    h[0] = (unsigned char)stream;
    put32(h + 1, (uint32_t)n);
    uint32_t pos = (g->head + g->used) % g->cap;
    ring_put(g, pos, h, RECORD_HEADER);
    ring_put(g, (pos + RECORD_HEADER) % g->cap, data, n);
    g->used += (uint32_t)(RECORD_HEADER + n);
    g->end = end;
    if (g->used == RECORD_HEADER + n) g->first = end - n;   /* the only record */
}

/* ---- entries ---- */

struct proc *proc_by_pid(uint32_t pid) {
    for (int i = 0; i < MAX_PROCS; i++)
        if (procs[i].used && (uint32_t)procs[i].pid == pid) return &procs[i];
    return NULL;
}

struct request *running_by_pid(uint32_t pid) {
    struct proc *p = proc_by_pid(pid);
    return p ? p->req : NULL;
}

static void end_attachment(struct attachment *a) {
    memset(a, 0, sizeof *a);
}

static void drop_proc(struct proc *p) {
    for (int i = 0; i < MAX_ATTACHMENTS; i++) {
        struct attachment *a = &attachments[i];
        if (a->used && a->p == p) {
            send_error(a->chan, a->id, ESRCH, "process %d was forgotten", (int)p->pid);
            end_attachment(a);
        }
    }
    if (p->req) p->req->proc = NULL;
    rings_total -= p->ring.cap;
    free(p->ring.buf);
    free(p->tag);
    free(p->argv);
    memset(p, 0, sizeof *p);
}

int ring_room(uint32_t ring_bytes) {
    return ring_bytes <= RINGS_TOTAL - rings_total;
}

/* A detached request's entry, made once it forked (its pid is the key). */
int proc_create(struct request *r, uint32_t ring_bytes, const char *tag, uint32_t tag_len,
                const char *argv, uint32_t argv_len) {
    struct proc *old = proc_by_pid((uint32_t)r->pid);   /* an exited one whose pid came round again */
    if (old) drop_proc(old);
    struct proc *p = NULL;
    for (int i = 0; i < MAX_PROCS && !p; i++)
        if (!procs[i].used) p = &procs[i];
    if (!p) return -1;
    if (argv_len > ARGV_SUMMARY) argv_len = ARGV_SUMMARY;
    *p = (struct proc){
        .used = 1, .pid = r->pid, .request_id = r->id, .req = r,
        .tag = malloc(tag_len + 1), .argv = malloc(argv_len + 1),
        .tag_len = tag_len, .argv_len = argv_len, .pty = (r->flags & FLAG_PTY) != 0,
        .started_ms = wall_ms(),
        .ring = { .buf = ring_bytes ? malloc(ring_bytes) : NULL, .cap = ring_bytes },
    };
    if (!p->tag || !p->argv || (ring_bytes && !p->ring.buf)) {
        free(p->tag); free(p->argv); free(p->ring.buf);
        memset(p, 0, sizeof *p);
        return -1;
    }
    memcpy(p->tag, tag, tag_len);
    memcpy(p->argv, argv, argv_len);
    rings_total += ring_bytes;
    r->proc = p;
    return 0;
}

/* A start that failed (exec): no entry. */
void proc_abandon(struct request *r) {
    if (r->proc) drop_proc(r->proc);
    r->proc = NULL;
}

static void pump(struct attachment *a);

void proc_output(struct proc *p, int stream, const unsigned char *data, size_t n) {
    ring_append(&p->ring, stream, data, n);
    for (int i = 0; i < MAX_ATTACHMENTS; i++)
        if (attachments[i].used && attachments[i].p == p) pump(&attachments[i]);
}

void proc_exited(struct proc *p, int code, uint32_t duration_ms) {
    p->req->proc = NULL;
    p->req = NULL;
    p->exited = 1;
    p->exit_code = code;
    p->ended_ms = wall_ms();
    p->duration_ms = duration_ms;
    for (int i = 0; i < MAX_ATTACHMENTS; i++)
        if (attachments[i].used && attachments[i].p == p) pump(&attachments[i]);
    int exited = 0;
    struct proc *oldest = NULL;
    for (int i = 0; i < MAX_PROCS; i++) {
        struct proc *q = &procs[i];
        if (!q->used || !q->exited) continue;
        exited++;
        if (!oldest || q->ended_ms < oldest->ended_ms) oldest = q;
    }
    if (exited > MAX_EXITED) drop_proc(oldest);
}

/* ---- attachments ---- */

static void send_pexit(struct attachment *a) {
    struct attachment done = *a;
    end_attachment(a);               /* first: sending may lead back here */
    a = &done;
    unsigned char *f = frame_begin(T_PEXIT, a->id);
    put32(f, (uint32_t)a->p->exit_code);
    put64(f + 4, a->p->ring.end);
    put32(f + 12, a->p->duration_ms);
    frame_send(a->chan, f + 16);
}

/* Sends what the credit allows from where the reader is (or, if the ring moved
 * past it, from the oldest byte kept: the DATA's offset shows the gap). */
static void pump(struct attachment *a) {
    struct proc *p = a->p;
    struct ring *g = &p->ring;
    while (a->credit > 0 && chan_open(a->chan) && chan_room(a->chan)) {
        if (a->next < g->first) a->next = g->first;
        if (a->next >= g->end) break;
        if (!a->cursor || a->rec_off < g->first || a->rec_off > a->next) {
            a->pos = g->head;
            a->rec_off = g->first;
            a->cursor = 1;
        }
        uint32_t len;
        while (a->rec_off + (len = record_len(g, a->pos)) <= a->next) {
            a->pos = (uint32_t)((a->pos + RECORD_HEADER + len) % g->cap);
            a->rec_off += len;
        }
        unsigned char stream;
        ring_get(g, a->pos, &stream, 1);
        uint64_t within = a->next - a->rec_off;
        uint64_t take = len - within;
        if (take > a->credit) take = a->credit;
        if (take > MAX_PAYLOAD - 9) take = MAX_PAYLOAD - 9;
        unsigned char *f = frame_begin(T_DATA, a->id);
        put64(f, a->next);
        f[8] = stream;
        ring_get(g, (uint32_t)((a->pos + RECORD_HEADER + within) % g->cap), f + 9, (size_t)take);
        frame_send(a->chan, f + 9 + take);
        a->next += take;
        a->credit -= take;
    }
    if (p->exited && a->next >= g->end && chan_open(a->chan)) {
        send_pexit(a);
    }
}

static struct attachment *find_attachment(int ch, uint64_t id) {
    for (int i = 0; i < MAX_ATTACHMENTS; i++)
        if (attachments[i].used && attachments[i].chan == ch && attachments[i].id == id) return &attachments[i];
    return NULL;
}

/* A channel's queue emptied: its attachments go on where they stopped. */
void pump_channel(int ch) {
    for (int i = 0; i < MAX_ATTACHMENTS; i++)
        if (attachments[i].used && attachments[i].chan == ch) pump(&attachments[i]);
}

void drop_attachments(int ch) {
    for (int i = 0; i < MAX_ATTACHMENTS; i++)
        if (attachments[i].used && attachments[i].chan == ch) end_attachment(&attachments[i]);
}

void detach(int ch, uint64_t id) {
    struct attachment *a = find_attachment(ch, id);
    if (a) end_attachment(a);
    frame_send(ch, frame_begin(T_OK, id));
}

static void attach(int ch, uint64_t id, struct proc *p, uint64_t from, uint32_t credit) {
    if (find_attachment(ch, id)) { send_error(ch, id, EEXIST, "attachment %llx exists", (unsigned long long)id); return; }
    struct attachment *a = NULL;
    for (int i = 0; i < MAX_ATTACHMENTS && !a; i++)
        if (!attachments[i].used) a = &attachments[i];
    if (!a) { send_error(ch, id, EBUSY, "%d attachments, at most %d", MAX_ATTACHMENTS, MAX_ATTACHMENTS); return; }
    struct ring *g = &p->ring;
    if (from == FROM_TAKEN) from = p->taken;  /* where the last TAKE left it */
    if (from > g->end) from = g->end;        /* all ones: from the current end */
    uint64_t first = from > g->first ? from : g->first;
    *a = (struct attachment){ .used = 1, .chan = ch, .id = id, .p = p, .next = first, .credit = credit };
    unsigned char *f = frame_begin(T_ATTACHED, id);
    put64(f, first);
    put64(f + 8, g->end);
    put64(f + 16, from);                     /* what was asked, resolved: first - from was lost */
    frame_send(ch, f + 24);
    pump(a);
}

/* ---- frames ---- */

void send_table(int ch, uint64_t id) {
    unsigned char *start = frame_begin(T_TABLE, id), *f = start + 4;
    uint32_t count = 0;
    for (int i = 0; i < MAX_PROCS; i++) {
        const struct proc *p = &procs[i];
        if (!p->used) continue;
        count++;
        put32(f, (uint32_t)p->pid);
        put64(f + 4, p->request_id);
        f[12] = (unsigned char)p->exited;
        put32(f + 13, (uint32_t)p->exit_code);
        f[17] = (unsigned char)p->pty;
        put64(f + 18, p->started_ms);
        put64(f + 26, p->ended_ms);
        put64(f + 34, p->ring.first);
        put64(f + 42, p->ring.end);
        f += 50;
        put32(f, p->tag_len);
        memcpy(f + 4, p->tag, p->tag_len);
        f += 4 + p->tag_len;
        put32(f, p->argv_len);
        memcpy(f + 4, p->argv, p->argv_len);
        f += 4 + p->argv_len;
    }
    put32(start, count);
    frame_send(ch, f);
}

static void ok(int ch, uint64_t id) {
    frame_send(ch, frame_begin(T_OK, id));
}

/* ATTACH, CREDIT and the P* frames: a pid first (CREDIT: the credit). */
void table_frame(int ch, unsigned type, uint64_t id, const unsigned char *payload, size_t n) {
    if (type == T_CREDIT) {
        if (n != 4) { send_error(ch, id, EINVAL, "CREDIT takes a u32, got %zu bytes", n); return; }
        struct attachment *a = find_attachment(ch, id);
        if (a) {
            a->credit += get32(payload);
            pump(a);
        }
        return;
    }
    static const size_t sizes[] = { [T_ATTACH] = 16, [T_PEOF] = 4, [T_PSIGNAL] = 8, [T_PRESIZE] = 8, [T_FORGET] = 4,
                                    [T_TAKE] = 12 };
    if (n < 4 || (type != T_PINPUT && n != sizes[type])) {
        send_error(ch, id, EINVAL, "frame type %u: a payload of %zu bytes is malformed", type, n);
        return;
    }
    uint32_t pid = get32(payload);
    struct proc *p = proc_by_pid(pid);
    if (!p) { send_error(ch, id, ESRCH, "no process %u in the table", pid); return; }
    if (type == T_ATTACH) { attach(ch, id, p, get64(payload + 4), get32(payload + 12)); return; }
    if (type == T_TAKE) {           /* a shared reader's cursor (a watcher's events) moves on */
        uint64_t upto = get64(payload + 4);
        if (upto > p->ring.end) upto = p->ring.end;
        if (upto > p->taken) p->taken = upto;
        ok(ch, id);
        return;
    }
    if (type == T_FORGET) {
        if (!p->exited) { send_error(ch, id, EBUSY, "process %u is running", pid); return; }
        drop_proc(p);
        ok(ch, id);
        return;
    }
    struct request *r = p->req;
    if (!r) { send_error(ch, id, ESRCH, "process %u has exited", pid); return; }
    switch (type) {
    case T_PINPUT:
    case T_PEOF:
        if (!r->in_accept || r->in_fd < 0) { send_error(ch, id, EPIPE, "process %u: stdin is closed", pid); return; }
        if (type == T_PINPUT) take_input(r, payload + 4, n - 4);
        else end_input(r);
        break;
    case T_PSIGNAL: {
        uint32_t signo = get32(payload + 4);
        if (signo == 0 || signo >= 65) { send_error(ch, id, EINVAL, "no signal %u", signo); return; }
        signal_group(r, (int)signo);
        break;
    }
    case T_PRESIZE: {
        if (r->pty_fd < 0) { send_error(ch, id, ENOTTY, "process %u has no terminal", pid); return; }
        struct winsize size = { .ws_row = (unsigned short)(payload[4] | payload[5] << 8),
                                .ws_col = (unsigned short)(payload[6] | payload[7] << 8) };
        ioctl(r->pty_fd, TIOCSWINSZ, &size);
        break;
    }
    }
    ok(ch, id);
}
