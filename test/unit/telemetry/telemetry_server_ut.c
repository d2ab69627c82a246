/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The endpoint end to end against the real runtime: the default path and its 0700
 * directory, a 0600 socket, stale sockets removed, explicit paths (stale, live, not a
 * socket, too long), requests over one connection (several, pipelined, split), an
 * over-long request, too many clients, another user refused, an app command that runs on
 * an lcore, Prometheus over HTTP, and HTTP clients that never take the unix socket's slots.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "telemetry_internal.h"
#include "ut_json.h"
#include "ut_runtime.h"
#include "ut_socket.h"
#include "ut_tmpdir.h"

static char reply[CR_TELEMETRY_MAX_REPLY + 1];
static struct cr_eal_config cfg;

static int
suite_init(void)
{
	if (ut_tmpdir_make("cr_tel_ut") != 0)
		return 1;
	/* A send to a closed peer must fail, not kill the test. */
	signal(SIGPIPE, SIG_IGN);
	setenv("XDG_RUNTIME_DIR", ut_tmpdir, 1);
	cr_eal_config_defaults(&cfg);
	return ut_rt_start() ? 0 : 1;
}

static int
suite_fini(void)
{
	cr_telemetry_stop();
	ut_rt_stop();
	ut_rt_fini();
	return ut_tmpdir_remove();
}

static mode_t
mode_of(const char *path, bool *is_sock)
{
	struct stat st;

	if (lstat(path, &st) != 0)
		return (mode_t)-1;
	if (is_sock != NULL)
		*is_sock = S_ISSOCK(st.st_mode);
	return st.st_mode & 07777;
}

/* Leave a socket file nobody listens on at @p path. */
static void
make_stale_socket(const char *path)
{
	struct sockaddr_un sa;
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	CU_ASSERT_TRUE(ut_sun(&sa, path));
	CU_ASSERT_EQUAL(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
}

/* A pid that no process has: a child that has exited and been reaped. */
static pid_t
dead_pid(void)
{
	pid_t pid = fork();

	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0);
	return pid;
}

static void
test_off_and_bad_args(void)
{
	struct cr_eal_config off = cfg;
	char buf[64];

	snprintf(off.telemetry, sizeof(off.telemetry), "off");
	CU_ASSERT_EQUAL(cr_telemetry_start(&off, "ut"), 0);
	CU_ASSERT_PTR_NULL(cr_telemetry_socket_path());
	CU_ASSERT_EQUAL(cr_telemetry_metrics_addr(buf, sizeof(buf)), -ENOENT);
	cr_telemetry_stop();
	CU_ASSERT_EQUAL(cr_telemetry_start(NULL, "ut"), -EINVAL);
	CU_ASSERT_EQUAL(cr_telemetry_start(&cfg, NULL), -EINVAL);
	CU_ASSERT_EQUAL(cr_telemetry_start(&cfg, ""), -EINVAL);
	CU_ASSERT_EQUAL(cr_telemetry_start(&cfg, "a/b"), -EINVAL);
	CU_ASSERT_EQUAL(cr_telemetry_start(&cfg, ".hidden"), -EINVAL);
	CU_ASSERT_EQUAL(cr_telemetry_start(&cfg, "a b"), -EINVAL);
	CU_ASSERT_PTR_NULL(cr_telemetry_socket_path());
}

/* What cr_telemetry_announce() prints to stdout, in @p out. */
static void
announced(const char *app, char *out, size_t len)
{
	FILE *tmp = tmpfile();
	int saved = dup(STDOUT_FILENO);
	size_t n;

	CU_ASSERT_PTR_NOT_NULL_FATAL(tmp);
	fflush(stdout);
	dup2(fileno(tmp), STDOUT_FILENO);
	cr_telemetry_announce(app);
	dup2(saved, STDOUT_FILENO);
	close(saved);
	rewind(tmp);
	n = fread(out, 1, len - 1, tmp);
	out[n] = '\0';
	fclose(tmp);
}

