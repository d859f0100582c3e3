-- wrk script cycling through GET paths, one per line of PATHS_FILE: `-- PATHS_FILE`.
-- Each thread starts at a random line, so the threads do not ask the same thing together.
local paths, at = {}, 0

function init(args)
  for line in io.lines(args[1]) do paths[#paths + 1] = line end
  math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16))
  at = math.random(#paths)
end

function request()
  at = at % #paths + 1
  return wrk.format("GET", paths[at], nil, nil)
end
