/* SPDX-License-Identifier: MIT */
/*
 * stack.h - the library's one lock-free stack: a Treiber stack of intrusive
 * nodes that any number of threads push onto and that is only ever taken
 * whole (Concurrency Kit's ck_stack_push_upmc / ck_stack_batch_pop_upmc).
 *
 * Where it sits: lib/base, the bottom layer; it includes only system
 * headers, config.h, tpe.h and base/ (build-aux/check-layering.sh).
 *
 * Design notes
 * ------------
 * The stack is one word, `top`: NULL (empty), the newest node, or - for a
 * user that wants them - a marker, a small non-node value (TPE__STACK_MARK)
 * that only the user gives a meaning. A node links to the one pushed
 * before it through a pointer member of the user's choice (`link`).
 *
 * TPE__STACK_DEFINE(name, type, link) writes the operations for one node
 * type, as static inline functions named name_*, taking `type **top`:
 *
 *   bool name_push_mpsc(type **top, type *n)
 *   bool name_push_chain_mpsc(type **top, type *first, type *last)
 *        Any number of threads at once, no lock. Pushes n, or the chain
 *        first .. last (already linked through `link`, first the newest)
 *        with one CAS. True when the stack was empty before (the pusher
 *        that made it non-empty: the one that must wake a consumer).
 *   type *name_push_marked_mpsc(type **top, type *first, type *last,
 *        type *refuse, type *as_empty)
 *        The same, for a word that also holds markers. Returns the top it
 *        replaced. When that top is `refuse` nothing is pushed (and
 *        `refuse` comes back; the chain is the caller's again, last's
 *        link may have been written); when it is `as_empty` the chain
 *        replaces it as if the stack were empty (last's link is NULL).
 *        Either marker
 *        may be NULL for "none" (as_empty NULL is plain pushing). The first
 *        CAS guesses an empty stack (one transfer of the line when the
 *        consumer keeps up).
 *   type *name_push_marked_from_mpsc(type **top, type *first, type *last,
 *        type *refuse, type *as_empty, type *guess)
 *        The same, its first CAS guessing `guess`: the top the caller has
 *        just loaded (it holds the line already; a wrong guess costs a
 *        failed CAS, not a transfer).
 *   type *name_take_all(type **top)
 *        One exchange: the whole stack, newest first (NULL: empty). Any
 *        thread; the word must hold no marker (use take_all_unmarked).
 *        An empty-looking stack is not written (a relaxed look first), so
 *        a NULL is no Dekker load: a caller in such a pair loads with
 *        name_top or name_is_empty first.
 *   type *name_take_all_unmarked(type **top, type *mark_max)
 *        The whole stack with a CAS to NULL, only while the top is a node
 *        (an address above mark_max): a marker is left in place and NULL
 *        comes back.
 *   bool name_is_empty(type *const *top)   seq_cst load: top == NULL.
 *   type *name_top(type *const *top)       seq_cst load of the top.
 *   type *name_reverse(type *h)            a taken chain turned around:
 *        newest-first becomes oldest-first (FIFO), and back.
 *   type *name_reverse_count(type *h, size_t *n)
 *        The same, and *n the number of nodes. The old head h (the newest
 *        node, when h was taken) is the new last node.
 *
 * A debug build asserts at each push that the chain's first node is not
 * already the top (a node given back twice in a row would link to itself
 * and be handed out for ever).
 *
 * No ABA problem: nodes leave the stack only all at once, never one by
 * one, so a CAS that finds the same top as before pushes onto whatever
 * stack is there, and no link under the top is written while the node is
 * in the stack. A node may be pushed again as soon as its taker has it.
 *
 * Memory order: every push's CAS and every take's exchange or CAS is
 * seq_cst. So the push is a release (the node's contents, written before
 * it, are visible to the taker) and the take an acquire (pairs with every
 * push it takes); and both take part in Dekker pairs: a pusher that then
 * loads a "consumer sleeps" word, against a consumer that stores that word
 * and then loads top (tpe__dekker_load: name_top, name_is_empty).
 *
 * On a weakly ordered processor (ARM, POWER, RISC-V) that is enough, and
 * nothing more is assumed:
 *  - the pusher's plain stores (the node's contents, its `link`) come
 *    before the release half of its CAS in program order, so no processor
 *    may make them visible after the new top;
 *  - the taker reads the nodes only after the acquire half of its
 *    exchange or CAS, and reaches each through `link` words written before
 *    their push: it needs no dependency ("consume") ordering, which the
 *    compilers turn into acquire anyway;
 *  - the relaxed loads (the first guess of a push, the look of
 *    take_all) only choose what the CAS or exchange then checks, or skip
 *    an exchange that would have taken nothing;
 *  - the Dekker pairs need the store-then-load order that only seq_cst
 *    gives (POWER: sync; ARMv7: dmb; AArch64: stlr then ldar, which
 *    never pass each other), on the RMW side and on the load side:
 *    name_top and name_is_empty are seq_cst loads for that reason, not
 *    acquire ones.
 */
