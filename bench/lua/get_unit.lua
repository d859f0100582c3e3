-- GET one unit by a random id from ids.txt.
local ids = {}
function init(args)
  for line in io.lines(args[1]) do ids[#ids + 1] = line end
  math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16))
end
function request()
  local id = ids[math.random(#ids)]
  return wrk.format("GET", "/api/v2/units/" .. id, nil, nil)
end