/* The line every app prints: the socket with one, nothing with telemetry off. */
static void
test_announce(void)
{
	struct cr_eal_config off = cfg;
	char out[512], want[512];

	snprintf(off.telemetry, sizeof(off.telemetry), "off");
	CU_ASSERT_EQUAL(cr_telemetry_start(&off, "ut"), 0);
	announced("ut", out, sizeof(out));
	CU_ASSERT_STRING_EQUAL(out, "");
	cr_telemetry_stop();
	CU_ASSERT_EQUAL_FATAL(cr_telemetry_start(&cfg, "ut-app"), 0);
	announced("ut-app", out, sizeof(out));
	snprintf(want, sizeof(want), "ut-app: telemetry on %s\n", cr_telemetry_socket_path());
	CU_ASSERT_STRING_EQUAL(out, want);
	cr_telemetry_stop();
	/* The default directory it made: test_default_path makes it itself. */
	snprintf(want, sizeof(want), "%s/coreact", ut_tmpdir);
	CU_ASSERT_EQUAL(rmdir(want), 0);
}

static void
test_default_path(void)
{
	char dir[128], want[192], stale[192], live[192], other[192], line[256];
	pid_t gone = dead_pid();
	bool sock = false;
	int fd;

	snprintf(dir, sizeof(dir), "%s/coreact", ut_tmpdir);
	CU_ASSERT_EQUAL(mkdir(dir, 0700), 0);
	snprintf(stale, sizeof(stale), "%s/old-app.%d.sock", dir, (int)gone);
	snprintf(live, sizeof(live), "%s/other.%d.sock", dir, (int)getppid());
	snprintf(other, sizeof(other), "%s/notes.txt", dir);
	make_stale_socket(stale);
	make_stale_socket(live);
	fd = open(other, O_CREAT | O_WRONLY, 0600);
	close(fd);

	CU_ASSERT_EQUAL_FATAL(cr_telemetry_start(&cfg, "ut-app"), 0);
	CU_ASSERT_EQUAL(cr_telemetry_start(&cfg, "ut-app"), -EALREADY);
	snprintf(want, sizeof(want), "%s/ut-app.%d.sock", dir, (int)getpid());
	CU_ASSERT_PTR_NOT_NULL_FATAL(cr_telemetry_socket_path());
	CU_ASSERT_STRING_EQUAL(cr_telemetry_socket_path(), want);
	CU_ASSERT_EQUAL(mode_of(dir, NULL), 0700);
	CU_ASSERT_EQUAL(mode_of(want, &sock), 0600);
	CU_ASSERT_TRUE(sock);
	/* The dead process's socket is gone; a live pid's and other files stay. */
	CU_ASSERT_EQUAL(mode_of(stale, NULL), (mode_t)-1);
	CU_ASSERT_NOT_EQUAL(mode_of(live, NULL), (mode_t)-1);
	CU_ASSERT_NOT_EQUAL(mode_of(other, NULL), (mode_t)-1);

	fd = ut_unix_connect(want);
	CU_ASSERT_TRUE_FATAL(fd >= 0);
	CU_ASSERT_TRUE(ut_request(fd, "/info", reply, sizeof(reply)) > 0);
	CU_ASSERT_TRUE(ut_json_valid(reply));
	CU_ASSERT_PTR_NOT_NULL(strstr(reply, "\"app\":\"ut-app\""));
	snprintf(line, sizeof(line), "\"socket\":\"%s\"", want);
	CU_ASSERT_PTR_NOT_NULL(strstr(reply, line));
	/* More on the same connection. */
	CU_ASSERT_TRUE(ut_request(fd, "/stats", reply, sizeof(reply)) > 0);
	CU_ASSERT_TRUE(ut_json_valid(reply));
	CU_ASSERT_EQUAL(strncmp(reply, "{\"/stats\":{\"time_ns\":", 21), 0);
	CU_ASSERT_TRUE(ut_request(fd, "/nope", reply, sizeof(reply)) > 0);
	CU_ASSERT_STRING_EQUAL(reply, "{\"error\":\"unknown command '/nope'; try /help\"}");
	close(fd);

	cr_telemetry_stop();
	CU_ASSERT_EQUAL(mode_of(want, NULL), (mode_t)-1);
	CU_ASSERT_PTR_NULL(cr_telemetry_socket_path());
	CU_ASSERT_TRUE(ut_unix_connect(want) < 0);
	unlink(live);
	unlink(other);
}

