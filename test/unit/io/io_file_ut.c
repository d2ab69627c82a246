/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * File I/O through lib/io on the driver named by $CR_UT_DRIVER: read, write and fsync on a
 * temporary file, errors, and a writer coping with seeded injected faults.
 */
#include "io_fault_shim.h"
#include "ut_data.h"
#include "ut_runtime.h"
#include "ut_socket.h"

#define BLOCK	 16384u
#define N_BLOCKS 64u
#define FILE_LEN (BLOCK * N_BLOCKS)

static int
tmp_file(void)
{
	char path[] = "/tmp/cr_io_file_ut.XXXXXX";
	int fd = mkostemp(path, O_CLOEXEC);

	if (fd >= 0)
		unlink(path);
	return fd;
}

/* ---- write, fsync, read back, EOF, errors ---- */

struct rw {
	int fd, phase;
	uint8_t *wbuf, *rbuf;
	unsigned done, bad;
	int32_t res;
	unsigned calls;
	uint64_t resubmits;
};

static void
submit_block(struct rw *s, bool write, uint32_t from, uint32_t len);

struct block_ctx {
	struct rw *s;
	bool write;
	uint32_t off, len;
};

static struct block_ctx blocks[N_BLOCKS * 2];

static void
block_done(void *ctx, const struct cr_io_cqe *cqe)
{
	struct block_ctx *b = ctx;

	CU_ASSERT_FALSE(cqe->flags & CR_IO_F_MORE);
	if (cqe->res <= 0 || (uint32_t)cqe->res > b->len) {
		b->s->bad++;
		b->s->done++;
		return;
	}
	if ((uint32_t)cqe->res < b->len) {
		/* A short transfer: the rest is still ours to do. */
		b->s->resubmits++;
		uint32_t n = (uint32_t)cqe->res;

		submit_block(b->s, b->write, b->off + n, b->len - n);
		return;
	}
	b->s->done++;
}

static void
submit_block(struct rw *s, bool write, uint32_t off, uint32_t len)
{
	struct block_ctx *b = &blocks[off / BLOCK + (write ? 0 : N_BLOCKS)];
	cr_op_id id;

	b->s = s;
	b->write = write;
	b->off = off;
	b->len = len;
	id = write ? cr_io_write(s->fd, s->wbuf + off, len, off, block_done, b)
		   : cr_io_read(s->fd, s->rbuf + off, len, off, block_done, b);
	CU_ASSERT_NOT_EQUAL(id, 0);
	if (id == 0) {
		s->bad++;
		s->done++;
	}
}

static void
one_done(void *ctx, const struct cr_io_cqe *cqe)
{
	struct rw *s = ctx;

	s->calls++;
	s->res = cqe->res;
	CU_ASSERT_EQUAL(cqe->flags, 0);
}

static int
rw_step(void *arg)
{
	struct rw *s = arg;
	unsigned i;

	switch (s->phase) {
	case 0:
		for (i = 0; i < N_BLOCKS; i++)
			submit_block(s, true, i * BLOCK, BLOCK);
		s->phase = 1;
		break;
	case 1:
		if (s->done < N_BLOCKS)
			break;
		CU_ASSERT_EQUAL(s->bad, 0);
		CU_ASSERT_NOT_EQUAL(cr_io_fsync(s->fd, one_done, s), 0);
		s->phase = 2;
		break;
	case 2:
		if (s->calls == 0)
			break;
		CU_ASSERT_EQUAL(s->res, 0);
		s->done = 0;
		for (i = 0; i < N_BLOCKS; i++)
			submit_block(s, false, i * BLOCK, BLOCK);
		s->phase = 3;
		break;
	case 3:
		if (s->done < N_BLOCKS)
			break;
		CU_ASSERT_EQUAL(s->bad, 0);
		CU_ASSERT_EQUAL(ut_check(s->rbuf, 0, FILE_LEN), FILE_LEN);
		/* At and past the end of the file: 0 bytes, not an error. */
		s->calls = 0;
		CU_ASSERT_NOT_EQUAL(cr_io_read(s->fd, s->rbuf, BLOCK, FILE_LEN, one_done, s), 0);
		s->phase = 4;
		break;
	case 4:
		if (s->calls == 0)
			break;
		CU_ASSERT_EQUAL(s->res, 0);
		s->calls = 0;
		CU_ASSERT_NOT_EQUAL(cr_io_read(-1, s->rbuf, BLOCK, 0, one_done, s), 0);
		s->phase = 5;
		break;
	case 5:
		if (s->calls == 0)
			break;
		CU_ASSERT_EQUAL(s->res, -EBADF);
		CU_ASSERT_EQUAL(cr_io_inflight(), 0);
		ut_finish();
		break;
	}
	return 1;
}

