/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Where the socket goes: the default directory (made 0700, or checked to be ours and
 * closed to others), sockets of dead processes cleared from it, and a stale socket at the
 * chosen path replaced, never a live one or a file that is not a socket.
 *
 * In /tmp anyone can make /tmp/coreact-<uid> before us. Such a directory is never used:
 * a fresh one, /tmp/coreact-<uid>-XXXXXX from mkdtemp (0700, ours, a name nobody can
 * take first), serves instead, and is removed at stop. The tools find sockets by scanning
 * the directories of those names that are ours with mode 0700, and no others.
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

const char *cr__tel_tmp_root = "/tmp";
const char *cr__tel_run_user_root = "/run/user";
char cr__tel_fresh_dir[sizeof(((struct sockaddr_un *)0)->sun_path)];

/* @p dir is a directory (not a link to one) owned by us. */
static bool
dir_is_ours(const char *dir)
{
	struct stat st;

	return lstat(dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid();
}

int
cr__tel_default_dir(char *buf, size_t len, bool *in_tmp)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	char run[PATH_MAX];
	int n;

	*in_tmp = false;
	snprintf(run, sizeof(run), "%s/%u", cr__tel_run_user_root, (unsigned)geteuid());
	if (xdg != NULL && xdg[0] != '\0') {
		n = snprintf(buf, len, "%s/coreact", xdg);
	} else if (dir_is_ours(run)) {
		/* A login session's runtime directory, when the environment lost its name. */
		n = snprintf(buf, len, "%s/coreact", run);
	} else {
		n = snprintf(buf, len, "%s/coreact-%u", cr__tel_tmp_root, (unsigned)geteuid());
		*in_tmp = true;
	}
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* Create @p dir 0700, or check that the one there is ours and closed to others: a
 * directory someone else made in /tmp could let them swap our socket. @p loud: log a
 * refusal as an error (else the caller has a way out and says so). */
static int
prepare_dir(const char *dir, bool loud)
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
		if (loud)
			CR_LOG(log_tel, ERR,
			       "socket directory %s must be a directory owned by uid %u with "
			       "mode 0700",
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

/* @p dir (len @p len) is taken by someone else: make a fresh one beside it instead. */
static int
fresh_dir(char *dir, size_t len)
{
	char tmpl[sizeof(cr__tel_fresh_dir)];
	int n = snprintf(tmpl, sizeof(tmpl), "%s-XXXXXX", dir);
	int rc;

	if (n < 0 || (size_t)n >= sizeof(tmpl) || (size_t)n >= len)
		return -ENAMETOOLONG;
	/* mkdtemp makes it 0700 whatever the umask, with a name no one had. */
	if (mkdtemp(tmpl) == NULL) {
		rc = -errno;
		CR_LOG(log_tel, ERR, "cannot create socket directory %s: %s", tmpl,
		       cr_strerror(rc));
		return rc;
	}
	CR_LOG(log_tel, WARNING,
	       "%s is not ours with mode 0700 (another user made it?); serving in %s instead",
	       dir, tmpl);
	memcpy(dir, tmpl, (size_t)n + 1);
	memcpy(cr__tel_fresh_dir, tmpl, (size_t)n + 1);
	return 0;
}

void
cr__tel_release_dir(void)
{
	if (cr__tel_fresh_dir[0] != '\0' && rmdir(cr__tel_fresh_dir) != 0)
		CR_LOG(log_tel, DEBUG, "cannot remove %s: %s", cr__tel_fresh_dir,
		       cr_strerror(-errno));
	cr__tel_fresh_dir[0] = '\0';
}

int
cr__tel_choose_path(const char *telemetry, const char *app, char *path, size_t len)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	bool in_tmp;
	int n, rc;

	if (telemetry[0] != '\0') {
		n = snprintf(path, len, "%s", telemetry);
		if (n < 0 || (size_t)n >= len)
			goto out_too_long;
		return clear_path(path);
	}
	rc = cr__tel_default_dir(dir, sizeof(dir), &in_tmp);
	if (rc != 0) {
		CR_LOG(log_tel, ERR, "socket directory name too long (XDG_RUNTIME_DIR=%s)",
		       getenv("XDG_RUNTIME_DIR"));
		return rc;
	}
	rc = prepare_dir(dir, !in_tmp);
	if (rc == -EPERM && in_tmp)
		rc = fresh_dir(dir, sizeof(dir));
	else if (rc == 0)
		remove_stale(dir);
	if (rc != 0)
		return rc;
	n = snprintf(path, len, "%s/%s.%d.sock", dir, app, (int)getpid());
	if (n < 0 || (size_t)n >= len)
		goto out_too_long;
	/* A file for our own pid was left by an earlier process that had it. */
	return clear_path(path);

out_too_long:
	CR_LOG(log_tel, ERR, "socket path %s... is longer than %zu bytes", path, len - 1);
	return -ENAMETOOLONG;
}
