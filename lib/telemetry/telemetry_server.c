/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The telemetry thread: the unix socket (one request line in, one JSON line out), the
 * Prometheus HTTP endpoint, and their start and stop. The thread is not an lcore; it reads
 * counters with lock-free loads and reaches lcores only through cr_send().
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "telemetry_internal.h"

CR_LOG_COMPONENT(log_tel, "lib.telemetry");

/* An HTTP client that has not sent its request by then is dropped. */
#define HTTP_TIMEOUT_NS (5ull * 1000 * 1000 * 1000)
/* A unix request line may end in "\r\n". */
#define UNIX_IN_MAX (CR_TELEMETRY_MAX_REQUEST + 2)
/* The client table: unix clients in [0, CR_TELEMETRY_MAX_CLIENTS), HTTP ones after them,
 * so a flood of one kind never takes the other's slots. */
#define N_CLIENTS (CR_TELEMETRY_MAX_CLIENTS + CR_TELEMETRY_MAX_HTTP_CLIENTS)

struct client {
	int fd; /* -1: free slot */
	bool http;
	bool closing; /* close once the reply is out */
	size_t in_len;
	char in[CR__TEL_HTTP_MAX];
	char *out;
	size_t out_len, out_off;
	uint64_t deadline_ns; /* HTTP only */
};

/*
 * Start and stop hold `lock`; while the thread runs, only it touches the fds, clients and
 * scratch buffer. `path` and `metrics` are written before the thread starts and cleared
 * after it is joined.
 */
static struct server {
	pthread_mutex_t lock;
	bool running;
	_Atomic bool sock_up; /* release at start: pairs with cr_telemetry_socket_path() */
	pthread_t thread;
	int stop_fd, unix_fd, http_fd;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	bool own_path; /* we bound it: unlink at stop if it is still our inode */
	dev_t dev;
	ino_t ino;
	struct client *clients;
	char *scratch; /* CR_TELEMETRY_MAX_REPLY + 1 */
} srv = {.lock = PTHREAD_MUTEX_INITIALIZER, .stop_fd = -1, .unix_fd = -1, .http_fd = -1};

static int
open_unix(void)
{
	struct sockaddr_un sa;
	struct stat st;
	int fd, rc;

	rc = cr__tel_unix_addr(&sa, srv.path);
	if (rc != 0)
		return rc;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		rc = -errno;
		CR_LOG(log_tel, ERR, "cannot bind %s: %s", srv.path, cr_strerror(rc));
		goto out_close;
	}
	srv.own_path = true;
	/* A unix socket takes its mode from the file; SO_PEERCRED checks back it up. */
	if (chmod(srv.path, 0600) != 0 || stat(srv.path, &st) != 0 || listen(fd, 16) != 0) {
		rc = -errno;
		CR_LOG(log_tel, ERR, "cannot set up %s: %s", srv.path, cr_strerror(rc));
		goto out_unlink;
	}
	srv.dev = st.st_dev;
	srv.ino = st.st_ino;
	srv.unix_fd = fd;
	return 0;

out_unlink:
	unlink(srv.path);
	srv.own_path = false;
out_close:
	close(fd);
	return rc;
}

/* Format the address @p fd listens on as "HOST:PORT" ("[v6]:PORT"). */
static void
format_sockname(int fd, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[INET6_ADDRSTRLEN];

	buf[0] = '\0';
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
		return;
	if (ss.ss_family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ntohs(a->sin_port));
	} else if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, ntohs(a->sin6_port));
	}
}

