/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The log thread and per-thread buffers (lib/eal/eal_log_thread.c): attached threads'
 * lines arrive whole and in order, a full buffer drops and counts, a stuck sink never
 * blocks a producer, an abort() writes out what was buffered.
 */
#include <semaphore.h>
#include <signal.h>
#include <sys/wait.h>

#include "log_ut.h"

/* ---- the log thread ---- */

struct attached_writer {
	unsigned id;
	unsigned lines;
	int rc;
};

static void *
attached_writer(void *arg)
{
	struct attached_writer *w = arg;

	w->rc = cr_log_attach(w->id);
	for (unsigned i = 0; w->rc == 0 && i < w->lines; i++)
		CR_LOG(lib_a, NOTICE, "lcore %u line %u", w->id, i);
	cr_log_detach();
	return NULL;
}

static void
test_attached_threads_write_through_log_thread(void)
{
	struct attached_writer w[3] = {
	    {.id = 1, .lines = 300}, {.id = 2, .lines = 300}, {.id = 3, .lines = 300}};
	pthread_t t[3];
	char path[128], needle[64];

	cr_log_set_timestamps(false);
	path_in_tmp(path, sizeof(path), "thread.log");
	CU_ASSERT_EQUAL_FATAL(cr_log_set_file(path), 0);
	CU_ASSERT_EQUAL(cr_log_attach(CR_MAX_LCORES), -EINVAL);
	for (int i = 0; i < 3; i++)
		pthread_create(&t[i], NULL, attached_writer, &w[i]);
	for (int i = 0; i < 3; i++) {
		pthread_join(t[i], NULL);
		CU_ASSERT_EQUAL(w[i].rc, 0);
	}
	cr_log_flush();
	slurp(path);
	for (unsigned id = 1; id <= 3; id++) {
		snprintf(needle, sizeof(needle), "lib.a: notice: lcore %u line ", id);
		CU_ASSERT_EQUAL(count_lines(err_text, needle), 300);
		/* In order per thread. */
		snprintf(needle, sizeof(needle), "lcore %u line 299\n", id);
		CU_ASSERT_PTR_NOT_NULL(strstr(err_text, needle));
		CU_ASSERT_TRUE(strstr(err_text, needle) >
			       strstr(err_text, id == 1	  ? "lcore 1 line 298\n"
						: id == 2 ? "lcore 2 line 298\n"
							  : "lcore 3 line 298\n"));
		CU_ASSERT_EQUAL(cr_log_dropped(id), 0);
	}

	/* Two threads cannot share one buffer. */
	CU_ASSERT_EQUAL(cr_log_attach(4), 0);
	{
		struct attached_writer dup = {.id = 4, .lines = 0};
		pthread_t d;

		pthread_create(&d, NULL, attached_writer, &dup);
		pthread_join(d, NULL);
		CU_ASSERT_EQUAL(dup.rc, -EBUSY);
	}
	cr_log_detach();
	cr_log_detach(); /* twice is nothing */
	CU_ASSERT_EQUAL(cr_log_set_file(NULL), 0);
	unlink(path);
	cr_log_set_timestamps(true);
}

static sem_t held_logged, held_go;

static void *
held_writer(void *arg)
{
	(void)arg;
	CU_ASSERT_EQUAL(cr_log_attach(5), 0);
	CR_LOG(lib_a, NOTICE, "held in lcore 5's buffer");
	sem_post(&held_logged);
	sem_wait(&held_go);
	cr_log_detach(); /* writes it out */
	return NULL;
}

static void
test_unattached_thread_writes_at_once(void)
{
	char path[128];
	const char *held, *direct;
	pthread_t t;

	cr_log_set_timestamps(false);
	path_in_tmp(path, sizeof(path), "direct.log");
	CU_ASSERT_EQUAL_FATAL(cr_log_set_file(path), 0);
	sem_init(&held_logged, 0, 0);
	sem_init(&held_go, 0, 0);
	/* The log thread runs (an earlier attach started it) but is held: an lcore's line
	 * waits in its buffer, while this thread, not an lcore, writes its own at once. */
	cr__log_pause(true);
	pthread_create(&t, NULL, held_writer, NULL);
	sem_wait(&held_logged);
	CR_LOG(lib_b, NOTICE, "written by the control path");
	slurp(path);
	CU_ASSERT_STRING_EQUAL(err_text, "lib.b: notice: written by the control path\n");
	sem_post(&held_go);
	pthread_join(t, NULL);
	cr__log_pause(false);
	slurp(path);
	held = strstr(err_text, "held in lcore 5's buffer");
	direct = strstr(err_text, "written by the control path");
	CU_ASSERT_TRUE(held != NULL && direct != NULL && direct < held);
	CU_ASSERT_EQUAL(cr_log_set_file(NULL), 0);
	unlink(path);
	sem_destroy(&held_logged);
	sem_destroy(&held_go);
	cr_log_set_timestamps(true);
}

