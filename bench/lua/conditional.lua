-- wrk script of conditional GETs: `-- FILE`, each line a path, a tab and the ETag its page
-- answered; each request sends that ETag as If-None-Match (a client whose copy is current).
local lines, at = {}, 0

function init(args)
  for line in io.lines(args[1]) do
    local path, tag = line:match("^(.-)\t(.*)$")
    lines[#lines + 1] = { path, tag }
  end
  math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16))
  at = math.random(#lines)
end

function request()
  at = at % #lines + 1
  return wrk.format("GET", lines[at][1], { ["If-None-Match"] = lines[at][2] }, nil)
end