#ifndef TPE_STACK_H
#define TPE_STACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/atomic.h"
#include "base/sync.h"

/* Marker value k (1, 2, ...) for a stack of `type`: never a node address. */
#define TPE__STACK_MARK(type, k) ((type *)(uintptr_t)(k))

#define TPE__STACK_DEFINE(name, type, link)                               \
static inline __attribute__((unused)) bool                                \
name##_push_chain_mpsc(type **top, type *first, type *last)               \
{                                                                         \
	type *old = tpe__hint_load(top);                                  \
                                                                          \
	do {                                                              \
		TPE__ASSERT(first != old); /* pushed twice in a row */    \
		last->link = old;                                         \
		/* seq_cst: pairs with the take's exchange or CAS. */     \
	} while (!tpe__cas_weak(top, &old, first));                       \
	return old == NULL;                                               \
}                                                                         \
                                                                          \
static inline __attribute__((unused)) bool                                \
name##_push_mpsc(type **top, type *n)                                     \
{                                                                         \
	return name##_push_chain_mpsc(top, n, n);                         \
}                                                                         \
                                                                          \
static inline __attribute__((unused)) type *                              \
name##_push_marked_from_mpsc(type **top, type *first, type *last,         \
    type *refuse, type *as_empty, type *old)                              \
{                                                                         \
	do {                                                              \
		if (refuse != NULL && old == refuse)                      \
			return refuse;                                    \
		TPE__ASSERT(first != old); /* pushed twice in a row */    \
		last->link = as_empty != NULL && old == as_empty ? NULL : \
		    old;                                                  \
		/* seq_cst: pairs with the take's exchange or CAS. */     \
	} while (!tpe__cas_weak(top, &old, first));                       \
	return old;                                                       \
}                                                                         \
                                                                          \
static inline __attribute__((unused)) type *                              \
name##_push_marked_mpsc(type **top, type *first, type *last,              \
    type *refuse, type *as_empty)                                         \
{                                                                         \
	/* Guess empty: one transfer of the line when the consumer keeps  \
	 * up. */                                                         \
	return name##_push_marked_from_mpsc(top, first, last, refuse,     \
	    as_empty, NULL);                                              \
}                                                                         \
                                                                          \
static inline __attribute__((unused)) type *                              \
name##_take_all(type **top)                                               \
{                                                                         \
	/* Cheap look first: an empty stack costs no write of the line. */\
	if (tpe__hint_load(top) == NULL)                                  \
		return NULL;                                              \
	/* seq_cst: pairs with the pushes' CAS. */                        \
	return tpe__exchange(top, (type *)NULL);                          \
}                                                                         \
                                                                          \
static inline __attribute__((unused)) type *                              \
name##_take_all_unmarked(type **top, type *mark_max)                      \
{                                                                         \
	type *h = tpe__hint_load(top);                                    \
                                                                          \
	/* seq_cst: pairs with the pushes' CAS. */                        \
	while ((uintptr_t)h > (uintptr_t)mark_max &&                      \
	    !tpe__cas_weak(top, &h, (type *)NULL))                        \
		;                                                         \
	return (uintptr_t)h > (uintptr_t)mark_max ? h : NULL;             \
}                                                                         \
                                                                          \
static inline __attribute__((unused)) type *                              \
name##_top(type *const *top)                                              \
{                                                                         \
	/* seq_cst: the load side of a Dekker pair with a push. */        \
	return tpe__dekker_load(top);                                     \
}                                                                         \
                                                                          \
static inline __attribute__((unused)) bool                                \
name##_is_empty(type *const *top)                                         \
{                                                                         \
	return name##_top(top) == NULL;                                   \
}                                                                         \
                                                                          \
static inline __attribute__((unused)) type *                              \
name##_reverse_count(type *h, size_t *n)                                  \
{                                                                         \
	type *out = NULL, *next;                                          \
	size_t k = 0;                                                     \
                                                                          \
	for (; h != NULL; h = next, k++) {                                \
		next = h->link;                                           \
		h->link = out;                                            \
		out = h;                                                  \
	}                                                                 \
	*n = k;                                                           \
	return out;                                                       \
}                                                                         \
                                                                          \
static inline __attribute__((unused)) type *                              \
name##_reverse(type *h)                                                   \
{                                                                         \
	size_t n;                                                         \
                                                                          \
	return name##_reverse_count(h, &n);                               \
}

#endif /* TPE_STACK_H */