static void
test_pipelined_and_split(void)
{
	const char *path;
	char line[512];
	int fd;

	CU_ASSERT_EQUAL_FATAL(cr_telemetry_start(&cfg, "ut-app"), 0);
	path = cr_telemetry_socket_path();
	fd = ut_unix_connect(path);
	CU_ASSERT_TRUE_FATAL(fd >= 0);
	/* Three requests in one write: three replies, in order. */
	CU_ASSERT_EQUAL(send(fd, "/lcores\r\n/help,/info\n/x\n", 24, 0), 24);
	CU_ASSERT_TRUE(ut_read_line(fd, reply, sizeof(reply)) > 0);
	CU_ASSERT_EQUAL(strncmp(reply, "{\"/lcores\":[", 12), 0);
	CU_ASSERT_TRUE(ut_read_line(fd, reply, sizeof(reply)) > 0);
	CU_ASSERT_EQUAL(strncmp(reply, "{\"/help\":\"app name", 18), 0);
	CU_ASSERT_TRUE(ut_read_line(fd, reply, sizeof(reply)) > 0);
	CU_ASSERT_EQUAL(strncmp(reply, "{\"error\":\"'x' is not", 10), 0);
	/* One request in pieces. */
	CU_ASSERT_EQUAL(send(fd, "/in", 3, 0), 3);
	ut_sleep_ms(20);
	CU_ASSERT_EQUAL(send(fd, "fo\n", 3, 0), 3);
	CU_ASSERT_TRUE(ut_read_line(fd, line, sizeof(line)) > 0);
	CU_ASSERT_EQUAL(strncmp(line, "{\"/info\":{", 10), 0);
	/* The last request may end without a newline when the client half-closes. */
	CU_ASSERT_EQUAL(send(fd, "/lcores", 7, 0), 7);
	shutdown(fd, SHUT_WR);
	CU_ASSERT_TRUE(ut_read_line(fd, reply, sizeof(reply)) > 0);
	CU_ASSERT_EQUAL(strncmp(reply, "{\"/lcores\":[", 12), 0);
	CU_ASSERT_TRUE(ut_peer_closed(fd));
	close(fd);
	cr_telemetry_stop();
}

static void
test_long_request_hangs_up(void)
{
	static char big[3000];
	int fd;

	CU_ASSERT_EQUAL_FATAL(cr_telemetry_start(&cfg, "ut-app"), 0);
	fd = ut_unix_connect(cr_telemetry_socket_path());
	CU_ASSERT_TRUE_FATAL(fd >= 0);
	memset(big, 'a', sizeof(big));
	big[0] = '/';
	CU_ASSERT_EQUAL(send(fd, big, sizeof(big), MSG_NOSIGNAL), (ssize_t)sizeof(big));
	CU_ASSERT_TRUE(ut_read_line(fd, reply, sizeof(reply)) > 0);
	CU_ASSERT_STRING_EQUAL(reply, "{\"error\":\"request longer than 1024 bytes\"}");
	CU_ASSERT_TRUE(ut_peer_closed(fd));
	close(fd);
	/* Others are not affected. */
	fd = ut_unix_connect(cr_telemetry_socket_path());
	CU_ASSERT_TRUE(ut_request(fd, "/info", reply, sizeof(reply)) > 0);
	close(fd);
	cr_telemetry_stop();
}

static void
test_too_many_clients(void)
{
	int fds[CR_TELEMETRY_MAX_CLIENTS], extra, again = -1;
	const char *path;
	unsigned i;

	CU_ASSERT_EQUAL_FATAL(cr_telemetry_start(&cfg, "ut-app"), 0);
	path = cr_telemetry_socket_path();
	for (i = 0; i < CR_TELEMETRY_MAX_CLIENTS; i++) {
		fds[i] = ut_unix_connect(path);
		CU_ASSERT_TRUE(ut_request(fds[i], "/lcores", reply, sizeof(reply)) > 0);
	}
	extra = ut_unix_connect(path);
	CU_ASSERT_TRUE(ut_read_line(extra, reply, sizeof(reply)) > 0);
	CU_ASSERT_STRING_EQUAL(reply, "{\"error\":\"too many telemetry clients\"}");
	CU_ASSERT_TRUE(ut_peer_closed(extra));
	close(extra);
	/* A slot frees up when a client leaves. */
	close(fds[0]);
	for (i = 0; i < 200 && again < 0; i++) {
		int fd = ut_unix_connect(path);

		if (ut_request(fd, "/info", reply, sizeof(reply)) > 0 &&
		    strncmp(reply, "{\"/info\"", 8) == 0)
			again = fd;
		else
			close(fd), ut_sleep_ms(10);
	}
	CU_ASSERT_TRUE(again >= 0);
	close(again);
	for (i = 1; i < CR_TELEMETRY_MAX_CLIENTS; i++)
		close(fds[i]);
	cr_telemetry_stop();
}

