/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Where the socket goes: the default directory (made 0700, or checked to be ours and
 * closed to others), sockets of dead processes cleared from it, and a stale socket at the
 * chosen path replaced, never a live one or a file that is not a socket.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "telemetry_internal.h"

CR_LOG_COMPONENT(log_tel, "lib.telemetry");

int
cr__tel_default_dir(char *buf, size_t len)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	int n;

	if (xdg != NULL && xdg[0] != '\0')
		n = snprintf(buf, len, "%s/coreact", xdg);
	else
		n = snprintf(buf, len, "/tmp/coreact-%u", (unsigned)geteuid());
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* Create @p dir 0700, or check that the one there is ours and closed to others: a
 * directory someone else made in /tmp could let them swap our socket. */
static int
prepare_dir(const char *dir)
{
	struct stat st;
	int rc;

	if (mkdir(dir, 0700) == 0) {
		/* mkdir honours the umask; make the mode exact. */
		if (chmod(dir, 0700) != 0)
			goto out_errno;
		return 0;
	}
	if (errno != EEXIST)
		goto out_errno;
	if (lstat(dir, &st) != 0)
		goto out_errno;
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
		CR_LOG(log_tel, ERR,
		       "socket directory %s must be a directory owned by uid %u with mode 0700",
		       dir, (unsigned)geteuid());
		return -EPERM;
	}
	return 0;

out_errno:
	rc = -errno;
	CR_LOG(log_tel, ERR, "cannot create socket directory %s: %s", dir, cr_strerror(rc));
	return rc;
}

/* "<app>.<pid>.sock" -> pid, or 0 when the name has another shape. */
static pid_t
sock_name_pid(const char *name)
{
	size_t n = strlen(name), i;
	const char *dot;
	long pid = 0;

	if (n < 7 || strcmp(name + n - 5, ".sock") != 0)
		return 0;
	for (dot = name + n - 6; dot > name && *dot >= '0' && *dot <= '9'; dot--)
		;
	/* Linux pids have at most 7 digits (pid_max <= 2^22). */
	if (*dot != '.' || dot == name + n - 6 || (name + n - 5) - (dot + 1) > 7)
		return 0;
	for (i = (size_t)(dot - name) + 1; i < n - 5; i++)
		pid = pid * 10 + (name[i] - '0');
	return (pid_t)pid;
}

/* Remove sockets in @p dir left by processes that no longer exist. */
static void
remove_stale(const char *dir)
{
	char path[PATH_MAX];
	struct dirent *de;
	struct stat st;
	DIR *d = opendir(dir);

	if (d == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		pid_t pid = sock_name_pid(de->d_name);

		if (pid <= 0 || pid == getpid() || kill(pid, 0) == 0 || errno != ESRCH)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_uid == geteuid() &&
		    unlink(path) == 0)
			CR_LOG(log_tel, INFO, "removed stale socket %s", path);
	}
	closedir(d);
}

int
cr__tel_unix_addr(struct sockaddr_un *sa, const char *path)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	memcpy(sa->sun_path, path, strlen(path) + 1);
	return 0;
}

/* Something is at @p path: replace it if it is a socket nobody accepts on. */
static int
clear_path(const char *path)
{
	struct sockaddr_un sa;
	struct stat st;
	int fd, rc;

	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode)) {
		CR_LOG(log_tel, ERR, "cannot serve on %s: it exists and is not a socket", path);
		return -EEXIST;
	}
	cr__tel_unix_addr(&sa, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 ? 0 : -errno;
	close(fd);
	if (rc == 0) {
		CR_LOG(log_tel, ERR, "cannot serve on %s: another process serves it", path);
		return -EADDRINUSE;
	}
	if (rc != -ECONNREFUSED)
		return rc;
	CR_LOG(log_tel, INFO, "replacing stale socket %s", path);
	return unlink(path) == 0 || errno == ENOENT ? 0 : -errno;
}

int
cr__tel_choose_path(const char *telemetry, const char *app, char *path, size_t len)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int n, rc;

	if (telemetry[0] != '\0') {
		n = snprintf(path, len, "%s", telemetry);
		if (n < 0 || (size_t)n >= len)
			goto out_too_long;
		return clear_path(path);
	}
	rc = cr__tel_default_dir(dir, sizeof(dir));
	if (rc != 0) {
		CR_LOG(log_tel, ERR, "socket directory name too long (XDG_RUNTIME_DIR=%s)",
		       getenv("XDG_RUNTIME_DIR"));
		return rc;
	}
	rc = prepare_dir(dir);
	if (rc != 0)
		return rc;
	remove_stale(dir);
	n = snprintf(path, len, "%s/%s.%d.sock", dir, app, (int)getpid());
	if (n < 0 || (size_t)n >= len)
		goto out_too_long;
	/* A file for our own pid was left by an earlier process that had it. */
	return clear_path(path);

out_too_long:
	CR_LOG(log_tel, ERR, "socket path %s... is longer than %zu bytes", path, len - 1);
	return -ENAMETOOLONG;
}
