/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Socket paths: the default directory rule, the directory made 0700 whatever the umask or
 * refused when it is not ours and closed (in /tmp: a fresh one of ours instead), sockets of dead processes cleared (and nothing
 * else), and what may be at an explicit path.
 */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "telemetry_internal.h"
#include "ut_json.h"
#include "ut_runtime.h"
#include "ut_socket.h"
#include "ut_tmpdir.h"

static char path[sizeof(((struct sockaddr_un *)0)->sun_path)];

static int
suite_init(void)
{
	return ut_tmpdir_make("cr_tel_path_ut");
}

static int
suite_fini(void)
{
	return ut_tmpdir_remove();
}

static bool
exists(const char *p)
{
	struct stat st;

	return lstat(p, &st) == 0;
}

static void
make_socket(const char *p, bool listening, int *keep)
{
	struct sockaddr_un sa;
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	CU_ASSERT_TRUE_FATAL(ut_sun(&sa, p));
	CU_ASSERT_EQUAL(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	if (listening) {
		CU_ASSERT_EQUAL(listen(fd, 1), 0);
		*keep = fd;
	} else {
		close(fd);
	}
}

static void
make_file(const char *p)
{
	int fd = open(p, O_CREAT | O_WRONLY, 0600);

	CU_ASSERT_TRUE(fd >= 0);
	close(fd);
}

static pid_t
dead_pid(void)
{
	pid_t pid = fork();

	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0);
	return pid;
}

/* A fresh XDG_RUNTIME_DIR under ut_tmpdir. */
static void
use_xdg(const char *name, char *xdg, size_t len)
{
	snprintf(xdg, len, "%s/%s", ut_tmpdir, name);
	CU_ASSERT_EQUAL(mkdir(xdg, 0700), 0);
	setenv("XDG_RUNTIME_DIR", xdg, 1);
}

/* /tmp and /run/user of this test: directories under ut_tmpdir. */
static char tmp_root[128], run_root[128];

static void
use_roots(void)
{
	snprintf(tmp_root, sizeof(tmp_root), "%s/tmp", ut_tmpdir);
	snprintf(run_root, sizeof(run_root), "%s/run-user", ut_tmpdir);
	(void)mkdir(tmp_root, 01777);
	cr__tel_tmp_root = tmp_root;
	cr__tel_run_user_root = run_root;
}

