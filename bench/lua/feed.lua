-- wrk script for feed pages: `-- HEAD LIMIT`: GET /api/v2/events after a random position.
local head, limit = 0, 100

function init(args)
  head, limit = tonumber(args[1]), tonumber(args[2])
  math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16))
end

function request()
  local after = math.random(0, math.max(head - limit, 0))
  return wrk.format("GET", "/api/v2/events?after=" .. after .. "&limit=" .. limit, nil, nil)
end
