/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The origin side of transactions (see txn.h): declare keys, lock their shards one after
 * another in ascending order (each lock with its shard's first reads), run the command's
 * steps under the locks, release, answer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kv.h"

static void
tx_fini(void *arg)
{
	struct kv_tx *tx = arg;
	unsigned i;

	if (tx == NULL)
		return;
	if (tx->cmd_fini != NULL)
		tx->cmd_fini(tx->cmd);
	else
		free(tx->cmd);
	for (i = 0; tx->parts != NULL && i < tx->nshards; i++)
		rb_fini(&tx->parts[i].out);
	free(tx->parts);
	for (i = 0; tx->locks != NULL && i < tx->nshards; i++)
		free(tx->locks[i].rel); /* made, never sent: no hold was granted */
	free(tx->locks);
	free(tx->shard);
	free(tx->pool);
	free(tx->modes);
	free(tx->kidx);
	free(tx->kexcl);
	free(tx);
}

struct kv_tx *
kv_tx_new(struct kreq *kr)
{
	struct kv_tx *tx = calloc(1, sizeof(*tx));

	if (tx == NULL) {
		rb_error(&kr->reply, kv_err_oom);
		return NULL;
	}
	tx->kr = kr;
	kr->state = tx;
	kr->state_fini = tx_fini;
	kv_tx_await(kr->kc->sh, 1);
	if (kr->hop) {
		tx->nested = true; /* inside an EXEC, which holds every lock it needs */
		return tx;
	}
	/* Nothing of this client's overtakes the transaction until it holds its locks. */
	tx->blocked = true;
	kr->kc->blocked++;
	return tx;
}

int
kv_tx_key(struct kv_tx *tx, uint32_t idx, bool excl)
{
	if (tx->nkeys == tx->kcap) {
		uint32_t cap = tx->kcap ? tx->kcap * 2 : 8;
		uint32_t *k = realloc(tx->kidx, cap * sizeof(*k));
		uint8_t *e = k != NULL ? realloc(tx->kexcl, cap) : NULL;

		if (k != NULL)
			tx->kidx = k;
		if (e == NULL)
			return -ENOMEM;
		tx->kexcl = e;
		tx->kcap = cap;
	}
	tx->kidx[tx->nkeys] = idx;
	tx->kexcl[tx->nkeys++] = excl;
	return 0;
}

void
kv_tx_whole(struct kv_tx *tx, unsigned shard, bool excl)
{
	if (excl || tx->whole[shard] == 0)
		tx->whole[shard] = excl ? KV_WHOLE_EXCL : KV_WHOLE_SHARED;
}

int
kv_tx_at(const struct kv_tx *tx, unsigned shard)
{
	unsigned i;

	for (i = 0; i < tx->nshards; i++)
		if (tx->shard[i] == shard)
			return (int)i;
	return -1;
}

static void lock_next(struct kv_tx *tx);

static void
locked_one(struct kpart *p)
{
	struct kv_tx *tx = p->kr->state;
	struct kv_txlock *l = &tx->locks[tx->locking];

	if (!tx->nested && (l->nkeys != 0 || l->whole != 0) && l->hold == NULL) {
		/* Not granted: the shard could not be reached (its reply says why). */
		tx->failed = true;
	}
	tx->locking++;
	if (!tx->in_loop)
		lock_next(tx);
}

static void
all_locked(struct kv_tx *tx)
{
	/* Every lock is held: later commands of the client may go now. Whatever they send
	 * to a shard of these keys reaches it behind the locks and waits there, while the
	 * steps below run as the locks' holder. (Unblocking first: the resumed parsing
	 * cannot free this request, which is not done yet.) */
	if (tx->blocked && !tx->block_to_end) {
		tx->blocked = false;
		kv_unblock(tx->kr->kc);
	}
	tx->next(tx); /* may finish the transaction */
}

static void
lock_failed(struct kv_tx *tx)
{
	struct rbuf *o = &tx->parts[tx->locking - 1].out;
	char err[200];
	size_t n = o->len < sizeof(err) ? o->len : sizeof(err);

	memcpy(err, o->p, n);
	kv_tx_finish(tx, err, n);
}

static void
lock_next(struct kv_tx *tx)
{
	struct kv_shard *sh = tx->kr->kc->sh;

	tx->in_loop = true;
	while (!tx->failed && tx->locking < tx->nshards) {
		unsigned at = tx->locking;

		kv_part_send(sh, &tx->parts[at]);
		if (tx->locking == at)
			break; /* its answer comes later */
	}
	tx->in_loop = false;
	if (tx->failed)
		lock_failed(tx);
	else if (tx->locking == tx->nshards)
		all_locked(tx);
}

/* Group the declared keys by shard, ascending, and build each shard's lock and its part's
 * arguments ([argv[0], key, (step - 1 more)...]). */
static int
build(struct kv_tx *tx, void (*gather)(struct kv_ctx *x))
{
	struct kreq *kr = tx->kr;
	unsigned counts[CR_MAX_LCORES] = {0}, of[CR_MAX_LCORES], i, n = 0;
	uint32_t k, pos = 0, mpos = 0, total = 0;

	for (k = 0; k < tx->nkeys; k++)
		counts[key_shard(&kr->argv[tx->kidx[k]])]++;
	for (i = 0; i < kv.nshards; i++)
		if (counts[i] != 0 || tx->whole[i] != 0)
			of[n++] = i;
	tx->nshards = n;
	tx->shard = calloc(n, sizeof(*tx->shard));
	tx->parts = calloc(n, sizeof(*tx->parts));
	tx->locks = calloc(n, sizeof(*tx->locks));
	/* Per shard: its keys for the lock, then [argv[0], keys and their followers]. */
	for (k = 0; k < tx->nkeys; k++)
		total += 1 + tx->step;
	tx->pool = malloc((total + n) * sizeof(*tx->pool));
	tx->modes = malloc(tx->nkeys + 1);
	if (tx->shard == NULL || tx->parts == NULL || tx->locks == NULL || tx->pool == NULL ||
	    tx->modes == NULL)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		struct kv_txlock *l = &tx->locks[i];
		struct kpart *p = &tx->parts[i];
		struct kv_arg *keys = tx->pool + pos;
		uint32_t nk = 0, j;

		tx->shard[i] = of[i];
		for (k = 0; k < tx->nkeys; k++) {
			if (key_shard(&kr->argv[tx->kidx[k]]) != of[i])
				continue;
			keys[nk] = kr->argv[tx->kidx[k]];
			tx->modes[mpos + nk] = tx->kexcl[k];
			nk++;
		}
		if (!tx->nested) {
			/* Made now, so that the release cannot fail for want of memory. */
			l->rel = kv_tx_release_new();
			if (l->rel == NULL)
				return -ENOMEM;
		}
		l->nkeys = nk;
		l->keys = keys;
		l->excl = tx->modes + mpos;
		l->whole = tx->whole[of[i]];
		if (l->whole == KV_WHOLE_SHARED && memchr(l->excl, 1, nk) != NULL)
			l->whole = KV_WHOLE_EXCL; /* a write there too: the whole shard, exclusively */
		mpos += nk;
		pos += nk;
		if (nk == 0) {
			/* Only the whole shard: its part runs with the request's arguments. */
			p->argv = kr->argv;
			p->argc = kr->argc;
			goto part;
		}
		p->argv = tx->pool + pos;
		p->argv[0] = kr->argv[0];
		j = 1;
		for (k = 0; k < tx->nkeys; k++) {
			uint32_t s;

			if (key_shard(&kr->argv[tx->kidx[k]]) != of[i])
				continue;
			for (s = 0; s < tx->step && tx->kidx[k] + s < kr->argc; s++)
				p->argv[j++] = kr->argv[tx->kidx[k] + s];
		}
		p->argc = j;
		pos += j;
part:
		p->kr = kr;
		p->fn = gather;
		p->shard = of[i];
		p->kind = tx->nested ? KP_TX_HOP : KP_TX_LOCK;
		p->lock = l;
		p->on_answer = locked_one;
		rb_init(&p->out, p->inl, sizeof(p->inl));
	}
	return 0;
}