static void
test_directory_checks(void)
{
	char xdg[128], dir[160], longer[200];

	/* A directory open to others is refused, and left as it is. */
	snprintf(xdg, sizeof(xdg), "%s/open", ut_tmpdir);
	snprintf(dir, sizeof(dir), "%s/coreact", xdg);
	CU_ASSERT_EQUAL(mkdir(xdg, 0700), 0);
	CU_ASSERT_EQUAL(mkdir(dir, 0700), 0);
	CU_ASSERT_EQUAL(chmod(dir, 0755), 0);
	setenv("XDG_RUNTIME_DIR", xdg, 1);
	CU_ASSERT_EQUAL(cr_telemetry_start(&cfg, "ut-app"), -EPERM);
	CU_ASSERT_EQUAL(mode_of(dir, NULL), 0755);
	/* A symlink is not a directory of ours. */
	rmdir(dir);
	CU_ASSERT_EQUAL(symlink(ut_tmpdir, dir), 0);
	CU_ASSERT_EQUAL(cr_telemetry_start(&cfg, "ut-app"), -EPERM);
	unlink(dir);
	/* A runtime dir that does not exist. */
	snprintf(longer, sizeof(longer), "%s/missing", ut_tmpdir);
	setenv("XDG_RUNTIME_DIR", longer, 1);
	CU_ASSERT_EQUAL(cr_telemetry_start(&cfg, "ut-app"), -ENOENT);
	/* A path that does not fit a sockaddr_un. */
	memset(longer, 'x', sizeof(longer) - 1);
	longer[0] = '/';
	longer[sizeof(longer) - 1] = '\0';
	setenv("XDG_RUNTIME_DIR", longer, 1);
	CU_ASSERT_EQUAL(cr_telemetry_start(&cfg, "ut-app"), -ENAMETOOLONG);
	setenv("XDG_RUNTIME_DIR", ut_tmpdir, 1);
	CU_ASSERT_PTR_NULL(cr_telemetry_socket_path());
	rmdir(xdg);
}

