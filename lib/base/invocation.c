/* SPDX-License-Identifier: MIT */
/* invocation.c - tpe_in_non_blocking() (invocation.h). */
#include "base/invocation.h"

TPE__TLS bool tpe__tls_non_blocking;

bool
tpe_in_non_blocking(void)
{
	return tpe__tls_non_blocking;
}
