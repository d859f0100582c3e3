-- wrk script POSTing one JSON body again and again: `-- PATH BODY_FILE`.
local path, body, prepared = nil, nil, nil

function init(args)
  path = args[1]
  local file = io.open(args[2], "r")
  body = file:read("*a")
  file:close()
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
