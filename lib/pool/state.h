/* SPDX-License-Identifier: MIT */
/* state.h - a pool's lifecycle states (pool.h has the transitions). */
#ifndef TPE_STATE_H
#define TPE_STATE_H

enum tpe__state {
	TPE__RUNNING,
	TPE__SHUTDOWN,
	TPE__STOP,
	TPE__TIDYING,
	TPE__TERMINATED
};

#endif /* TPE_STATE_H */
