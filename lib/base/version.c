/* SPDX-License-Identifier: MIT */
/* version.c - the library's version string. */
#include "tpe.h"

#define STR_(x) #x
#define STR(x) STR_(x)

const char *
tpe_version(void)
{
	return STR(TPE_VERSION_MAJOR) "." STR(TPE_VERSION_MINOR) "."
	    STR(TPE_VERSION_PATCH);
}