static void
test_explicit_path(void)
{
	struct cr_eal_config c = cfg;
	struct sockaddr_un sa;
	bool sock = false;
	int fd, lfd;

	/* Stale: replaced, and served with mode 0600. */
	snprintf(c.telemetry, sizeof(c.telemetry), "%s/explicit.sock", ut_tmpdir);
	make_stale_socket(c.telemetry);
	CU_ASSERT_EQUAL_FATAL(cr_telemetry_start(&c, "ut-app"), 0);
	CU_ASSERT_STRING_EQUAL(cr_telemetry_socket_path(), c.telemetry);
	CU_ASSERT_EQUAL(mode_of(c.telemetry, &sock), 0600);
	CU_ASSERT_TRUE(sock);
	fd = ut_unix_connect(c.telemetry);
	CU_ASSERT_TRUE(ut_request(fd, "/lcores", reply, sizeof(reply)) > 0);
	close(fd);
	cr_telemetry_stop();
	CU_ASSERT_EQUAL(mode_of(c.telemetry, NULL), (mode_t)-1);

	/* Someone serves it: refused, and their socket is left alone. */
	lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	CU_ASSERT_TRUE(ut_sun(&sa, c.telemetry));
	CU_ASSERT_EQUAL(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	CU_ASSERT_EQUAL(listen(lfd, 4), 0);
	CU_ASSERT_EQUAL(cr_telemetry_start(&c, "ut-app"), -EADDRINUSE);
	CU_ASSERT_NOT_EQUAL(mode_of(c.telemetry, NULL), (mode_t)-1);
	close(lfd);
	unlink(c.telemetry);

	/* Not a socket: refused, the file is kept. */
	fd = open(c.telemetry, O_CREAT | O_WRONLY, 0600);
	close(fd);
	CU_ASSERT_EQUAL(cr_telemetry_start(&c, "ut-app"), -EEXIST);
	CU_ASSERT_NOT_EQUAL(mode_of(c.telemetry, NULL), (mode_t)-1);
	unlink(c.telemetry);

	/* A directory that does not exist: bind fails, naming the path in the log. */
	snprintf(c.telemetry, sizeof(c.telemetry), "%s/no/such/dir.sock", ut_tmpdir);
	CU_ASSERT_EQUAL(cr_telemetry_start(&c, "ut-app"), -ENOENT);
	CU_ASSERT_PTR_NULL(cr_telemetry_socket_path());
}

/* ---- another user ---- */

static void
test_other_user_refused(void)
{
	struct cr_eal_config c = cfg;
	char open_dir[64];
	pid_t pid;
	int status = -1;

	if (geteuid() != 0) {
		printf("\n  (not root: cannot become another user; skipped)\n");
		return;
	}
	/* Open the way on purpose (a 0777 directory outside our 0700 one, a 0666 socket) so
	 * that only the peer check stands between the other user and the socket. */
	snprintf(open_dir, sizeof(open_dir), "/tmp/cr_tel_ut_shared.XXXXXX");
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(open_dir));
	CU_ASSERT_EQUAL(chmod(open_dir, 0777), 0);
	snprintf(c.telemetry, sizeof(c.telemetry), "%s/s.sock", open_dir);
	CU_ASSERT_EQUAL_FATAL(cr_telemetry_start(&c, "ut-app"), 0);
	CU_ASSERT_EQUAL(chmod(c.telemetry, 0666), 0);
	pid = fork();
	if (pid == 0) {
		char buf[256];
		int fd;

		if (setgid(65534) != 0 || setuid(65534) != 0)
			_exit(3);
		fd = ut_unix_connect(c.telemetry);
		if (fd < 0)
			_exit(4);
		/* Connected at the socket level, then hung up on without an answer. No malloc
		 * here: this child of a threaded process keeps to plain syscalls. */
		if (send(fd, "/info\n", 6, MSG_NOSIGNAL) != 6 && errno != EPIPE)
			_exit(5);
		_exit(ut_read_line(fd, buf, sizeof(buf)) < 0 ? 0 : 1);
	}
	for (int i = 0; i < 1000 && waitpid(pid, &status, WNOHANG) == 0; i++)
		ut_sleep_ms(10);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fprintf(stderr, "child status 0x%x\n", status);
	CU_ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* We still get answers. */
	{
		int fd = ut_unix_connect(c.telemetry);

		CU_ASSERT_TRUE(ut_request(fd, "/info", reply, sizeof(reply)) > 0);
		close(fd);
	}
	cr_telemetry_stop();
	rmdir(open_dir);
}

/* ---- an app command that runs on an lcore ---- */

static void
where_on_lcore(void *arg)
{
	unsigned *id = arg;

	*id = cr_lcore_id();
}

static int
cmd_where(const char *cmd, const char *params, struct cr_json *r)
{
	unsigned long long id;
	unsigned seen = CR_LCORE_NONE;
	int rc;

	(void)cmd;
	if (cr_parse_uint(params, 0, CR_MAX_LCORES - 1, &id) != 0)
		return cr_json_errorf(r, -EINVAL, "usage: /ut/where,ID");
	rc = cr_telemetry_call_on((unsigned)id, where_on_lcore, &seen, 5000000000ull);
	if (rc != 0)
		return rc;
	cr_json_u64(r, NULL, seen);
	return 0;
}

static int
cmd_stop(const char *cmd, const char *params, struct cr_json *r)
{
	(void)cmd, (void)params;
	/* Refused from the telemetry thread: it would wait for itself. */
	cr_telemetry_stop();
	cr_json_bool(r, NULL, true);
	return 0;
}