static void
test_write_fsync_read(void)
{
	struct rw s = {.fd = tmp_file()};

	CU_ASSERT_FATAL(s.fd >= 0);
	s.wbuf = malloc(FILE_LEN);
	s.rbuf = calloc(1, FILE_LEN);
	CU_ASSERT_FATAL(s.wbuf != NULL && s.rbuf != NULL);
	ut_fill(s.wbuf, 0, FILE_LEN);
	ut_run(rw_step, &s);
	CU_ASSERT_EQUAL(s.phase, 5);
	close(s.fd);
	free(s.wbuf);
	free(s.rbuf);
}

/* A write to a read-only descriptor fails with -EBADF through the callback. */
struct ro {
	int fd, phase;
	unsigned calls;
	int32_t res;
	char buf[16];
};

static void
ro_done(void *ctx, const struct cr_io_cqe *cqe)
{
	struct ro *s = ctx;

	s->calls++;
	s->res = cqe->res;
}

static int
ro_step(void *arg)
{
	struct ro *s = arg;

	if (s->phase == 0) {
		CU_ASSERT_NOT_EQUAL(cr_io_write(s->fd, s->buf, sizeof(s->buf), 0, ro_done, s), 0);
		s->phase = 1;
	} else if (s->calls != 0) {
		CU_ASSERT_EQUAL(s->calls, 1);
		CU_ASSERT_EQUAL(s->res, -EBADF);
		ut_finish();
	}
	return 1;
}

static void
test_write_read_only_fd(void)
{
	struct ro s = {.fd = open("/dev/null", O_RDONLY | O_CLOEXEC)};

	CU_ASSERT_FATAL(s.fd >= 0);
	ut_run(ro_step, &s);
	close(s.fd);
}

/* ---- a sequential writer under injected faults ---- */

#define FW_BLOCK  4096u
#define FW_BLOCKS 256u
#define FW_LEN	  (FW_BLOCK * FW_BLOCKS)
#define FW_TRIES  1000u

struct fw {
	int fd, phase;
	uint8_t *buf;
	uint32_t off; /* next byte to write */
	unsigned tries;
	bool busy, failed, fsynced;
	uint64_t errors[3], shorts;
};

/* The injected errors; anything else is a real failure. */
static void
count_error(struct fw *s, int32_t res)
{
	if (res == -ENOMEM)
		s->errors[0]++;
	else if (res == -EAGAIN)
		s->errors[1]++;
	else if (res == -ECONNRESET)
		s->errors[2]++;
	else
		s->failed = true;
}

static void
fw_done(void *ctx, const struct cr_io_cqe *cqe)
{
	struct fw *s = ctx;

	s->busy = false;
	if (++s->tries > FW_TRIES) {
		s->failed = true;
		return;
	}
	if (cqe->res > 0) {
		if ((uint32_t)cqe->res < FW_BLOCK - s->off % FW_BLOCK)
			s->shorts++;
		s->off += (uint32_t)cqe->res;
		return;
	}
	/* Transient: try the same range again. */
	count_error(s, cqe->res);
}

static void
fw_write(struct fw *s)
{
	uint32_t len = FW_BLOCK - s->off % FW_BLOCK;

	s->busy = true;
	if (cr_io_write(s->fd, s->buf + s->off, len, s->off, fw_done, s) == 0) {
		s->failed = true;
		s->busy = false;
	}
}

