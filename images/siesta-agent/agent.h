/* siesta-agent: what its files share (see main.c for the whole picture). */
#ifndef SIESTA_AGENT_H
#define SIESTA_AGENT_H
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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
#include <stddef.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROTOCOL_VERSION 3
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

/* Channels (protocol 3): 0 is the engine's attach (stdin/stdout), 1.. are
 * connections to the abstract unix socket @siesta-agent. */
#define SOCKET_NAME "siesta-agent"
#define MAX_SOCKET_CHANNELS 16
#define MAX_CHANNELS (1 + MAX_SOCKET_CHANNELS)
#define CHANNEL_QUEUE_MAX (8u << 20)      /* unwritten frames of a socket channel */

/* The process table (protocol 3): detached requests and the rings of their output. */
#define MAX_PROCS (MAX_SLOTS + 8)
#define MAX_EXITED 64
#define RING_DEFAULT (1u << 20)
#define RINGS_TOTAL (64u << 20)
#define RECORD_HEADER 5                   /* u8 stream, u32 length */
#define MAX_TAG 1024
#define FROM_TAKEN (UINT64_MAX - 1)      /* ATTACH from the process's TAKE cursor */
#define ARGV_SUMMARY 4096
#define MAX_ATTACHMENTS 256

enum frame_type {
    T_SPAWN = 1, T_STDIN = 2, T_STDIN_EOF = 3, T_CANCEL = 4, T_PING = 5, T_RESULT = 6,
    T_SIGNAL = 7, T_RESIZE = 8,
    T_OUT = 10, T_EXIT = 11, T_PONG = 12, T_ERROR = 13, T_STARTED = 14,
    T_LIST = 20, T_ATTACH = 21, T_CREDIT = 22, T_DETACH = 23, T_PINPUT = 24, T_PEOF = 25,
    T_PSIGNAL = 26, T_PRESIZE = 27, T_FORGET = 28, T_TAKE = 29,
    T_ATTACHED = 41, T_DATA = 42, T_PEXIT = 43, T_TABLE = 44, T_OK = 45,
};

/* DETACHED (protocol 2): a process of its own that outlives the call that started
 * it (E2B's processes); KILL_RUNNING and CANCEL 0 leave it alone, and STARTED
 * tells its pid. PTY (protocol 2): its stdin, stdout and stderr are a new
 * terminal (its controlling one), whose output is stream 1 and whose size
 * RESIZE sets. */
enum spawn_flag {
    FLAG_STDIN = 1, FLAG_STREAM = 2, FLAG_KILL_RUNNING = 4, FLAG_DETACHED = 8, FLAG_PTY = 16,
    FLAG_RING = 32,              /* protocol 3: u32 ring_bytes and string tag follow argv */
};
#define ALL_FLAGS (FLAG_STDIN | FLAG_STREAM | FLAG_KILL_RUNNING | FLAG_DETACHED | FLAG_PTY | FLAG_RING)


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
    int chan;                    /* where its frames go; -1: that channel closed */
    struct proc *proc;           /* a detached request's table entry */
};

struct channel {
    int used;                    /* channel 0 always */
    int fd;                      /* a socket's; channel 0 reads 0 and writes 1 */
    int reading;                 /* its input has not ended */
    int blocked;                 /* its next frame waits for a command to read its stdin */
    int dead;                    /* closed at the loop's next turn (never channel 0) */
    int hello;                   /* a socket's first byte is still to come: HELLO_* */
    unsigned char *inbuf;
    size_t in_start, in_end;
    uint64_t in_skip;            /* bytes of an oversized or bogus frame still to drop */
    unsigned char *queue;        /* a socket's unwritten frames: queue[q_start..q_end) */
    size_t q_start, q_end, q_cap;
};

enum {                           /* the relay's first byte, sent with its credentials */
    HELLO_NONE = 0,              /* read: frames follow */
    HELLO_TAKE,                  /* the peer was checked at accept: the byte is only dropped */
    HELLO_CHECK,                 /* gVisor: the peer is checked by the credentials the byte carries */
};

struct ring {                    /* records (u8 stream, u32 length, bytes), oldest at head */
    unsigned char *buf;
    uint32_t cap, head, used;
    uint64_t first, end;         /* absolute offsets: oldest kept byte, next byte */
};

