/* The stand-in's executables (pulumi, kubectl, aws) as a compiled client of the fork server
 * (forkserver.py). A Python client spent about 40 ms of CPU per call starting an interpreter and
 * importing json and socket before it could hand the command over; a scenario's `up` makes about
 * 25 such calls. This client does the same hand-over in about a millisecond.
 *
 * Usage: standin-client MODULE SOCKET LOCAL ARGV0 [ARG...]
 *   MODULE  the stand-in module that runs the command (cli, kubectl, aws_cli)
 *   SOCKET  the fork server's Unix socket ("" when there is none)
 *   LOCAL   the Python script that runs the command in its own process, exec'd when the server
 *           does not answer
 *   ARGV0.. the command's argv as its caller gave it
 *
 * It sends one length-prefixed message carrying its descriptors 0-2 (SCM_RIGHTS): MODULE, the
 * working directory, the argument count, the arguments and the environment's NAME=VALUE entries,
 * each ended by a NUL byte. The server answers "pid N\n" once the runner exists, then "exit N\n" or
 * "signal N\n". SIGINT, SIGTERM and SIGHUP go on to the runner; the client ends as the runner did. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

extern char **environ;

static volatile sig_atomic_t runner = 0;

static void forward(int sig) {
    if (runner > 0) kill((pid_t)runner, sig);
}

struct message {
    char *data;
    size_t len, cap;
};

static void add(struct message *m, const char *text) {
    size_t n = strlen(text) + 1; /* with its NUL */
    if (m->len + n > m->cap) {
        while (m->len + n > m->cap) m->cap = m->cap ? m->cap * 2 : 65536;
        m->data = realloc(m->data, m->cap);
        if (!m->data) {
            fputs("stand-in: out of memory\n", stderr);
            exit(1);
        }
    }
    memcpy(m->data + m->len, text, n);
    m->len += n;
}

/* One "WORD NUMBER\n" line of the server's answer; 0 when the connection ended first. */
static int answer(int conn, char *word, size_t size, long *number) {
    char line[128];
    size_t used = 0;
    while (used < sizeof(line) - 1) {
        ssize_t got = read(conn, line + used, 1);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return 0;
        if (line[used] == '\n') break;
        used++;
    }
    line[used] = '\0';
    char *space = strchr(line, ' ');
    if (!space || (size_t)(space - line) >= size) return 0;
    memcpy(word, line, (size_t)(space - line));
    word[space - line] = '\0';
    *number = strtol(space + 1, NULL, 10);
    return 1;
}

static int send_all(int conn, const char *data, size_t len) {
    int fds[3] = {0, 1, 2};
    char control[CMSG_SPACE(sizeof(fds))];
    memset(control, 0, sizeof(control));
    struct iovec iov = {(void *)data, len};
    struct msghdr msg = {0};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(fds));
    memcpy(CMSG_DATA(cmsg), fds, sizeof(fds));
    ssize_t sent;
    do sent = sendmsg(conn, &msg, 0);
    while (sent < 0 && errno == EINTR);
    if (sent < 0) return 0;
    size_t done = (size_t)sent;
    while (done < len) {
        sent = send(conn, data + done, len - done, 0);
        if (sent < 0 && errno == EINTR) continue;
        if (sent <= 0) return 0;
        done += (size_t)sent;
    }
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fputs("usage: standin-client MODULE SOCKET LOCAL ARGV0 [ARG...]\n", stderr);
        return 2;
    }
    const char *module = argv[1], *path = argv[2], *local = argv[3];
    char **args = argv + 4;
    int count = argc - 4;

    int conn = -1;
    struct sockaddr_un address = {0};
    address.sun_family = AF_UNIX;
    if (path[0] && strlen(path) < sizeof(address.sun_path)) {
        strcpy(address.sun_path, path);
        conn = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (conn >= 0 && connect(conn, (struct sockaddr *)&address, sizeof(address)) != 0) {
            close(conn);
            conn = -1;
        }
    }
    if (conn < 0) { /* no server: the command in a process of its own */
        char *own[count + 1];
        own[0] = (char *)local;
        for (int i = 1; i < count; i++) own[i] = args[i];
        own[count] = NULL;
        execv(local, own);
        perror("stand-in: cannot run the command");
        return 127;
    }
    signal(SIGPIPE, SIG_IGN); /* a server that went away is an error below, not a silent death */

    struct message m = {0};
    add(&m, "len"); /* four bytes (with its NUL) held for the length, written below */
    add(&m, module);
    char *cwd = getcwd(NULL, 0);
    if (!cwd) {
        perror("stand-in: getcwd");
        return 1;
    }
    add(&m, cwd);
    char number[32];
    snprintf(number, sizeof(number), "%d", count);
    add(&m, number);
    for (int i = 0; i < count; i++) add(&m, args[i]);
    for (char **entry = environ; *entry; entry++) add(&m, *entry);
    uint32_t size = htonl((uint32_t)(m.len - 4));
    memcpy(m.data, &size, 4);
    if (!send_all(conn, m.data, m.len)) {
        perror("stand-in: the fork server did not take the command");
        return 1;
    }

    char word[16];
    long value;
    if (!answer(conn, word, sizeof(word), &value)) {
        fputs("stand-in: the fork server did not start the command\n", stderr);
        return 1;
    }
    runner = (sig_atomic_t)value;
    struct sigaction pass = {0};
    pass.sa_handler = forward;
    pass.sa_flags = SA_RESTART;
    sigemptyset(&pass.sa_mask);
    sigaction(SIGINT, &pass, NULL);
    sigaction(SIGTERM, &pass, NULL);
    sigaction(SIGHUP, &pass, NULL);
    if (!answer(conn, word, sizeof(word), &value)) {
        fputs("stand-in: the fork server lost the command\n", stderr);
        return 1;
    }
    if (strcmp(word, "signal") == 0) { /* end as the runner did: by the same signal */
        if (value != SIGKILL) signal((int)value, SIG_DFL);
        kill(getpid(), (int)value);
    }
    _exit((int)value);
}
