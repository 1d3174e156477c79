/* siesta-agent: the deployment's egress authority added to the sandbox's trust store.
 *
 * Where the egress proxy substitutes secrets it ends a sandbox's TLS with a
 * certificate of the deployment's authority, so the sandbox must trust it. The
 * service passes the authority (a public certificate, PEM) to the container as
 * SIESTA_EGRESS_CA; at every start the agent, root, puts it where Debian's tools
 * look: its own file under /usr/local/share/ca-certificates (which
 * update-ca-certificates keeps when a package rebuilds the bundle) and appended to
 * /etc/ssl/certs/ca-certificates.crt (what OpenSSL, curl and Python read) unless it
 * is there already. Then the variable is unset: no command inherits it.
 */
#include "agent.h"

#include <sys/stat.h>

#define AUTHORITY_FILE "/usr/local/share/ca-certificates/siesta-egress.crt"
#define BUNDLE_FILE "/etc/ssl/certs/ca-certificates.crt"
#define MAX_BUNDLE (16 * 1024 * 1024)

static int write_all(int fd, const char *data, size_t len) {
    while (len) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Whether the bundle holds `pem` already (a restart of the container keeps its disk). */
static int bundle_has(const char *pem) {
    int fd = open(BUNDLE_FILE, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    struct stat st;
    int found = 0;
    if (fstat(fd, &st) == 0 && st.st_size > 0 && st.st_size < MAX_BUNDLE) {
        char *text = malloc((size_t)st.st_size + 1);
        ssize_t got = text ? read(fd, text, (size_t)st.st_size) : -1;
        if (got >= 0) {
            text[got] = 0;
            found = strstr(text, pem) != NULL;
        }
        free(text);
    }
    close(fd);
    return found;
}

void trust_authority(void) {
    const char *value = getenv("SIESTA_EGRESS_CA");
    if (!value || !*value) return;
    char *pem = strdup(value);
    unsetenv("SIESTA_EGRESS_CA");
    if (!pem) return;
    size_t len = strlen(pem);
    mkdir("/usr/local/share/ca-certificates", 0755);
    int fd = open(AUTHORITY_FILE, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0 || write_all(fd, pem, len) < 0) note("trust: %s: %s", AUTHORITY_FILE, strerror(errno));
    if (fd >= 0) close(fd);
    if (!bundle_has(pem)) {
        mkdir("/etc/ssl", 0755);
        mkdir("/etc/ssl/certs", 0755);
        fd = open(BUNDLE_FILE, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0 || write_all(fd, "\n", 1) < 0 || write_all(fd, pem, len) < 0)
            note("trust: %s: %s", BUNDLE_FILE, strerror(errno));
        if (fd >= 0) close(fd);
    }
    free(pem);
}
