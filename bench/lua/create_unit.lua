-- POST a realistic unit (body from unit.json).
local body
function init(args)
  local file = io.open(args[1], "r")
  body = file:read("*a")
  file:close()
end
-- wrk.format replaces wrk.headers (which hold -H Authorization) when given a table.
function with_content_type(media)
  local headers = {}
  for name, value in pairs(wrk.headers) do headers[name] = value end
  headers["Content-Type"] = media
  return headers
end

function request()
  return wrk.format("POST", "/api/v2/units/", with_content_type("application/json"), body)
end