static void
test_app_command_on_lcore(void)
{
	char req[32], want[64];
	unsigned id;
	int fd;

	CU_ASSERT_EQUAL(cr_telemetry_register("/ut/where", cmd_where, "lcore that ran it"), 0);
	CU_ASSERT_EQUAL(cr_telemetry_register("/ut/stop", cmd_stop, NULL), 0);
	CU_ASSERT_EQUAL_FATAL(cr_telemetry_start(&cfg, "ut-app"), 0);
	fd = ut_unix_connect(cr_telemetry_socket_path());
	CR_LCORE_FOREACH(id)
	{
		snprintf(req, sizeof(req), "/ut/where,%u", id);
		snprintf(want, sizeof(want), "{\"/ut/where\":%u}", id);
		CU_ASSERT_TRUE(ut_request(fd, req, reply, sizeof(reply)) > 0);
		CU_ASSERT_STRING_EQUAL(reply, want);
	}
	CU_ASSERT_TRUE(ut_request(fd, "/ut/where,1000", reply, sizeof(reply)) > 0);
	CU_ASSERT_STRING_EQUAL(reply, "{\"error\":\"/ut/where: usage: /ut/where,ID\"}");
	CU_ASSERT_TRUE(ut_request(fd, "/ut/where,127", reply, sizeof(reply)) > 0);
	CU_ASSERT_STRING_EQUAL(reply, "{\"error\":\"/ut/where: Invalid argument\"}");
	CU_ASSERT_TRUE(ut_request(fd, "/ut/stop", reply, sizeof(reply)) > 0);
	CU_ASSERT_TRUE(ut_request(fd, "/info", reply, sizeof(reply)) > 0);
	close(fd);
	cr_telemetry_stop();
}

/* ---- Prometheus over HTTP ---- */

static int
tcp_connect(const char *hostport)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	char host[64];
	const char *colon = strrchr(hostport, ':');
	int fd;

	if (colon == NULL || (size_t)(colon - hostport) >= sizeof(host))
		return -1;
	memcpy(host, hostport, (size_t)(colon - hostport));
	host[colon - hostport] = '\0';
	inet_pton(AF_INET, host, &a.sin_addr);
	a.sin_port = htons((uint16_t)atoi(colon + 1));
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* Send @p req and read the whole response until the server closes. */
static ssize_t
http_get(const char *addr, const char *req, char *out, size_t cap)
{
	int fd = tcp_connect(addr);
	size_t len = 0;

	if (fd < 0)
		return -1;
	send(fd, req, strlen(req), MSG_NOSIGNAL);
	while (len + 1 < cap) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n;

		if (poll(&p, 1, 5000) != 1)
			break;
		n = recv(fd, out + len, cap - len - 1, 0);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	out[len] = '\0';
	close(fd);
	return (ssize_t)len;
}

static void
test_metrics_http(void)
{
	struct cr_eal_config off = cfg;
	char addr[80], want[128];
	int fd;

	snprintf(off.telemetry, sizeof(off.telemetry), "off");
	CU_ASSERT_EQUAL(cr_telemetry_set_metrics("127.0.0.1:0", NULL), 0);
	/* HTTP only. */
	CU_ASSERT_EQUAL_FATAL(cr_telemetry_start(&off, "ut-app"), 0);
	CU_ASSERT_PTR_NULL(cr_telemetry_socket_path());
	CU_ASSERT_EQUAL_FATAL(cr_telemetry_metrics_addr(addr, sizeof(addr)), 0);
	CU_ASSERT_EQUAL(strncmp(addr, "127.0.0.1:", 10), 0);
	CU_ASSERT_NOT_EQUAL(strcmp(addr, "127.0.0.1:0"), 0);
	CU_ASSERT_EQUAL(cr_telemetry_metrics_addr(addr, 4), -ENOSPC);
	cr_telemetry_metrics_addr(addr, sizeof(addr));
	CU_ASSERT_TRUE(http_get(addr, "GET /metrics HTTP/1.0\r\n\r\n", reply, sizeof(reply)) > 0);
	CU_ASSERT_EQUAL(strncmp(reply, "HTTP/1.0 200 OK\r\n", 17), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(reply, "\r\n\r\n# HELP coreact_info "));
	CU_ASSERT_PTR_NOT_NULL(strstr(reply, "coreact_info{app=\"ut-app\","));
	CU_ASSERT_PTR_NOT_NULL(strstr(reply, "coreact_lcore_turns_total{lcore=\""));
	CU_ASSERT_TRUE(http_get(addr, "GET /nope HTTP/1.1\nHost: x\n\n", reply, sizeof(reply)) > 0);
	CU_ASSERT_EQUAL(strncmp(reply, "HTTP/1.0 404 ", 13), 0);
	/* A client that sends nothing is dropped after a few seconds. */
	fd = tcp_connect(addr);
	CU_ASSERT_TRUE(fd >= 0);
	CU_ASSERT_TRUE(ut_peer_closed(fd) || ut_peer_closed(fd));
	close(fd);
	cr_telemetry_stop();

	/* Both: /info names the metrics address; the port is taken while we run. */
	CU_ASSERT_EQUAL_FATAL(cr_telemetry_start(&cfg, "ut-app"), 0);
	cr_telemetry_metrics_addr(addr, sizeof(addr));
	fd = ut_unix_connect(cr_telemetry_socket_path());
	CU_ASSERT_TRUE(ut_request(fd, "/info", reply, sizeof(reply)) > 0);
	snprintf(want, sizeof(want), "\"metrics\":\"%s\"", addr);
	CU_ASSERT_PTR_NOT_NULL(strstr(reply, want));
	close(fd);
	cr_telemetry_stop();
	CU_ASSERT_EQUAL(cr_telemetry_set_metrics(addr, NULL), 0);
	fd = tcp_connect(addr);
	if (fd < 0) {
		/* Nobody else took the port meanwhile: hold it, and start must fail. */
		struct sockaddr_in a = {.sin_family = AF_INET};
		socklen_t len = sizeof(a);
		int one = 1;

		fd = socket(AF_INET, SOCK_STREAM, 0);
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		a.sin_port = htons((uint16_t)atoi(strrchr(addr, ':') + 1));
		if (bind(fd, (struct sockaddr *)&a, len) == 0 && listen(fd, 1) == 0) {
			CU_ASSERT_EQUAL(cr_telemetry_start(&cfg, "ut-app"), -EADDRINUSE);
			CU_ASSERT_PTR_NULL(cr_telemetry_socket_path());
		}
	}
	close(fd);
	cr__metrics_clear();
}