void
kv_tx_lock(struct kv_tx *tx, void (*gather)(struct kv_ctx *x), unsigned step, kv_tx_fn next)
{
	tx->next = next;
	tx->step = step ? step : 1;
	if (build(tx, gather) != 0) {
		kv_tx_finish(tx, "-OOM out of memory starting a transaction\r\n", 43);
		return;
	}
	lock_next(tx);
}

static void
steps_done(struct kreq *kr)
{
	struct kv_tx *tx = kr->state;

	kr->cont = NULL;
	tx->next(tx);
}

void
kv_tx_steps(struct kv_tx *tx, kv_tx_fn next)
{
	struct kreq *kr = tx->kr;
	uint32_t i;

	tx->next = next;
	for (i = 0; i < kr->nparts; i++)
		kr->parts[i].kind = KP_TX_HOP;
	kr->cont = steps_done;
	kreq_launch(kr);
}

void
kv_tx_unlock(struct kv_tx *tx)
{
	unsigned i;

	for (i = 0; i < tx->nshards && tx->locks != NULL; i++) {
		kv_tx_release(tx->shard[i], tx->locks[i].hold, tx->locks[i].hold_epoch,
			      &tx->locks[i].rel);
		tx->locks[i].hold = NULL;
	}
}

void
kv_tx_finish(struct kv_tx *tx, const char *reply, size_t n)
{
	struct kreq *kr = tx->kr;
	struct kconn *kc = kr->kc;
	bool was_blocked = tx->blocked;

	if (tx->finished)
		return;
	tx->finished = true;
	kv_tx_unlock(tx);
	kv_tx_await(kc->sh, -1);
	if (reply != NULL) {
		rb_reset(&kr->reply);
		rb_raw(&kr->reply, reply, n);
	}
	kr->cont = NULL;
	if (was_blocked) {
		/* Before the reply is final: the resumed parsing cannot free kr then. */
		tx->blocked = false;
		kv_unblock(kc);
	}
	kr->final = &kr->reply;
	kreq_finish(kr); /* may free kr, and tx with it */
}