static void
test_default_dir_rule(void)
{
	char buf[128], longer[200];
	bool in_tmp;

	use_roots();
	setenv("XDG_RUNTIME_DIR", "/run/user/42", 1);
	CU_ASSERT_EQUAL(cr__tel_default_dir(buf, sizeof(buf), &in_tmp), 0);
	CU_ASSERT_STRING_EQUAL(buf, "/run/user/42/coreact");
	CU_ASSERT_FALSE(in_tmp);
	setenv("XDG_RUNTIME_DIR", "", 1);
	CU_ASSERT_EQUAL(cr__tel_default_dir(buf, sizeof(buf), &in_tmp), 0);
	snprintf(longer, sizeof(longer), "%s/coreact-%u", tmp_root, (unsigned)geteuid());
	CU_ASSERT_STRING_EQUAL(buf, longer);
	CU_ASSERT_TRUE(in_tmp);
	unsetenv("XDG_RUNTIME_DIR");
	CU_ASSERT_EQUAL(cr__tel_default_dir(buf, sizeof(buf), &in_tmp), 0);
	CU_ASSERT_STRING_EQUAL(buf, longer);
	/* /run/user/<uid> of ours: used when XDG_RUNTIME_DIR is not set. */
	CU_ASSERT_EQUAL(mkdir(run_root, 0755), 0);
	snprintf(longer, sizeof(longer), "%s/%u", run_root, (unsigned)geteuid());
	CU_ASSERT_EQUAL(mkdir(longer, 0700), 0);
	CU_ASSERT_EQUAL(cr__tel_default_dir(buf, sizeof(buf), &in_tmp), 0);
	strcat(longer, "/coreact");
	CU_ASSERT_STRING_EQUAL(buf, longer);
	CU_ASSERT_FALSE(in_tmp);
	if (geteuid() == 0) {
		/* Not ours: not followed. */
		*strrchr(longer, '/') = '\0';
		CU_ASSERT_EQUAL(chown(longer, 65534, 65534), 0);
		CU_ASSERT_EQUAL(cr__tel_default_dir(buf, sizeof(buf), &in_tmp), 0);
		CU_ASSERT_TRUE(in_tmp);
	}
	*strrchr(longer, '/') = '\0';
	memset(longer, 'x', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	setenv("XDG_RUNTIME_DIR", longer, 1);
	CU_ASSERT_EQUAL(cr__tel_default_dir(buf, sizeof(buf), &in_tmp), -ENAMETOOLONG);
	CU_ASSERT_EQUAL(cr__tel_choose_path("", "app", path, sizeof(path)), -ENAMETOOLONG);
	snprintf(longer, sizeof(longer), "%s/%u", run_root, (unsigned)geteuid());
	CU_ASSERT_EQUAL(rmdir(longer), 0);
	CU_ASSERT_EQUAL(rmdir(run_root), 0);
}

/* /tmp/coreact-<uid> squatted (open to others, another uid's, a link, a file): a fresh
 * /tmp/coreact-<uid>-XXXXXX of ours serves instead, the squatted one is left alone, and
 * ours is removed at release. */
static void
test_tmp_squatted(void)
{
	char dir[192], want[224];
	struct stat st;
	int round;

	use_roots();
	unsetenv("XDG_RUNTIME_DIR");
	snprintf(dir, sizeof(dir), "%s/coreact-%u", tmp_root, (unsigned)geteuid());
	/* Free: made, and used. */
	CU_ASSERT_EQUAL(cr__tel_choose_path("", "app", path, sizeof(path)), 0);
	snprintf(want, sizeof(want), "%s/app.%d.sock", dir, (int)getpid());
	CU_ASSERT_STRING_EQUAL(path, want);
	CU_ASSERT_STRING_EQUAL(cr__tel_fresh_dir, "");
	for (round = 0; round < 4; round++) {
		if (round == 0) {
			CU_ASSERT_EQUAL(chmod(dir, 0755), 0);
		} else if (round == 1) {
			if (geteuid() != 0)
				continue;
			CU_ASSERT_EQUAL(chmod(dir, 0700), 0);
			CU_ASSERT_EQUAL(chown(dir, 65534, 65534), 0);
		} else if (round == 2) {
			CU_ASSERT_EQUAL(rmdir(dir), 0);
			CU_ASSERT_EQUAL(symlink(ut_tmpdir, dir), 0);
		} else {
			CU_ASSERT_EQUAL(unlink(dir), 0);
			make_file(dir);
		}
		CU_ASSERT_EQUAL(cr__tel_choose_path("", "app", path, sizeof(path)), 0);
		CU_ASSERT_EQUAL(strncmp(path, dir, strlen(dir)), 0);
		CU_ASSERT_EQUAL(path[strlen(dir)], '-');
		CU_ASSERT_EQUAL(strlen(path), strlen(want) + 7);
		CU_ASSERT_EQUAL(strncmp(cr__tel_fresh_dir, path, strlen(cr__tel_fresh_dir)), 0);
		CU_ASSERT_EQUAL(lstat(cr__tel_fresh_dir, &st), 0);
		CU_ASSERT_TRUE(S_ISDIR(st.st_mode) && st.st_uid == geteuid());
		CU_ASSERT_EQUAL(st.st_mode & 07777, 0700);
		strcpy(want, cr__tel_fresh_dir);
		cr__tel_release_dir();
		CU_ASSERT_STRING_EQUAL(cr__tel_fresh_dir, "");
		CU_ASSERT_FALSE(exists(want));
		snprintf(want, sizeof(want), "%s/app.%d.sock", dir, (int)getpid());
	}
	/* The squatted one was left as it was (here: the file of the last round). */
	CU_ASSERT_EQUAL(lstat(dir, &st), 0);
	CU_ASSERT_TRUE(S_ISREG(st.st_mode));
	CU_ASSERT_EQUAL(unlink(dir), 0);
}

static void
test_directory_made_0700(void)
{
	char xdg[128], want[192];
	struct stat st;
	mode_t old;

	use_xdg("umask", xdg, sizeof(xdg));
	/* The strictest umask would give 0000, the laxest 0777: 0700 either way. */
	old = umask(0777);
	CU_ASSERT_EQUAL(cr__tel_choose_path("", "my-app", path, sizeof(path)), 0);
	umask(old);
	snprintf(want, sizeof(want), "%s/coreact/my-app.%d.sock", xdg, (int)getpid());
	CU_ASSERT_STRING_EQUAL(path, want);
	snprintf(want, sizeof(want), "%s/coreact", xdg);
	CU_ASSERT_EQUAL(lstat(want, &st), 0);
	CU_ASSERT_EQUAL(st.st_mode & 07777, 0700);
	/* Again: the directory is there and fine. */
	CU_ASSERT_EQUAL(cr__tel_choose_path("", "my-app", path, sizeof(path)), 0);
}

static void
test_directory_refused(void)
{
	char xdg[128], dir[160];

	use_xdg("refused", xdg, sizeof(xdg));
	snprintf(dir, sizeof(dir), "%s/coreact", xdg);
	CU_ASSERT_EQUAL(mkdir(dir, 0700), 0);
	CU_ASSERT_EQUAL(chmod(dir, 0750), 0);
	CU_ASSERT_EQUAL(cr__tel_choose_path("", "app", path, sizeof(path)), -EPERM);
	CU_ASSERT_EQUAL(chmod(dir, 0701), 0);
	CU_ASSERT_EQUAL(cr__tel_choose_path("", "app", path, sizeof(path)), -EPERM);
	if (geteuid() == 0) {
		CU_ASSERT_EQUAL(chmod(dir, 0700), 0);
		CU_ASSERT_EQUAL(chown(dir, 65534, 65534), 0);
		CU_ASSERT_EQUAL(cr__tel_choose_path("", "app", path, sizeof(path)), -EPERM);
	}
	CU_ASSERT_EQUAL(rmdir(dir), 0);
	CU_ASSERT_EQUAL(symlink(ut_tmpdir, dir), 0);
	CU_ASSERT_EQUAL(cr__tel_choose_path("", "app", path, sizeof(path)), -EPERM);
	CU_ASSERT_EQUAL(unlink(dir), 0);
	make_file(dir);
	CU_ASSERT_EQUAL(cr__tel_choose_path("", "app", path, sizeof(path)), -EPERM);
	CU_ASSERT_EQUAL(unlink(dir), 0);
	setenv("XDG_RUNTIME_DIR", "/nonexistent/run", 1);
	CU_ASSERT_EQUAL(cr__tel_choose_path("", "app", path, sizeof(path)), -ENOENT);
}

static void
test_stale_sockets_cleared(void)
{
	char xdg[128], dir[160], p[12][224];
	pid_t gone = dead_pid();
	int n = 0, i;

	use_xdg("stale", xdg, sizeof(xdg));
	snprintf(dir, sizeof(dir), "%s/coreact", xdg);
	CU_ASSERT_EQUAL(mkdir(dir, 0700), 0);
	/* Removed: sockets named for a dead pid, any app name, and one for our own pid. */
	snprintf(p[n++], sizeof(p[0]), "%s/cr-echo.%d.sock", dir, (int)gone);
	snprintf(p[n++], sizeof(p[0]), "%s/x.y.z.%d.sock", dir, (int)gone);
	snprintf(p[n++], sizeof(p[0]), "%s/app.%d.sock", dir, (int)getpid());
	for (i = 0; i < n; i++)
		make_socket(p[i], false, NULL);
	/* Kept: a live pid's, other shapes, and a regular file with a dead pid's name. */
	snprintf(p[n++], sizeof(p[0]), "%s/alive.%d.sock", dir, (int)getppid());
	snprintf(p[n++], sizeof(p[0]), "%s/x.sock", dir);
	snprintf(p[n++], sizeof(p[0]), "%s/a.b.sock", dir);
	snprintf(p[n++], sizeof(p[0]), "%s/a.12345678.sock", dir);
	snprintf(p[n++], sizeof(p[0]), "%s/a.%d.sockx", dir, (int)gone);
	for (i = 3; i < n; i++)
		make_socket(p[i], false, NULL);
	snprintf(p[n++], sizeof(p[0]), "%s/file.%d.sock", dir, (int)gone);
	make_file(p[n - 1]);

	CU_ASSERT_EQUAL(cr__tel_choose_path("", "app", path, sizeof(path)), 0);
	CU_ASSERT_STRING_EQUAL(path, p[2]);
	for (i = 0; i < n; i++)
		CU_ASSERT_EQUAL(exists(p[i]), i >= 3);
}

static void
test_explicit_path(void)
{
	char p[128], longer[sizeof(path) + 8];
	int live = -1;

	snprintf(p, sizeof(p), "%s/explicit.sock", ut_tmpdir);
	/* Nothing there, or a stale socket (removed). */
	CU_ASSERT_EQUAL(cr__tel_choose_path(p, "app", path, sizeof(path)), 0);
	CU_ASSERT_STRING_EQUAL(path, p);
	make_socket(p, false, NULL);
	CU_ASSERT_EQUAL(cr__tel_choose_path(p, "app", path, sizeof(path)), 0);
	CU_ASSERT_FALSE(exists(p));
	/* Served by someone: refused and left. */
	make_socket(p, true, &live);
	CU_ASSERT_EQUAL(cr__tel_choose_path(p, "app", path, sizeof(path)), -EADDRINUSE);
	CU_ASSERT_TRUE(exists(p));
	close(live);
	unlink(p);
	/* Not a socket: refused and left. */
	make_file(p);
	CU_ASSERT_EQUAL(cr__tel_choose_path(p, "app", path, sizeof(path)), -EEXIST);
	CU_ASSERT_TRUE(exists(p));
	unlink(p);
	/* No room for it. */
	memset(longer, 'y', sizeof(longer) - 1);
	longer[0] = '/';
	longer[sizeof(longer) - 1] = '\0';
	CU_ASSERT_EQUAL(cr__tel_choose_path(longer, "app", path, sizeof(path)), -ENAMETOOLONG);
}

static void
test_unix_addr(void)
{
	struct sockaddr_un sa;
	char longer[sizeof(sa.sun_path) + 1];

	CU_ASSERT_EQUAL(cr__tel_unix_addr(&sa, "/a/b"), 0);
	CU_ASSERT_EQUAL(sa.sun_family, AF_UNIX);
	CU_ASSERT_STRING_EQUAL(sa.sun_path, "/a/b");
	memset(longer, 'z', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	/* 108 bytes leave no room for the NUL; 107 do. */
	CU_ASSERT_EQUAL(cr__tel_unix_addr(&sa, longer), -ENAMETOOLONG);
	longer[sizeof(longer) - 2] = '\0';
	CU_ASSERT_EQUAL(cr__tel_unix_addr(&sa, longer), 0);
}

static const struct ut_case cases[] = {
	UT_CASE(test_default_dir_rule),
	UT_CASE(test_tmp_squatted),
	UT_CASE(test_directory_made_0700),
	UT_CASE(test_directory_refused),
	UT_CASE(test_stale_sockets_cleared),
	UT_CASE(test_explicit_path),
	UT_CASE(test_unix_addr),
};

UT_MAIN("telemetry_path", cases, suite_init, suite_fini)
