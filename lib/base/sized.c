/* SPDX-License-Identifier: MIT */
/* sized.c - the layouts of the growing structs, and their copy (sized.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/sized.h"
#include "tpe.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static const size_t stats_ends[] = {
	TPE__END_OF(struct tpe_stats, pool_size),
	TPE__END_OF(struct tpe_stats, core_size),
	TPE__END_OF(struct tpe_stats, max_size),
	TPE__END_OF(struct tpe_stats, active),
	TPE__END_OF(struct tpe_stats, idle),
	TPE__END_OF(struct tpe_stats, largest_pool_size),
	TPE__END_OF(struct tpe_stats, queued),
	TPE__END_OF(struct tpe_stats, reserved),
	TPE__END_OF(struct tpe_stats, submitted),
	TPE__END_OF(struct tpe_stats, completed),
	TPE__END_OF(struct tpe_stats, rejected),
	TPE__END_OF(struct tpe_stats, blocked),
	TPE__END_OF(struct tpe_stats, compensations),
};
_Static_assert(TPE__END_OF(struct tpe_stats, compensations) ==
    sizeof(struct tpe_stats), "stats_ends lists every member");
const struct tpe__sized tpe__stats_layout = {
	sizeof(struct tpe_stats), stats_ends, N_OF(stats_ends)
};

static const size_t strategy_stats_ends[] = {
	TPE__END_OF(struct tpe_strategy_stats, pc),
	TPE__END_OF(struct tpe_strategy_stats, pic),
	TPE__END_OF(struct tpe_strategy_stats, pec),
	TPE__END_OF(struct tpe_strategy_stats, epc),
};
_Static_assert(TPE__END_OF(struct tpe_strategy_stats, epc) ==
    sizeof(struct tpe_strategy_stats), "strategy_stats_ends lists every member");
const struct tpe__sized tpe__strategy_stats_layout = {
	sizeof(struct tpe_strategy_stats), strategy_stats_ends,
	N_OF(strategy_stats_ends)
};

int
tpe__sized_check(const struct tpe__sized *layout, const void *dst,
    size_t size)
{
	return dst != NULL && size >= layout->ends[0] ? 0 : EINVAL;
}

void
tpe__sized_copy(const struct tpe__sized *layout, void *dst, size_t size,
    const void *src)
{
	size_t n = 0, i;

	if (size >= layout->size)
		n = layout->size; /* the caller's version is this one or newer */
	else
		for (i = 0; i < layout->n && layout->ends[i] <= size; i++)
			n = layout->ends[i];
	memcpy(dst, src, n);
	memset((char *)dst + n, 0, size - n);
}

void *
tpe__sized_out_begin(const struct tpe__sized *layout, void *dst, size_t size)
{
	if (size < layout->size)
		return calloc(1, layout->size);
	memset(dst, 0, layout->size);
	return dst;
}

void
tpe__sized_out_end(const struct tpe__sized *layout, void *dst, size_t size,
    void *snap)
{
	if (snap != dst) {
		tpe__sized_copy(layout, dst, size, snap);
		free(snap);
	} else if (size > layout->size) {
		memset((char *)dst + layout->size, 0, size - layout->size);
	}
}
