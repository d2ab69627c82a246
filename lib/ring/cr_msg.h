/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * A message: a handler and its argument, the unit cr_send() carries to an lcore and the
 * 16-byte element of every message ring. Plain C, no DPDK: apps include this (through
 * cr_reactor.h) without seeing how the rings are built.
 */
#ifndef CR_MSG_H
#define CR_MSG_H

#ifdef __cplusplus
extern "C" {
#endif

/** A message handler. Runs on the receiving lcore; must not block. */
typedef void (*cr_msg_fn)(void *arg);

/** One message: copied by value into the target's ring. */
struct cr_msg {
	cr_msg_fn fn;
	void *arg;
};
_Static_assert(sizeof(struct cr_msg) == 16, "messages are 16-byte ring elements");

#ifdef __cplusplus
}
#endif
#endif /* CR_MSG_H */