static void
test_full_buffer_drops_and_counts(void)
{
	char path[128], line[64], want[128];
	const unsigned total = 500;
	/* A record is a 4-byte header and the line, its timestamp included (the file sink
	 * leaves it out here): "<stamp>lib.a: notice: drop NNN\n". */
	const size_t rec = 4 + CR__LOG_STAMP_LEN + strlen("lib.a: notice: drop 000\n");
	const unsigned fit = (unsigned)(4096 / rec);

	cr_log_set_timestamps(false);
	path_in_tmp(path, sizeof(path), "drop.log");
	CU_ASSERT_EQUAL_FATAL(cr_log_set_file(path), 0);
	cr__log_set_buf_size(4096);
	CU_ASSERT_EQUAL_FATAL(cr_log_attach(9), 0);
	cr__log_set_buf_size(64 * 1024);
	cr__log_pause(true);
	for (unsigned i = 0; i < total; i++)
		CR_LOG(lib_a, NOTICE, "drop %03u", i);
	CU_ASSERT_EQUAL(cr_log_dropped(9), total - fit);
	/* Nothing was written while the log thread was held. */
	CU_ASSERT_STRING_EQUAL(slurp(path), "");
	cr__log_pause(false);
	cr_log_flush();
	slurp(path);
	CU_ASSERT_EQUAL(count_lines(err_text, "lib.a: notice: drop "), fit);
	snprintf(line, sizeof(line), "drop %03u\n", fit - 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err_text, line));
	snprintf(line, sizeof(line), "drop %03u\n", fit);
	CU_ASSERT_PTR_NULL(strstr(err_text, line));
	snprintf(want, sizeof(want),
		 "lib.eal: warning: %u log lines dropped on lcore 9: its log buffer was full\n",
		 total - fit);
	CU_ASSERT_EQUAL(count_lines(err_text, want), 1);

	/* Drained, the buffer takes lines again, and the drops are not reported twice. */
	CR_LOG(lib_a, NOTICE, "after");
	cr_log_flush();
	slurp(path);
	CU_ASSERT_EQUAL(count_lines(err_text, "lib.a: notice: after\n"), 1);
	CU_ASSERT_EQUAL(count_lines(err_text, "log lines dropped"), 1);
	CU_ASSERT_EQUAL(cr_log_dropped(9), total - fit);
	cr_log_detach();
	CU_ASSERT_EQUAL(cr_log_set_file(NULL), 0);
	unlink(path);
	cr_log_set_timestamps(true);
}

/* ---- the app's own log files ---- */

static void *
file_writer(void *arg)
{
	int *id = arg;
	char line[64];

	CU_ASSERT_EQUAL(cr_log_attach(11), 0);
	for (unsigned i = 0; i < 200; i++) {
		int n = snprintf(line, sizeof(line), "access %03u \"x\"\n", i);

		CU_ASSERT_EQUAL(cr_log_file_put(*id, line, (size_t)n), 0);
	}
	cr_log_detach();
	return NULL;
}