static int
open_http(const struct sockaddr_storage *ss, socklen_t len)
{
	char shown[80];
	int fd, one = 1, rc;

	fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)ss, len) != 0 || listen(fd, 16) != 0) {
		rc = -errno;
		/* The socket is not bound, so show the address we were given. */
		if (ss->ss_family == AF_INET6) {
			const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
			char h[INET6_ADDRSTRLEN];

			inet_ntop(AF_INET6, &a->sin6_addr, h, sizeof(h));
			snprintf(shown, sizeof(shown), "[%s]:%u", h, ntohs(a->sin6_port));
		} else {
			const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
			char h[INET_ADDRSTRLEN];

			inet_ntop(AF_INET, &a->sin_addr, h, sizeof(h));
			snprintf(shown, sizeof(shown), "%s:%u", h, ntohs(a->sin_port));
		}
		CR_LOG(log_tel, ERR, "--metrics %s: cannot listen: %s", shown, cr_strerror(rc));
		close(fd);
		return rc;
	}
	srv.http_fd = fd;
	format_sockname(fd, cr__tel_info.metrics, sizeof(cr__tel_info.metrics));
	return 0;
}

/* ---- clients ---- */

static void
client_close(struct client *c)
{
	close(c->fd);
	free(c->out);
	c->fd = -1;
	c->out = NULL;
	c->out_len = c->out_off = 0;
	c->in_len = 0;
	c->closing = false;
}

/* Send what is pending without blocking. @return false if the client is gone. */
static bool
client_flush(struct client *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return true;
		if (n <= 0) {
			client_close(c);
			return false;
		}
		c->out_off += (size_t)n;
	}
	free(c->out);
	c->out = NULL;
	c->out_len = c->out_off = 0;
	if (c->closing) {
		client_close(c);
		return false;
	}
	return true;
}

/* Queue @p n bytes of @p text (plus a newline for unix clients) and start sending. */
static bool
client_reply(struct client *c, const char *text, size_t n)
{
	size_t nl = c->http ? 0 : 1;

	c->out = malloc(n + nl);
	if (c->out == NULL) {
		client_close(c);
		return false;
	}
	memcpy(c->out, text, n);
	if (nl != 0)
		c->out[n] = '\n';
	c->out_len = n + nl;
	c->out_off = 0;
	return client_flush(c);
}

static void
consume(struct client *c, size_t n)
{
	memmove(c->in, c->in + n, c->in_len - n);
	c->in_len -= n;
}

/* Answer the first complete request in the input, if there is one. @return true if it
 * answered one and the client is still there with nothing pending. */
static bool
serve_unix(struct client *c, bool eof)
{
	struct cr_json j;
	char *nl = memchr(c->in, '\n', c->in_len);
	size_t n;

	cr_json_init(&j, srv.scratch, CR_TELEMETRY_MAX_REPLY + 1);
	if (nl == NULL && c->in_len >= UNIX_IN_MAX) {
		/* No way to find where the next request starts: answer, then hang up. */
		cr__tel_dispatch(c->in, c->in_len, &j);
		c->in_len = 0;
		c->closing = true;
		client_reply(c, cr_json_text(&j), cr_json_len(&j));
		return false;
	}
	if (nl == NULL && !(eof && c->in_len > 0))
		return false;
	n = nl != NULL ? (size_t)(nl - c->in) + 1 : c->in_len;
	cr__tel_dispatch(c->in, n, &j);
	consume(c, n);
	if (eof && c->in_len == 0)
		c->closing = true;
	return client_reply(c, cr_json_text(&j), cr_json_len(&j)) && c->out == NULL;
}

static void
serve_http(struct client *c)
{
	struct cr__tbuf t;
	char *end;

	cr__tbuf_init(&t, srv.scratch, CR_TELEMETRY_MAX_REPLY + 1);
	end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
	if (end == NULL)
		end = memmem(c->in, c->in_len, "\n\n", 2);
	if (end == NULL && c->in_len < sizeof(c->in))
		return;
	if (end == NULL)
		cr__tbuf_printf(&t, "HTTP/1.0 431 Request Header Fields Too Large\r\n"
				    "Content-Length: 0\r\nConnection: close\r\n\r\n");
	else
		cr__http_respond(c->in, (size_t)(end - c->in), &t);
	c->in_len = 0;
	c->closing = true;
	client_reply(c, t.buf, t.len);
}

