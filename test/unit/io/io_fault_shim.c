/* SPDX-License-Identifier: BSD-3-Clause */
/* Seeded fault injection through cr__io_fault_hook; see io_fault_shim.h. Tests only. */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "io_fault_hook.h"
#include "cr_reactor.h"
#include "io_fault_shim.h"

static uint64_t shim_seed;
static unsigned shim_one_in, shim_kinds;
/* Bumped by every enable so each thread reseeds its PRNG. */
static _Atomic unsigned shim_epoch;
static _Atomic uint64_t st_eligible, st_injected[UT_FAULT_KINDS], st_trace;

static _Thread_local unsigned tl_epoch;
static _Thread_local uint64_t tl_state;

static uint64_t
next_rand(void)
{
	unsigned epoch = atomic_load_explicit(&shim_epoch, memory_order_acquire);

	if (tl_epoch != epoch) {
		/* acquire above pairs with the release in ut_fault_enable(): seed is set */
		tl_epoch = epoch;
		tl_state = (shim_seed ^ (0x9e3779b97f4a7c15ull * (cr_lcore_id() + 1ull))) | 1;
	}
	tl_state ^= tl_state >> 12;
	tl_state ^= tl_state << 25;
	tl_state ^= tl_state >> 27;
	return tl_state * 0x2545f4914f6cdd1dull;
}

static bool
can_be_short(const struct cr_op *op, const struct cr_io_cqe *cqe)
{
	switch (op->kind) {
	case CR_OP_SEND:
	case CR_OP_SENDMSG:
	case CR_OP_READ:
	case CR_OP_WRITE:
		return cqe->res > 1;
	default:
		return false;
	}
}

static void
hook(const struct cr_op *op, struct cr_io_cqe *cqe)
{
	static const int errs[] = {-ENOMEM, -EAGAIN, -ECONNRESET};
	unsigned kinds = shim_kinds, n = 0, pick, k;
	enum ut_fault choice[UT_FAULT_KINDS];
	uint64_t r, h;

	if (cqe->flags & CR_IO_F_MORE)
		return;
	if (op->kind == CR_OP_ACCEPT && cqe->res >= 0)
		return;
	if (!can_be_short(op, cqe))
		kinds &= ~(1u << UT_FAULT_SHORT);
	if (kinds == 0)
		return;
	atomic_fetch_add_explicit(&st_eligible, 1, memory_order_relaxed);
	r = next_rand();
	if (r % shim_one_in != 0)
		return;
	for (k = 0; k < UT_FAULT_KINDS; k++)
		if (kinds & (1u << k))
			choice[n++] = (enum ut_fault)k;
	pick = (unsigned)((r >> 32) % n);
	if (choice[pick] == UT_FAULT_SHORT)
		cqe->res = 1 + (int32_t)((r >> 8) % (uint64_t)(cqe->res - 1));
	else
		cqe->res = errs[choice[pick]];
	atomic_fetch_add_explicit(&st_injected[choice[pick]], 1, memory_order_relaxed);
	/* Order-sensitive: the same seed and the same ops give the same value. */
	h = atomic_load_explicit(&st_trace, memory_order_relaxed);
	atomic_store_explicit(&st_trace, h * 1000003u + op->kind * 16u + choice[pick] + 1,
			      memory_order_relaxed);
}

void
ut_fault_enable(uint64_t seed, unsigned one_in, unsigned kinds)
{
	unsigned k;

	shim_seed = seed;
	shim_one_in = one_in == 0 ? 1 : one_in;
	shim_kinds = kinds & UT_FAULT_ALL;
	atomic_store_explicit(&st_eligible, 0, memory_order_relaxed);
	atomic_store_explicit(&st_trace, 0, memory_order_relaxed);
	for (k = 0; k < UT_FAULT_KINDS; k++)
		atomic_store_explicit(&st_injected[k], 0, memory_order_relaxed);
	/* release: pairs with the acquire in next_rand() */
	atomic_fetch_add_explicit(&shim_epoch, 1, memory_order_release);
	cr__io_fault_hook = hook;
}

void
ut_fault_disable(void)
{
	cr__io_fault_hook = NULL;
}

void
ut_fault_stats(struct ut_fault_stats *out)
{
	unsigned k;

	out->eligible = atomic_load_explicit(&st_eligible, memory_order_relaxed);
	out->trace = atomic_load_explicit(&st_trace, memory_order_relaxed);
	for (k = 0; k < UT_FAULT_KINDS; k++)
		out->injected[k] = atomic_load_explicit(&st_injected[k], memory_order_relaxed);
}
