-- SPDX-License-Identifier: MIT
-- http-mix.lua - the wrk script of bench/http.sh's blocking mix: one
-- request in HTTP_MIX_EVERY (default 10) asks its handler to block for
-- HTTP_MIX_SLEEP_MS milliseconds (default 20) with GET /?sleep=MS; the
-- others are plain GET / and answer at once. The mix is counted, not
-- drawn at random, so every run sends the same fraction.

local every = tonumber(os.getenv("HTTP_MIX_EVERY")) or 10
local sleep_ms = tonumber(os.getenv("HTTP_MIX_SLEEP_MS")) or 20
local n = 0
local plain, slow

-- Each wrk thread runs this file in a Lua state of its own.
function init(args)
	plain = wrk.format("GET", "/")
	slow = wrk.format("GET", "/?sleep=" .. sleep_ms)
end

function request()
	n = n + 1
	if n % every == 0 then
		return slow
	end
	return plain
end