static void
client_read(struct client *c)
{
	size_t room = (c->http ? sizeof(c->in) : UNIX_IN_MAX) - c->in_len;
	ssize_t n = room > 0 ? recv(c->fd, c->in + c->in_len, room, MSG_DONTWAIT) : 0;
	bool eof = n == 0 && room > 0;
	unsigned i;

	if (n < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			client_close(c);
		return;
	}
	c->in_len += (size_t)n;
	if (c->http) {
		if (eof)
			client_close(c);
		else
			serve_http(c);
		return;
	}
	/* Answer what is complete, one reply in flight at a time; bounded by the input. */
	for (i = 0; i < UNIX_IN_MAX && serve_unix(c, eof); i++)
		;
	if (eof && c->fd >= 0 && c->out == NULL)
		client_close(c);
}

static bool
peer_allowed(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
		return false;
	return cred.uid == geteuid() || cred.uid == 0;
}

/*
 * A free slot of the @p http kind's table. When the HTTP table is full, the oldest client
 * still sending its request makes room: a scraper sends its request at once, so only a
 * slow or idle one can be that old, and a flood of them cannot lock scrapers out.
 */
static struct client *
free_slot(bool http)
{
	unsigned lo = http ? CR_TELEMETRY_MAX_CLIENTS : 0;
	unsigned hi = http ? N_CLIENTS : CR_TELEMETRY_MAX_CLIENTS;
	struct client *oldest = NULL;
	unsigned i;

	for (i = lo; i < hi; i++) {
		struct client *c = &srv.clients[i];

		if (c->fd < 0)
			return c;
		if (http && c->out == NULL &&
		    (oldest == NULL || c->deadline_ns < oldest->deadline_ns))
			oldest = c;
	}
	if (oldest != NULL) {
		CR_LOG(log_tel, DEBUG, "dropped the oldest incomplete metrics request for a new one");
		client_close(oldest);
	}
	return oldest;
}

static void
accept_clients(int lfd, bool http)
{
	static const char busy[] = "{\"error\":\"too many telemetry clients\"}\n";
	unsigned k;

	/* A few per wake-up: a flood of connects cannot starve the clients we have. */
	for (k = 0; k < CR_TELEMETRY_MAX_CLIENTS; k++) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct client *c;

		if (fd < 0)
			return;
		if (!http && !peer_allowed(fd)) {
			CR_LOG(log_tel, WARNING, "refused a client of another user on %s",
			       srv.path);
			close(fd);
			continue;
		}
		c = free_slot(http);
		if (c == NULL) {
			if (!http &&
			    send(fd, busy, sizeof(busy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
				CR_LOG(log_tel, DEBUG, "refused a client: too many");
			close(fd);
			continue;
		}
		c->fd = fd;
		c->http = http;
		c->deadline_ns = http ? cr_clock_ns() + HTTP_TIMEOUT_NS : 0;
	}
}

/* ---- the thread ---- */

static nfds_t
build_pollset(struct pollfd *pfd, struct client **who)
{
	nfds_t n = 0;
	unsigned i;

	pfd[n++] = (struct pollfd){.fd = srv.stop_fd, .events = POLLIN};
	pfd[n++] = (struct pollfd){.fd = srv.unix_fd, .events = POLLIN};
	pfd[n++] = (struct pollfd){.fd = srv.http_fd, .events = POLLIN};
	for (i = 0; i < N_CLIENTS; i++) {
		struct client *c = &srv.clients[i];

		if (c->fd < 0)
			continue;
		who[n] = c;
		pfd[n++] =
		    (struct pollfd){.fd = c->fd, .events = c->out != NULL ? POLLOUT : POLLIN};
	}
	return n;
}

static void
expire_http(void)
{
	uint64_t now = cr_clock_ns();
	unsigned i;

	for (i = CR_TELEMETRY_MAX_CLIENTS; i < N_CLIENTS; i++)
		if (srv.clients[i].fd >= 0 &&
		    now > srv.clients[i].deadline_ns)
			client_close(&srv.clients[i]);
}

static void *
server_thread(void *arg)
{
	struct pollfd pfd[3 + N_CLIENTS];
	struct client *who[3 + N_CLIENTS];
	nfds_t i, n;

	(void)arg;
	for (;;) {
		n = build_pollset(pfd, who);
		/* Wake once a second to drop HTTP clients that say nothing. */
		if (poll(pfd, n, 1000) < 0 && errno != EINTR)
			break;
		if (pfd[0].revents != 0)
			break;
		if (pfd[1].revents & POLLIN)
			accept_clients(srv.unix_fd, false);
		if (pfd[2].revents & POLLIN)
			accept_clients(srv.http_fd, true);
		for (i = 3; i < n; i++) {
			struct client *c = who[i];

			/* A new client may have taken a slot freed above; skip stale entries. */
			if (pfd[i].revents == 0 || c->fd != pfd[i].fd)
				continue;
			if (c->out != NULL) {
				if (client_flush(c))
					for (unsigned k = 0;
					     k < UNIX_IN_MAX && !c->http && serve_unix(c, false);
					     k++)
						;
			} else {
				client_read(c);
			}
		}
		expire_http();
	}
	return NULL;
}

/* ---- start and stop ---- */

static bool
app_name_ok(const char *s)
{
	size_t i, n = s != NULL ? strlen(s) : 0;

	if (n == 0 || n >= sizeof(cr__tel_info.app) || s[0] == '.')
		return false;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '.' || s[i] == '-'))
			return false;
	return true;
}

