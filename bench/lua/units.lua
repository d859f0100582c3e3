-- wrk script for the single-unit scenarios: `-- get|create|patch DATA_FILE`.
-- get and patch pick a random id from DATA_FILE (one per line); create POSTs its content.
local mode, ids, body = nil, {}, nil

function init(args)
  mode = args[1]
  if mode == "create" then
    local file = io.open(args[2], "r")
    body = file:read("*a")
    file:close()
  else
    for line in io.lines(args[2]) do ids[#ids + 1] = line end
  end
  math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16))
end

-- wrk.format replaces wrk.headers (which hold -H Authorization) when given a table.
local function with_content_type(media)
  local headers = {}
  for name, value in pairs(wrk.headers) do headers[name] = value end
  headers["Content-Type"] = media
  return headers
end

function request()
  if mode == "create" then
    return wrk.format("POST", "/api/v2/units/", with_content_type("application/json"), body)
  end
  local path = "/api/v2/units/" .. ids[math.random(#ids)]
  if mode == "patch" then
    local patch = '{"price": ' .. math.random(1000000, 9000000) .. '}'
    return wrk.format("PATCH", path, with_content_type("application/merge-patch+json"), patch)
  end
  return wrk.format("GET", path, nil, nil)
end
