-- PATCH one field (price) of a random unit.
local ids = {}
function init(args)
  for line in io.lines(args[1]) do ids[#ids + 1] = line end
  math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16))
end
-- wrk.format replaces wrk.headers (which hold -H Authorization) when given a table.
function with_content_type(media)
  local headers = {}
  for name, value in pairs(wrk.headers) do headers[name] = value end
  headers["Content-Type"] = media
  return headers
end

function request()
  local id = ids[math.random(#ids)]
  local body = '{"price": ' .. math.random(1000000, 9000000) .. '}'
  return wrk.format("PATCH", "/api/v2/units/" .. id,
                    with_content_type("application/merge-patch+json"), body)
end