struct proc {                    /* an entry of the process table */
    int used;
    pid_t pid;
    uint64_t request_id;
    struct request *req;         /* while it runs */
    char *tag, *argv;
    uint32_t tag_len, argv_len;
    int pty, exited;
    int32_t exit_code;
    uint64_t started_ms, ended_ms;   /* wall clock */
    uint32_t duration_ms;
    uint64_t taken;              /* TAKE's cursor: where the next reader "from what is taken" starts */
    struct ring ring;
};


extern struct request slots[MAX_SLOTS];
extern int64_t now;
extern pid_t self_pid;
extern const char *workdir;
extern int devnull;
extern int sigfd;
extern struct channel channels[MAX_CHANNELS];
extern int listen_fd;
extern size_t rings_total;
extern size_t input_total;
extern int shutting_down;
extern int64_t shutdown_at;
extern char *argv_ptrs[MAX_ARGC + 1];

struct kept {                    /* final frames (EXIT, or ERROR of a failed start) */
    uint64_t id;
    unsigned char *frame;
    size_t len;
};
extern struct kept kept[KEPT];
extern unsigned kept_next;


void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int64_t clock_ms(void);
void put32(unsigned char *p, uint32_t v);
void put64(unsigned char *p, uint64_t v);
uint32_t get32(const unsigned char *p);
uint64_t get64(const unsigned char *p);
void set_nonblock(int fd);
void close_fd(int *fd);

/* io.c: frames out */
void write_stdout(const unsigned char *p, size_t n);
unsigned char *frame_begin(enum frame_type type, uint64_t id);
size_t frame_send(int ch, unsigned char *end);
void keep_frame(uint64_t id, size_t len);
size_t send_error(int ch, uint64_t id, int err, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void send_out(int ch, uint64_t id, int stream, const unsigned char *data, size_t n);

/* channel.c */
void channels_init(void);
void chan_write(int ch, const unsigned char *p, size_t n);
int chan_open(int ch);
int chan_room(int ch);
void flush_channel(struct channel *c);
void process_input(int ch);
void read_channel(int ch);
void close_channel(int ch);
void accept_channels(void);
int run_relay(void);

/* dispatch.c */
void handle_frame(int ch, unsigned type, uint64_t id, const unsigned char *payload, size_t n);
int must_wait(unsigned type, uint64_t id, const unsigned char *payload, size_t n);

/* requests.c */
struct table_spec { uint32_t ring_bytes; const char *tag; uint32_t tag_len, argv_len; };
struct request *find_request(uint64_t id);
int count_requests(int live_only);
void signal_group(struct request *r, int sig);
void kill_request(struct request *r);
void maybe_finish(struct request *r);
void read_output(struct request *r, int k);
void feed_input(struct request *r);
void take_input(struct request *r, const unsigned char *data, size_t n);
void end_input(struct request *r);
void read_status(struct request *r);
void spawn(int ch, uint64_t id, const unsigned char *payload, size_t n);

/* table.c */
int ring_room(uint32_t ring_bytes);
int proc_create(struct request *r, uint32_t ring_bytes, const char *tag, uint32_t tag_len,
                const char *argv, uint32_t argv_len);
void proc_abandon(struct request *r);
void proc_output(struct proc *p, int stream, const unsigned char *data, size_t n);
void proc_exited(struct proc *p, int code, uint32_t duration_ms);
struct proc *proc_by_pid(uint32_t pid);
struct request *running_by_pid(uint32_t pid);
void drop_attachments(int ch);
void pump_channel(int ch);
void detach(int ch, uint64_t id);
void send_table(int ch, uint64_t id);
void table_frame(int ch, unsigned type, uint64_t id, const unsigned char *payload, size_t n);

/* main.c */
void reap(void);
void begin_shutdown(int sig);
void read_signals(void);
void run_timers(void);
int poll_timeout(void);
void setup(void);
int run_as_init(char **command);

/* trust.c */
void trust_authority(void);

struct reader {
    const unsigned char *p;
    size_t left;
};

static inline int read32(struct reader *rd, uint32_t *v) {
    if (rd->left < 4) return 0;
    *v = get32(rd->p);
    rd->p += 4;
    rd->left -= 4;
    return 1;
}

#endif