/* Under srv.lock, the thread not running: close and free everything start made. */
static void
release_all(void)
{
	struct stat st;
	unsigned i;

	for (i = 0; srv.clients != NULL && i < N_CLIENTS; i++)
		if (srv.clients[i].fd >= 0)
			client_close(&srv.clients[i]);
	free(srv.clients);
	free(srv.scratch);
	srv.clients = NULL;
	srv.scratch = NULL;
	if (srv.unix_fd >= 0)
		close(srv.unix_fd);
	if (srv.http_fd >= 0)
		close(srv.http_fd);
	if (srv.stop_fd >= 0)
		close(srv.stop_fd);
	srv.unix_fd = srv.http_fd = srv.stop_fd = -1;
	/* Only the file we made: someone may have put another in its place meanwhile. */
	if (srv.own_path && lstat(srv.path, &st) == 0 && st.st_dev == srv.dev &&
	    st.st_ino == srv.ino)
		unlink(srv.path);
	cr__tel_release_dir();
	srv.own_path = false;
	srv.path[0] = '\0';
	memset(&cr__tel_info, 0, sizeof(cr__tel_info));
}

static int
alloc_state(void)
{
	unsigned i;

	srv.clients = calloc(N_CLIENTS, sizeof(*srv.clients));
	srv.scratch = malloc(CR_TELEMETRY_MAX_REPLY + 1);
	srv.stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (srv.clients == NULL || srv.scratch == NULL)
		return -ENOMEM;
	if (srv.stop_fd < 0)
		return -errno;
	for (i = 0; i < N_CLIENTS; i++)
		srv.clients[i].fd = -1;
	return 0;
}

/* The thread takes no signal: the app's signal handling stays where the app put it. */
static int
spawn_thread(void)
{
	sigset_t all, old;
	int rc;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = -pthread_create(&srv.thread, NULL, server_thread, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc == 0)
		pthread_setname_np(srv.thread, "cr-telemetry");
	return rc;
}

/* What to do about the last failed start; a literal, so any thread may read it. */
static const char *_Atomic hint = "";

const char *
cr_telemetry_hint(void)
{
	return atomic_load_explicit(&hint, memory_order_relaxed);
}