static void
test_log_file_lines_go_out_as_they_are(void)
{
	char path[128], acc[128], big[6000];
	static char text[OUT_MAX];
	pthread_t t;
	int id, fd;
	ssize_t n;

	cr_log_set_timestamps(true);
	path_in_tmp(path, sizeof(path), "main.log");
	path_in_tmp(acc, sizeof(acc), "access.log");
	CU_ASSERT_EQUAL_FATAL(cr_log_set_file(path), 0);
	CU_ASSERT_EQUAL(cr_log_file_open(""), -EINVAL);
	id = cr_log_file_open(acc);
	CU_ASSERT_TRUE_FATAL(id >= 1);
	CU_ASSERT_EQUAL(cr_log_file_put(id + 1, "x\n", 2), -EINVAL);
	CU_ASSERT_EQUAL(cr_log_file_put(id, "x\n", 0), -EINVAL);
	CU_ASSERT_EQUAL(cr_log_file_put(id, big, CR_LOG_FILE_LINE_MAX + 1), -EMSGSIZE);
	/* An lcore's lines, through its buffer and the log thread. */
	pthread_create(&t, NULL, file_writer, &id);
	pthread_join(t, NULL);
	/* A line longer than a batch, from a thread that is not attached. */
	memset(big, 'b', sizeof(big));
	big[sizeof(big) - 1] = '\n';
	CU_ASSERT_EQUAL(cr_log_file_put(id, big, sizeof(big)), 0);
	cr_log_flush();
	fd = open(acc, O_RDONLY);
	CU_ASSERT_TRUE_FATAL(fd >= 0);
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	CU_ASSERT_TRUE_FATAL(n > 0);
	text[n] = '\0';
	/* No timestamp, component or level: the lines as they were put, in order. */
	CU_ASSERT_EQUAL(strncmp(text, "access 000 \"x\"\naccess 001 \"x\"\n", 30), 0);
	CU_ASSERT_EQUAL(count_lines(text, "access "), 200);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "access 199 \"x\"\nbbbb"));
	CU_ASSERT_EQUAL((size_t)n, 200 * strlen("access 000 \"x\"\n") + sizeof(big));
	/* None of it in the log. */
	CU_ASSERT_PTR_NULL(strstr(slurp(path), "access"));

	/* Rotation: renamed, reopened; new lines go to the new file. */
	char moved[160];

	snprintf(moved, sizeof(moved), "%s.1", acc);
	CU_ASSERT_EQUAL(rename(acc, moved), 0);
	CU_ASSERT_EQUAL(cr_log_file_reopen(id), 0);
	CU_ASSERT_EQUAL(cr_log_file_put(id, "after\n", 6), 0);
	cr_log_flush();
	CU_ASSERT_STRING_EQUAL(slurp(acc), "after\n");
	CU_ASSERT_EQUAL(cr_log_file_reopen(id + 1), -EINVAL);
	cr_log_file_close(id);
	CU_ASSERT_EQUAL(cr_log_file_put(id, "closed\n", 7), -EINVAL);
	CU_ASSERT_EQUAL(cr_log_set_file(NULL), 0);
	unlink(acc);
	unlink(moved);
	unlink(path);
}

static void
test_log_file_full_buffer_drops_and_counts(void)
{
	char path[128], acc[128], want[256], line[64];
	const size_t rec = 4 + strlen("line 000\n");
	const unsigned total = 600, fit = (unsigned)(4096 / rec);
	unsigned ok = 0;
	int id;

	cr_log_set_timestamps(false);
	path_in_tmp(path, sizeof(path), "main2.log");
	path_in_tmp(acc, sizeof(acc), "access2.log");
	CU_ASSERT_EQUAL_FATAL(cr_log_set_file(path), 0);
	id = cr_log_file_open(acc);
	CU_ASSERT_TRUE_FATAL(id >= 1);
	cr__log_set_buf_size(4096);
	CU_ASSERT_EQUAL_FATAL(cr_log_attach(12), 0);
	cr__log_set_buf_size(64 * 1024);
	cr__log_pause(true);
	for (unsigned i = 0; i < total; i++) {
		int n = snprintf(line, sizeof(line), "line %03u\n", i);

		ok += cr_log_file_put(id, line, (size_t)n) == 0;
	}
	CU_ASSERT_EQUAL(ok, fit);
	CU_ASSERT_EQUAL(cr_log_file_dropped(id), total - fit);
	/* The log's own count is the log's: nothing of it dropped. */
	CU_ASSERT_EQUAL(cr_log_dropped(12), 0);
	cr__log_pause(false);
	cr_log_flush();
	CU_ASSERT_EQUAL(count_lines(slurp(acc), "line "), fit);
	snprintf(want, sizeof(want), "lib.eal: warning: %u lines of %s dropped: a log buffer was full\n",
		 total - fit, acc);
	CU_ASSERT_EQUAL(count_lines(slurp(path), want), 1);
	cr_log_detach();
	cr_log_file_close(id);
	CU_ASSERT_EQUAL(cr_log_set_file(NULL), 0);
	unlink(acc);
	unlink(path);
	cr_log_set_timestamps(true);
}