static void
fsync_done(void *ctx, const struct cr_io_cqe *cqe)
{
	struct fw *s = ctx;

	s->busy = false;
	s->fsynced = cqe->res == 0;
	if (cqe->res != 0)
		count_error(s, cqe->res);
}

static int
fw_step(void *arg)
{
	struct fw *s = arg;

	if (s->busy)
		return 1;
	if (s->failed) {
		CU_FAIL("writer gave up");
		ut_finish();
	} else if (s->off < FW_LEN) {
		fw_write(s);
	} else if (!s->fsynced) {
		/* fsync is faulted too; it is retried like a write */
		s->busy = true;
		CU_ASSERT_NOT_EQUAL(cr_io_fsync(s->fd, fsync_done, s), 0);
		if (++s->tries > FW_TRIES)
			s->failed = true;
	} else {
		ut_finish();
	}
	return 1;
}

static void
run_faulted_writer(uint64_t seed, struct ut_fault_stats *st, struct fw *out)
{
	struct fw s = {.fd = tmp_file()};
	uint8_t *back;

	CU_ASSERT_FATAL(s.fd >= 0);
	s.buf = malloc(FW_LEN);
	back = calloc(1, FW_LEN);
	CU_ASSERT_FATAL(s.buf != NULL && back != NULL);
	ut_fill(s.buf, 0, FW_LEN);
	ut_fault_enable(seed, 3, UT_FAULT_ALL);
	ut_run(fw_step, &s);
	ut_fault_disable();
	ut_fault_stats(st);
	CU_ASSERT_FALSE(s.failed);
	CU_ASSERT_EQUAL(s.off, FW_LEN);
	/* Each rewrite was a lie about work the kernel did: the file is whole regardless. */
	CU_ASSERT_EQUAL(pread(s.fd, back, FW_LEN, 0), (ssize_t)FW_LEN);
	CU_ASSERT_EQUAL(ut_check(back, 0, FW_LEN), FW_LEN);
	*out = s;
	close(s.fd);
	free(s.buf);
	free(back);
}

static void
test_fault_injection_seeded(void)
{
	struct ut_fault_stats a, b;
	struct fw fa, fb;
	unsigned k;

	run_faulted_writer(42, &a, &fa);
	printf("\n    eligible %llu, injected ENOMEM %llu EAGAIN %llu ECONNRESET %llu short %llu\n",
	       (unsigned long long)a.eligible, (unsigned long long)a.injected[0],
	       (unsigned long long)a.injected[1], (unsigned long long)a.injected[2],
	       (unsigned long long)a.injected[3]);
	for (k = 0; k < UT_FAULT_KINDS; k++)
		CU_ASSERT(a.injected[k] > 0);
	/* What the owner saw is exactly what was injected. */
	CU_ASSERT_EQUAL(fa.errors[0], a.injected[UT_FAULT_ENOMEM]);
	CU_ASSERT_EQUAL(fa.errors[1], a.injected[UT_FAULT_EAGAIN]);
	CU_ASSERT_EQUAL(fa.errors[2], a.injected[UT_FAULT_ECONNRESET]);
	CU_ASSERT(fa.shorts >= a.injected[UT_FAULT_SHORT]);
	/* Same seed, same ops: the same faults in the same order. */
	run_faulted_writer(42, &b, &fb);
	CU_ASSERT_EQUAL(a.trace, b.trace);
	CU_ASSERT_EQUAL(a.eligible, b.eligible);
	for (k = 0; k < UT_FAULT_KINDS; k++)
		CU_ASSERT_EQUAL(a.injected[k], b.injected[k]);
	/* Another seed, another sequence. */
	run_faulted_writer(7, &b, &fb);
	CU_ASSERT_NOT_EQUAL(a.trace, b.trace);
}

static const struct ut_case cases[] = {
	UT_CASE(test_write_fsync_read),
	UT_CASE(test_write_read_only_fd),
	UT_CASE(test_fault_injection_seeded),
};

UT_MAIN("io_file", cases, ut_rt_setup, NULL)