int
cr_telemetry_start(const struct cr_eal_config *cfg, const char *app_name)
{
	struct sockaddr_storage ss;
	socklen_t sslen;
	bool sock, http;
	int rc;

	hint = "";
	if (cfg == NULL || !app_name_ok(app_name))
		return -EINVAL;
	pthread_mutex_lock(&srv.lock);
	if (srv.running) {
		rc = -EALREADY;
		goto out_unlock;
	}
	sock = strcmp(cfg->telemetry, "off") != 0;
	http = cr__metrics_config(&ss, &sslen);
	rc = 0;
	if (!sock && !http)
		goto out_unlock;
	memset(&cr__tel_info, 0, sizeof(cr__tel_info));
	snprintf(cr__tel_info.app, sizeof(cr__tel_info.app), "%s", app_name);
	cr__tel_info.started_ns = cr_clock_ns();
	rc = alloc_state();
	if (rc == 0 && sock)
		rc = cr__tel_choose_path(cfg->telemetry, app_name, srv.path, sizeof(srv.path));
	if (rc == 0 && sock)
		rc = open_unix();
	/* What the user can do about a failure depends on which part failed. */
	hint = rc != 0 && sock ? "--telemetry off runs without the socket" : "";
	if (rc == 0 && http) {
		rc = open_http(&ss, sslen);
		if (rc != 0)
			hint = rc == -EADDRINUSE ? "another --metrics port (0: the kernel picks one) "
						   "or no --metrics runs without it"
						 : "no --metrics runs without it";
	}
	if (rc != 0)
		goto out_release;
	if (sock)
		snprintf(cr__tel_info.socket, sizeof(cr__tel_info.socket), "%s", srv.path);
	rc = spawn_thread();
	if (rc != 0)
		goto out_release;
	srv.running = true;
	/* release: the path is complete before anyone can read it */
	atomic_store_explicit(&srv.sock_up, sock, memory_order_release);
	pthread_mutex_unlock(&srv.lock);
	return 0;

out_release:
	release_all();
out_unlock:
	pthread_mutex_unlock(&srv.lock);
	return rc;
}

void
cr_telemetry_stop(void)
{
	uint64_t one = 1;

	pthread_mutex_lock(&srv.lock);
	if (!srv.running)
		goto out_unlock;
	if (pthread_equal(pthread_self(), srv.thread)) {
		CR_LOG(log_tel, ERR, "cr_telemetry_stop() called from a command handler; ignored");
		goto out_unlock;
	}
	/* relaxed: readers only need to stop seeing the path; the lock orders the rest. */
	atomic_store_explicit(&srv.sock_up, false, memory_order_relaxed);
	if (write(srv.stop_fd, &one, sizeof(one)) != sizeof(one))
		CR_LOG(log_tel, ERR, "cannot wake the telemetry thread: %s", cr_strerror(-errno));
	pthread_join(srv.thread, NULL);
	srv.running = false;
	release_all();
out_unlock:
	pthread_mutex_unlock(&srv.lock);
}

const char *
cr_telemetry_socket_path(void)
{
	/* acquire: pairs with the release in cr_telemetry_start() */
	return atomic_load_explicit(&srv.sock_up, memory_order_acquire) ? srv.path : NULL;
}

int
cr_telemetry_metrics_addr(char *buf, size_t len)
{
	int n, rc = -ENOENT;

	pthread_mutex_lock(&srv.lock);
	if (srv.running && cr__tel_info.metrics[0] != '\0') {
		n = snprintf(buf, len, "%s", cr__tel_info.metrics);
		rc = n < 0 || (size_t)n >= len ? -ENOSPC : 0;
	}
	pthread_mutex_unlock(&srv.lock);
	return rc;
}

void
cr_telemetry_announce(const char *app_name)
{
	const char *path = cr_telemetry_socket_path();
	char addr[80];

	if (path != NULL)
		printf("%s: telemetry on %s\n", app_name, path);
	if (cr_telemetry_metrics_addr(addr, sizeof(addr)) == 0)
		printf("%s: metrics on http://%s/metrics\n", app_name, addr);
	fflush(stdout);
}
