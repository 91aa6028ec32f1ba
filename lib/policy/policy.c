/* SPDX-License-Identifier: MIT */
/* policy.c - the table of sizing policies (policy.h). */
#include <errno.h>
#include <string.h>

#include "policy/policy.h"

static const struct {
	enum tpe_policy policy;
	void (*setup)(struct tpe__policy *p);
} policies[] = {
	{ TPE_POLICY_QUEUE_FIRST, tpe__queue_first_setup },
	{ TPE_POLICY_SCALE_FIRST, tpe__scale_first_setup },
};

/* Queue-first, Java's: the three steps, then the configured rejection. */
void
tpe__queue_first_setup(struct tpe__policy *p)
{
	p->name = "queue-first";
}

int
tpe__policy_setup(enum tpe_policy policy, enum tpe__verdict rejection,
    struct tpe__policy *p)
{
	size_t i, k;

	for (i = 0; i < sizeof(policies) / sizeof(policies[0]); i++) {
		if (policies[i].policy != policy)
			continue;
		memset(p, 0, sizeof(*p));
		policies[i].setup(p);
		/* The configured rejection ends every list; a setup leaves
		 * room for it (TPE__VERDICTS_MAX). */
		for (k = 0; k < TPE__VERDICTS_MAX - 1 &&
		    p->verdicts[k] != TPE__VERDICT_NONE; k++)
			;
		p->verdicts[k] = rejection;
		return 0;
	}
	return EINVAL;
}