static void *
pipe_reader(void *arg)
{
	int fd = *(int *)arg;
	char buf[4096];

	while (read(fd, buf, sizeof(buf)) > 0)
		;
	return NULL;
}

static void
test_stuck_sink_does_not_block_producer(void)
{
	char path[64];
	int p[2], flags;
	pthread_t reader;
	unsigned i;

	/* A pipe nobody reads, filled up: a write to it blocks. */
	CU_ASSERT_EQUAL_FATAL(pipe(p), 0);
	flags = fcntl(p[1], F_GETFL);
	fcntl(p[1], F_SETFL, flags | O_NONBLOCK);
	memset(err_text, 'x', 4096);
	while (write(p[1], err_text, 4096) > 0)
		;
	fcntl(p[1], F_SETFL, flags);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", p[1]);
	CU_ASSERT_EQUAL_FATAL(cr_log_set_file(path), 0);
	CU_ASSERT_EQUAL_FATAL(cr_log_attach(11), 0);
	/* The log thread blocks in write(2) on the first of these; we never do (a blocked
	 * producer would hang here until the suite's timeout). */
	for (i = 0; i < 20000; i++)
		CR_LOG(lib_a, NOTICE, "into a stuck pipe %u", i);
	CU_ASSERT_TRUE(cr_log_dropped(11) > 0);
	/* Unstick it, write out the rest, and let the reader see the end. */
	pthread_create(&reader, NULL, pipe_reader, &p[0]);
	cr_log_detach();
	CU_ASSERT_EQUAL(cr_log_set_file(NULL), 0);
	close(p[1]);
	pthread_join(reader, NULL);
	close(p[0]);
}

/* ---- abort ---- */

/* The child of test_abort_writes_buffered_lines: an lcore logs why, then aborts, with the
 * log thread held so that the line is still in its buffer. */
__attribute__((constructor)) static void
abort_child(void)
{
	struct sigaction dfl = {.sa_handler = SIG_DFL};

	if (getenv("EAL_LOG_UT_ABORT_CHILD") == NULL)
		return;
	/* The core dump would only slow the test down. */
	sigaction(SIGABRT, &dfl, NULL);
	cr_log_set_timestamps(false);
	if (cr_log_attach(0) != 0)
		_exit(3);
	cr__log_pause(true);
	CR_LOG(lib_a, ERR, "the reason for the abort");
	abort();
}

static void
test_abort_writes_buffered_lines(void)
{
	int p[2], status;
	pid_t pid;
	ssize_t n, got = 0;

	CU_ASSERT_EQUAL_FATAL(pipe(p), 0);
	fflush(NULL);
	pid = fork();
	CU_ASSERT_TRUE_FATAL(pid >= 0);
	if (pid == 0) {
		char *const argv[] = {"eal_log_thread_ut", NULL};

		dup2(p[1], STDERR_FILENO);
		setenv("EAL_LOG_UT_ABORT_CHILD", "1", 1);
		execv("/proc/self/exe", argv);
		_exit(4);
	}
	close(p[1]);
	while ((n = read(p[0], err_text + got, OUT_MAX - 1 - (size_t)got)) > 0)
		got += n;
	err_text[got] = '\0';
	close(p[0]);
	CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
	CU_ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "lib.a: err: the reason for the abort\n"));
}

static const struct ut_case cases[] = {
    {"attached threads write through the log thread",
     test_attached_threads_write_through_log_thread},
    {"a thread that is not an lcore writes its line at once",
     test_unattached_thread_writes_at_once},
    {"a full buffer drops and counts", test_full_buffer_drops_and_counts},
    {"a stuck sink does not block a producer", test_stuck_sink_does_not_block_producer},
    {"abort writes what was buffered", test_abort_writes_buffered_lines},
    {"a log file's lines go out as they are", test_log_file_lines_go_out_as_they_are},
    {"a log file's full buffer drops and counts", test_log_file_full_buffer_drops_and_counts},
};

UT_MAIN("eal_log_thread", cases, log_suite_init, log_suite_fini)
