/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Steering for the listener drain. The kernel keeps the SO_REUSEPORT sockets of one port
 * in an array (in listen(2) order; a socket that stops listening is replaced by the last
 * one) and, with a classic BPF program attached, gives a new connection to the socket at
 * the index the program returns. The listener mirrors that array (group[], under
 * steer_lock, every listen and every stop of a socket done while holding it), so a
 * program that spreads connections over the sockets not leaving can be built at any time.
 */
#include <errno.h>
#include <linux/filter.h>
#include <pthread.h>
#include <sys/socket.h>

#include "net_listen_internal.h"

#define L cr__net_log

/*
 * Attach a program that spreads new connections over the sockets not leaving (by the
 * packet's hash, or at random when it has none), or detach it when no socket is
 * leaving or none would stay. steer_lock held. A failure only costs the steering: the
 * leaving socket then keeps taking connections until it closes, and hands them off.
 */
void
cr__steer_update(struct cr_listener *l)
{
	struct sock_filter code[5 + 2 * CR_MAX_LCORES];
	struct sock_fprog prog = {.filter = code};
	unsigned stay[CR_MAX_LCORES], n = 0, i, k = 0;
	int fd, zero = 0;

	if (l->n_group == 0) {
		l->steering = false; /* the kernel's group went with its last socket */
		return;
	}
	fd = l->shards[l->group[0]].fd;
	for (i = 0; i < l->n_group; i++)
		if (!l->shards[l->group[i]].leaving)
			stay[n++] = i;
	if (l->n_leaving == 0 || n == 0) {
		if (l->steering &&
		    setsockopt(fd, SOL_SOCKET, SO_DETACH_REUSEPORT_BPF, &zero, sizeof(zero)) != 0)
			CR_LOG(L, WARNING, "cannot detach the reuseport program: %s",
			       cr_strerror(-errno));
		l->steering = false;
		return;
	}
	code[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
						 (uint32_t)(SKF_AD_OFF + SKF_AD_RXHASH));
	code[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1);
	code[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
						 (uint32_t)(SKF_AD_OFF + SKF_AD_RANDOM));
	code[k++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, n);
	for (i = 0; i < n; i++) {
		code[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, i, 0, 1);
		code[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, stay[i]);
	}
	code[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, stay[0]);
	prog.len = (unsigned short)k;
	if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof(prog)) != 0) {
		if (!l->steer_failed)
			CR_LOG(L, WARNING,
			       "cannot steer connections away from a retiring lcore: %s",
			       cr_strerror(-errno));
		l->steer_failed = true;
		return;
	}
	l->steering = true;
}

/* A socket now listening joins the end of the array. steer_lock held. */
void
cr__group_join(struct cr_listener *l, struct net_shard *sh)
{
	sh->in_group = true;
	l->group[l->n_group++] = sh->lcore;
}

/*
 * Stop listening now, in the kernel and in the mirror: the last socket moves into the
 * hole, as the kernel does it (reuseport_detach_sock). shutdown(2) unhashes a listening
 * socket at once, whoever else holds a reference to its file. steer_lock held.
 */
static void
group_leave(struct cr_listener *l, struct net_shard *sh)
{
	unsigned i;

	if (!sh->in_group)
		return;
	(void)shutdown(sh->fd, SHUT_RD);
	sh->in_group = false;
	for (i = 0; i < l->n_group && l->group[i] != sh->lcore; i++)
		;
	assert(i < l->n_group);
	l->group[i] = l->group[--l->n_group];
	if (sh->leaving) {
		sh->leaving = false;
		l->n_leaving--;
	}
	cr__steer_update(l);
}

void
cr__group_leave_locked(struct cr_listener *l, struct net_shard *sh)
{
	pthread_mutex_lock(&l->steer_lock);
	group_leave(l, sh);
	pthread_mutex_unlock(&l->steer_lock);
}

/*
 * Steer new connections away from @p sh. False when no other socket would take them
 * (the last one, or everything is stopping): then it just closes.
 */
bool
cr__group_steer_away(struct cr_listener *l, struct net_shard *sh)
{
	bool others;

	pthread_mutex_lock(&l->steer_lock);
	others = sh->in_group && l->n_group - l->n_leaving > 1;
	if (others) {
		sh->leaving = true;
		l->n_leaving++;
		cr__steer_update(l);
	}
	pthread_mutex_unlock(&l->steer_lock);
	return others;
}

/* The lcores whose socket stays, into @p ids, starting round robin; returns how many. */
unsigned
cr__group_staying(struct cr_listener *l, unsigned *ids)
{
	unsigned i, n = 0;

	pthread_mutex_lock(&l->steer_lock);
	for (i = 0; i < l->n_group; i++) {
		unsigned cand = l->group[(l->steer_rr + i) % l->n_group];

		if (!l->shards[cand].leaving)
			ids[n++] = cand;
	}
	if (l->n_group != 0)
		l->steer_rr = (l->steer_rr + 1) % l->n_group;
	pthread_mutex_unlock(&l->steer_lock);
	return n;
}
