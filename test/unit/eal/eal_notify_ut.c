/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Service manager notification (lib/eal/eal_notify.c): the datagram reaches a socket at a
 * path and at an abstract name, byte for byte; nothing happens without $NOTIFY_SOCKET;
 * bad names and states are refused; a socket nobody serves is an error.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "ut_cunit.h"

#include "cr_eal.h"

static char dir[] = "/tmp/eal_notify_ut.XXXXXX";

/* A datagram socket bound to @p name ("/path" or "@abstract"). */
static int
listener(const char *name)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(name));
	int fd = socket(AF_UNIX, SOCK_DGRAM, 0);

	memcpy(sa.sun_path, name, strlen(name));
	if (name[0] == '@')
		sa.sun_path[0] = '\0';
	else
		len++;
	CU_ASSERT_EQUAL_FATAL(bind(fd, (struct sockaddr *)&sa, len), 0);
	return fd;
}

static void
expect(int fd, const char *want)
{
	char got[8192];
	ssize_t n = recv(fd, got, sizeof(got) - 1, MSG_DONTWAIT);

	CU_ASSERT_TRUE_FATAL(n >= 0);
	got[n] = '\0';
	CU_ASSERT_STRING_EQUAL(got, want);
}

static void
test_path_socket(void)
{
	char path[96];
	int fd;

	snprintf(path, sizeof(path), "%s/notify", dir);
	fd = listener(path);
	setenv("NOTIFY_SOCKET", path, 1);
	CU_ASSERT_EQUAL(cr_sd_notify("READY=1"), 0);
	expect(fd, "READY=1");
	CU_ASSERT_EQUAL(
	    cr_sd_notifyf("STATUS=listening on %s:%d\nMAINPID=%d", "127.0.0.1", 80, 1234), 0);
	expect(fd, "STATUS=listening on 127.0.0.1:80\nMAINPID=1234");
	close(fd);
	/* Nobody there any more. */
	CU_ASSERT_EQUAL(cr_sd_notify("STOPPING=1"), -ECONNREFUSED);
	unlink(path);
	CU_ASSERT_EQUAL(cr_sd_notify("STOPPING=1"), -ENOENT);
}

static void
test_abstract_socket(void)
{
	char name[64];
	int fd;

	snprintf(name, sizeof(name), "@eal_notify_ut.%d", (int)getpid());
	fd = listener(name);
	setenv("NOTIFY_SOCKET", name, 1);
	CU_ASSERT_EQUAL(cr_sd_notify("RELOADING=1"), 0);
	expect(fd, "RELOADING=1");
	close(fd);
}

static void
test_no_socket(void)
{
	unsetenv("NOTIFY_SOCKET");
	CU_ASSERT_EQUAL(cr_sd_notify("READY=1"), 0);
	setenv("NOTIFY_SOCKET", "", 1);
	CU_ASSERT_EQUAL(cr_sd_notify("READY=1"), 0);
}

static void
test_bad(void)
{
	char big[5000], longname[200];

	setenv("NOTIFY_SOCKET", "relative/path", 1);
	CU_ASSERT_EQUAL(cr_sd_notify("READY=1"), -EINVAL);
	setenv("NOTIFY_SOCKET", "@", 1);
	CU_ASSERT_EQUAL(cr_sd_notify("READY=1"), -EINVAL);
	memset(longname, 'x', sizeof(longname) - 1);
	longname[0] = '/';
	longname[sizeof(longname) - 1] = '\0';
	setenv("NOTIFY_SOCKET", longname, 1);
	CU_ASSERT_EQUAL(cr_sd_notify("READY=1"), -ENAMETOOLONG);
	setenv("NOTIFY_SOCKET", "/tmp/x", 1);
	CU_ASSERT_EQUAL(cr_sd_notify(NULL), -EINVAL);
	CU_ASSERT_EQUAL(cr_sd_notify(""), -EINVAL);
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	CU_ASSERT_EQUAL(cr_sd_notify(big), -EINVAL);
	CU_ASSERT_EQUAL(cr_sd_notifyf("%s", big), -EINVAL);
	unsetenv("NOTIFY_SOCKET");
}

static int
suite_init(void)
{
	return mkdtemp(dir) == NULL;
}

static int
suite_fini(void)
{
	return rmdir(dir);
}

static const struct ut_case cases[] = {
    UT_CASE(test_path_socket),
    UT_CASE(test_abstract_socket),
    UT_CASE(test_no_socket),
    UT_CASE(test_bad),
};

UT_MAIN("eal_notify", cases, suite_init, suite_fini)
