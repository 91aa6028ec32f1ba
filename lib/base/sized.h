/* SPDX-License-Identifier: MIT */
/*
 * sized.h - the growing-struct rule: copy a snapshot the library filled
 * into a public struct whose size the caller gives (tpe_get_stats(3)).
 *
 * Where it sits: lib/base, the bottom layer; it includes only system
 * headers, config.h, tpe.h and base/ (build-aux/check-layering.sh).
 *
 * A public struct that the library fills only grows at its end, and each
 * call that fills one takes the caller's sizeof. The caller's struct may be
 * an older version (a prefix of the library's) or a newer one (the
 * library's plus fields it does not know):
 *   - the library writes at most `size` bytes, never a part of a member:
 *     the members that end within `size` are copied, the caller's bytes
 *     past the last of them are zeroed (so a newer caller sees 0 in the
 *     fields this library does not know);
 *   - a size that does not hold the first member is EINVAL, and nothing
 *     is written.
 * The function that fills one takes a whole, zeroed snapshot of this
 * version (under its lock, if any), then copies it with tpe__sized_copy.
 *
 * Each such struct has its layout here (sized.c); a member added to the
 * struct is added to its layout too.
 */
#ifndef TPE_SIZED_H
#define TPE_SIZED_H

#include <stddef.h>

/* The layout of one growing struct, as this library knows it. */
struct tpe__sized {
	size_t size;        /* sizeof the struct */
	const size_t *ends; /* where each member ends, in order */
	size_t n;           /* entries in ends, at least 1 */
};

/* Where a member ends: the entries of a layout's ends[]. */
#define TPE__END_OF(type, member) \
	(offsetof(type, member) + sizeof(((type *)0)->member))

extern const struct tpe__sized tpe__stats_layout; /* struct tpe_stats */
/* struct tpe_strategy_stats */
extern const struct tpe__sized tpe__strategy_stats_layout;

/* 0 when dst may receive the struct in `size` bytes, else EINVAL. */
int tpe__sized_check(const struct tpe__sized *layout, const void *dst,
    size_t size);

/*
 * Copies the snapshot src (layout->size bytes) to dst (size bytes, checked
 * by tpe__sized_check): the whole members that fit, then zeroes up to size.
 */
void tpe__sized_copy(const struct tpe__sized *layout, void *dst, size_t size,
    const void *src);

/*
 * For a struct too large for a stack (a task may ask for it): where to
 * build the snapshot. dst itself when it holds this version or a newer
 * one (size >= layout->size), else a heap copy; zeroed either way. NULL
 * when that copy cannot be allocated. tpe__sized_out_end delivers it.
 */
void *tpe__sized_out_begin(const struct tpe__sized *layout, void *dst,
    size_t size);

/*
 * Delivers snap, from tpe__sized_out_begin, into dst (size bytes): a heap
 * copy is copied as tpe__sized_copy does and freed; in dst itself, the
 * members newer than this library are zeroed.
 */
void tpe__sized_out_end(const struct tpe__sized *layout, void *dst,
    size_t size, void *snap);

#endif /* TPE_SIZED_H */
