/* SPDX-License-Identifier: BSD-3-Clause */
/* The fake lib/io driver of the deterministic harness; see ut_io.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ut_cunit.h"
#include "ut_io.h"

static int
op_index(const struct ut_io *io, const struct cr_op *op)
{
	for (unsigned i = 0; i < io->n_ops; i++)
		if (io->ops[i] == op)
			return (int)i;
	return -1;
}

static void
queue_cqe(struct ut_io *io, const struct cr_op *op, int32_t res, uint32_t flags, void *buf,
	  uint32_t buf_id)
{
	struct ut_io_cqe *c;

	CU_ASSERT_FATAL(io->cq_tail - io->cq_head < UT_IO_MAX_CQES);
	c = &io->cq[io->cq_tail++ % UT_IO_MAX_CQES];
	*c = (struct ut_io_cqe){op->id, res, flags, buf, buf_id};
	/* A final completion: the op waits no more (a cancel now finds nothing to do). */
	if (!(flags & CR_IO_F_MORE)) {
		int i = op_index(io, op);

		/* In submission order still: ut_io_op() finds the oldest. */
		if (i >= 0)
			memmove(&io->ops[i], &io->ops[i + 1],
				sizeof(io->ops[0]) * (--io->n_ops - (unsigned)i));
	}
}

static int
fake_init(struct cr_backend *be, const struct cr_io_config *cfg)
{
	struct ut_io *io = calloc(1, sizeof(*io));

	if (io == NULL)
		return -ENOMEM;
	io->buf_count = cfg->buf_count;
	io->buf_size = cfg->buf_size;
	io->bufs = calloc(cfg->buf_count, cfg->buf_size);
	io->buf_out = calloc(cfg->buf_count, 1);
	if (io->bufs == NULL || io->buf_out == NULL) {
		free(io->bufs);
		free(io->buf_out);
		free(io);
		return -ENOMEM;
	}
	be->io = io;
	return 0;
}

static void
fake_fini(struct cr_backend *be)
{
	struct ut_io *io = be->io;

	if (io == NULL)
		return;
	free(io->bufs);
	free(io->buf_out);
	free(io);
	be->io = NULL;
}

static int
fake_submit(struct cr_backend *be, struct cr_op *op)
{
	struct ut_io *io = be->io;

	if (io->n_ops == UT_IO_MAX_OPS)
		return -EAGAIN;
	io->ops[io->n_ops++] = op;
	io->submits++;
	return 0;
}

/* As io_uring: the final completion still comes, -ECANCELED. */
static int
fake_cancel(struct cr_backend *be, struct cr_op *op)
{
	struct ut_io *io = be->io;

	if (op_index(io, op) < 0)
		return -EALREADY;
	io->cancels++;
	queue_cqe(io, op, -ECANCELED, 0, NULL, 0);
	return 0;
}

static void
fake_buf_release(struct cr_backend *be, uint32_t buf_id)
{
	struct ut_io *io = be->io;

	CU_ASSERT_FATAL(buf_id < io->buf_count && io->buf_out[buf_id]);
	io->buf_out[buf_id] = 0;
}

static uint32_t
fake_buf_size(struct cr_backend *be)
{
	return be->io->buf_size;
}

static const struct cr_io_driver_ops fake_io = {
    .init = fake_init,
    .fini = fake_fini,
    .submit = fake_submit,
    .cancel = fake_cancel,
    .buf_release = fake_buf_release,
    .buf_size = fake_buf_size,
};

/* The sim backend's poll calls this: report up to @p budget queued completions. */
static unsigned
fake_poll(struct cr_backend *be, unsigned budget)
{
	struct ut_io *io = be->io;
	unsigned n = 0;

	while (io != NULL && n < budget && io->cq_head != io->cq_tail) {
		struct ut_io_cqe c = io->cq[io->cq_head++ % UT_IO_MAX_CQES];

		cr_io_complete(c.user_data, c.res, c.flags, c.buf, c.buf_id);
		n++;
		io = be->io; /* a callback cannot free it, but read it afresh anyway */
	}
	return n;
}

static bool
fake_pending(const struct cr_backend *be)
{
	return be->io != NULL && be->io->cq_head != be->io->cq_tail;
}

int
ut_start_io(unsigned n)
{
	static struct cr_backend_ops ops;

	ops = ut_sim_ops;
	ops.name = "sim-io";
	ops.io = &fake_io;
	ut_io_poll_hook = fake_poll;
	ut_io_pending_hook = fake_pending;
	return ut_start_ops(n, &ops);
}

int
ut_io_suite_init(void)
{
	if (ut_start_io(1) != 0)
		return 1;
	ut_set_current(0);
	return 0;
}

int
ut_io_suite_fini(void)
{
	ut_set_current(CR_LCORE_NONE);
	ut_stop();
	return 0;
}

struct ut_io *
ut_io(unsigned lcore)
{
	return ut_be(lcore)->io;
}

struct cr_op *
ut_io_op(unsigned lcore, int kind, int fd)
{
	struct ut_io *io = ut_io(lcore);
	struct cr_op *best = NULL;

	for (unsigned i = 0; i < io->n_ops; i++)
		if (io->ops[i]->kind == kind && io->ops[i]->fd == fd && best == NULL)
			best = io->ops[i];
	return best;
}

unsigned
ut_io_waiting(unsigned lcore)
{
	return ut_io(lcore)->n_ops;
}

void
ut_io_complete(unsigned lcore, struct cr_op *op, int32_t res, bool more)
{
	queue_cqe(ut_io(lcore), op, res, more ? CR_IO_F_MORE : 0, NULL, 0);
}

int
ut_io_deliver(unsigned lcore, struct cr_op *op, const void *data, size_t len, bool more)
{
	struct ut_io *io = ut_io(lcore);
	uint32_t id;

	if (len > io->buf_size)
		return -EMSGSIZE;
	for (id = 0; id < io->buf_count && io->buf_out[id]; id++)
		;
	if (id == io->buf_count)
		return -ENOBUFS;
	io->buf_out[id] = 1;
	memcpy(io->bufs + (size_t)id * io->buf_size, data, len);
	queue_cqe(io, op, (int32_t)len, CR_IO_F_BUFFER | (more ? CR_IO_F_MORE : 0),
		  io->bufs + (size_t)id * io->buf_size, id);
	return 0;
}

unsigned
ut_io_bufs_out(unsigned lcore)
{
	struct ut_io *io = ut_io(lcore);
	unsigned n = 0;

	for (uint32_t i = 0; i < io->buf_count; i++)
		n += io->buf_out[i];
	return n;
}
