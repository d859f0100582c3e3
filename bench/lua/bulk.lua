-- wrk script for atomic bulk updates by id: `-- ITEMS IDS_FILE`. Each request sets a new
-- price on ITEMS distinct units picked at random from IDS_FILE (one id per line).
local items, ids = 10, {}

function init(args)
  items = tonumber(args[1])
  for line in io.lines(args[2]) do ids[#ids + 1] = line end
  math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16))
end

function request()
  local picked, parts = {}, {}
  while #parts < items do
    local id = ids[math.random(#ids)]
    if not picked[id] then
      picked[id] = true
      parts[#parts + 1] = '{"id": "' .. id .. '", "price": ' .. math.random(1000000, 9000000) .. '}'
    end
  end
  local body = '{"atomic": true, "units": [' .. table.concat(parts, ", ") .. ']}'
  local headers = {}
  for name, value in pairs(wrk.headers) do headers[name] = value end
  headers["Content-Type"] = "application/json"
  return wrk.format("PUT", "/api/v2/units/bulk/update", headers, body)
end
