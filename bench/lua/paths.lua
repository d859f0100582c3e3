-- wrk script cycling through GET paths, one per line of PATHS_FILE: `-- PATHS_FILE [RATE]`.
-- Each thread starts at a random line, so the threads do not ask the same thing together.
-- With RATE (requests/s of each wrk thread), each request waits for the next slot of its
-- thread's schedule, as in paced.lua, so the latencies are those of that rate, not of as many
-- requests as the connections can send.
local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } paths_timespec;
int clock_gettime(int clock, paths_timespec *now);
]]
local CLOCK_MONOTONIC, CATCH_UP_MS = 1, 1000
local clock = ffi.new("paths_timespec")
local paths, at, interval_ms, slot = {}, 0, nil, nil

local function now_ms()
  ffi.C.clock_gettime(CLOCK_MONOTONIC, clock)
  return tonumber(clock.tv_sec) * 1000 + tonumber(clock.tv_nsec) / 1e6
end

function init(args)
  for line in io.lines(args[1]) do paths[#paths + 1] = line end
  math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16))
  at = math.random(#paths)
  -- wrk looks for `delay` after init: unpaced, there is none, and no request waits.
  if args[2] then
    interval_ms = 1000 / tonumber(args[2])
    delay = paced
  end
end

function paced()
  local now = now_ms()
  slot = math.max((slot or now - interval_ms) + interval_ms, now - CATCH_UP_MS)
  return math.max(0, math.floor(slot - now + 0.5))
end

function request()
  at = at % #paths + 1
  return wrk.format("GET", paths[at], nil, nil)
end