/* Incomplete HTTP requests, more than the HTTP table holds: the unix socket still answers
 * (its slots are its own), a whole scrape still gets through (the oldest incomplete one
 * makes room), and what was dropped sees its connection closed. */
static void
test_http_flood_keeps_unix(void)
{
	int fds[CR_TELEMETRY_MAX_HTTP_CLIENTS + 4], fd;
	unsigned i, closed = 0;
	char addr[80];

	CU_ASSERT_EQUAL(cr_telemetry_set_metrics("127.0.0.1:0", NULL), 0);
	CU_ASSERT_EQUAL_FATAL(cr_telemetry_start(&cfg, "ut-app"), 0);
	CU_ASSERT_EQUAL_FATAL(cr_telemetry_metrics_addr(addr, sizeof(addr)), 0);
	for (i = 0; i < CR_TELEMETRY_MAX_HTTP_CLIENTS + 4; i++) {
		fds[i] = tcp_connect(addr);
		CU_ASSERT_TRUE_FATAL(fds[i] >= 0);
		send(fds[i], "GET /metrics HTTP/1.1\r\n", 24, MSG_NOSIGNAL);
	}
	for (i = 0; i < CR_TELEMETRY_MAX_CLIENTS; i++) {
		fd = ut_unix_connect(cr_telemetry_socket_path());
		CU_ASSERT_TRUE(ut_request(fd, "/info", reply, sizeof(reply)) > 0);
		CU_ASSERT_EQUAL(strncmp(reply, "{\"/info\"", 8), 0);
		close(fd);
	}
	CU_ASSERT_TRUE(http_get(addr, "GET /metrics HTTP/1.0\r\n\r\n", reply, sizeof(reply)) > 0);
	CU_ASSERT_EQUAL(strncmp(reply, "HTTP/1.0 200 OK\r\n", 17), 0);
	/* The first ones made room for the later ones and the scrape. */
	for (i = 0; i < 5; i++)
		closed += ut_peer_closed(fds[i]);
	CU_ASSERT_EQUAL(closed, 5);
	for (i = 0; i < CR_TELEMETRY_MAX_HTTP_CLIENTS + 4; i++)
		close(fds[i]);
	cr_telemetry_stop();
	cr__metrics_clear();
}

static const struct ut_case cases[] = {
	UT_CASE(test_off_and_bad_args),
	UT_CASE(test_announce),
	UT_CASE(test_default_path),
	UT_CASE(test_pipelined_and_split),
	UT_CASE(test_long_request_hangs_up),
	UT_CASE(test_too_many_clients),
	UT_CASE(test_directory_checks),
	UT_CASE(test_explicit_path),
	UT_CASE(test_other_user_refused),
	UT_CASE(test_app_command_on_lcore),
	UT_CASE(test_metrics_http),
	UT_CASE(test_http_flood_keeps_unix),
};

UT_MAIN("telemetry_server", cases, suite_init, suite_fini)
