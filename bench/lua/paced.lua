-- wrk script POSTing one JSON body at a fixed rate: `-- PATH BODY_FILE RATE`, RATE the
-- requests/s of each wrk thread. Every request waits for the next slot of its thread's
-- schedule (slots 1/RATE s apart, on the monotonic clock), so the rate holds whatever the
-- connections' latency, as long as enough connections are free. A thread that fell behind
-- sends at once, making up at most a second of missed slots.
local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } paced_timespec;
int clock_gettime(int clock, paced_timespec *now);
]]
local CLOCK_MONOTONIC, CATCH_UP_MS = 1, 1000
local clock = ffi.new("paced_timespec")
local path, body, prepared, interval_ms, slot = nil, nil, nil, nil, nil

local function now_ms()
  ffi.C.clock_gettime(CLOCK_MONOTONIC, clock)
  return tonumber(clock.tv_sec) * 1000 + tonumber(clock.tv_nsec) / 1e6
end

function init(args)
  path = args[1]
  local file = io.open(args[2], "r")
  body = file:read("*a")
  file:close()
  interval_ms = 1000 / tonumber(args[3])
end

function delay()
  local now = now_ms()
  slot = math.max((slot or now - interval_ms) + interval_ms, now - CATCH_UP_MS)
  return math.max(0, math.floor(slot - now + 0.5))
end

-- wrk.format replaces wrk.headers (which hold -H Authorization) when given a table.
function request()
  if prepared == nil then
    local headers = {}
    for name, value in pairs(wrk.headers) do headers[name] = value end
    headers["Content-Type"] = "application/json"
    prepared = wrk.format("POST", path, headers, body)
  end
  return prepared
end
